"""Models the runner can iterate or train: ALBERT via transformers, reference maps, ...

Importing this package is light: its modules that need torch (the models themselves) are imported
when one of their names is first asked of the package (``models.AlbertMap``), and transformers only
inside the functions that load or build ALBERT (it takes seconds to import). A command that
computes nothing (``plan`` of a finished run) imports neither (tests/runner/test_light_commands.py).
"""

from importlib import import_module

#: What the package exports, by the module that defines it.
_EXPORTS = {
    "AlbertMap": "albert", "load_albert": "albert",
    "ModelLoadError": "hub", "load_tokenizer": "hub",
    "DynamicalMap": "base", "MapInputs": "base",
    "TruncatedNormalInit": "init", "apply_truncated_normal": "init",
    "MAPS": "maps", "build_map": "maps", "params_model": "maps",
    "build_tiny_albert": "tiny",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    """``models.NAME``: the name from the module that defines it, imported on first use (PEP 562)."""
    if name in _EXPORTS:
        value = getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
