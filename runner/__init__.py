"""transient's runner. The Python API is :mod:`runner.api` (``from runner import api``;
``api.plan(spec)``, ``api.apply(spec)``: ``runner.core.plan`` and ``runner.run.apply`` are the modules that
do the work); ``runner.load_spec``, ``runner.open`` and ``runner.on_common_steps`` are re-exported
here, imported on first use so that ``runner --help`` stays fast."""

API = ("load_spec", "open", "on_common_steps")


def __getattr__(name: str):
    if name in API:
        from runner import api  # lazy: filelock, numpy, pydantic

        return getattr(api, name)
    raise AttributeError(f"module 'runner' has no attribute {name!r}")
