"""The Python API: what ``runner plan``, ``runner apply`` and reading a store do, from a notebook
or a script, with the same validation, the same tasks and the same store as the CLI.

    from runner import api
    spec = api.load_spec("specs/quickstart.toml", overrides=["experiment.seed=3"])
    print(api.plan(spec).summary())
    api.apply(spec)
    ds = api.open("store/quickstart.zarr")             # an xarray.Dataset
    steps = api.on_common_steps(ds)                    # the measures' step axes as one ``step``

A spec is a TOML file or a dict of its tables (``{"experiment": {...}, "model": [...], ...}``);
errors are the CLI's exceptions (:class:`runner.spec.specfile.SpecError` with one line per problem,
:class:`runner.spec.overrides.OverrideError`, :class:`runner.run.apply.Unmet`,
:class:`runner.run.apply.ReplaceRefused`, :class:`NotAStore`,
:class:`runner.storage.location.BadLocation`, ...), each a :class:`runner.core.errors.RunnerError`
with the CLI's message and its ``exit_code``: ``except RunnerError`` catches every failure, and no
library's exception (zarr's, xarray's, botocore's, tomli_w's) is let through for bad input.
Arguments are checked at the boundary, strictly (``replace="no"`` is not a boolean, one string is
not a list of overrides, ``threads=0`` is no thread count, a dict spec holds no ``None``):
:class:`ApiArgumentError` names the function, the argument and what it got.
"""

from __future__ import annotations

import datetime
import functools
import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tomli_w
from pydantic import ConfigDict, ValidationError, validate_call

from runner.core.commandline import program
from runner.core.errors import Unavailable, UsageError
from runner.core.layout import counted, with_internal
from runner.core.plan import plan_rows
from runner.run.apply import Outcome, Unmet, apply_sweep, check_shards, options_problem, states
from runner.run.prepare import prepare_all, read_spec
from runner.run.apply import apply as apply_one
from runner.run.execute.registry import ExecutorOptions, executor_problem
from runner.spec.specfile import SpecFile
from runner.spec.sweep import is_sweep
from runner.storage.history import versions
from runner.storage.location import location
from runner.storage.readers import reading
from runner.storage.store import check_reachable, node_type, runner_dir, store_id
from runner.storage.verify import StoreDamaged, StoreUnreadable, spec_of, verify


class ApiArgumentError(UsageError):
    """An argument of the Python API of the wrong type or value; the message names the function and
    the argument."""


def checked(func):
    """``func`` with its arguments validated strictly against its annotations (pydantic's
    ``validate_call``); a mismatch raises :class:`ApiArgumentError`."""
    validated = validate_call(func, config=ConfigDict(strict=True, arbitrary_types_allowed=True))
    names = list(inspect.signature(func).parameters)

    @functools.wraps(func)
    def call(*args, **kwargs):
        try:
            return validated(*args, **kwargs)
        except ValidationError as err:
            first = err.errors()[0]
            head, *rest = first["loc"] or ("arguments",)
            where = (names[head] if isinstance(head, int) and head < len(names) else str(head)) + "".join(
                f"[{x}]" for x in rest if isinstance(x, int))  # the union's member names left out
            raise ApiArgumentError(f"runner.api.{func.__name__}: {where}: {first['msg']} "
                                   f"(got {first.get('input')!r})") from None

    return call


class NotAStore(Unavailable, FileNotFoundError):
    """A path with no store to open: nothing there, or a part of a store (an array's folder)."""


#: The name a spec given as a dict goes by in messages (its relative paths resolve from the working directory).
DICT_SPEC = Path("<dict>")


@checked
def load_spec(spec: str | Path | dict | SpecFile, overrides: Sequence[str] = ()) -> SpecFile:
    """A spec's tables (a file's, or a dict's) with ``overrides`` (``"model[0].seed=3"``) set.
    Validation happens in :func:`plan` and :func:`apply`, as in the CLI. Raises
    :class:`runner.spec.specfile.SpecMissing` for no such file,
    :class:`runner.spec.overrides.OverrideError` for a malformed override (or a key set twice) and
    :class:`ApiArgumentError` for a dict that TOML cannot hold (a ``None``, a set, a key not a string)."""
    if isinstance(spec, dict):
        problem = _toml_problem(spec, "spec")
        if problem:
            raise ApiArgumentError(f"runner.api.load_spec: {problem}")
        spec = SpecFile(DICT_SPEC, tomli_w.dumps(spec), spec, located=False)  # the text: for the provenance
    return read_spec(spec, overrides)


def _toml_problem(value: Any, where: str) -> str | None:
    """Why ``value`` (a spec given as a dict, at ``where``) cannot be a spec's TOML, or None: a key
    that is not a string, or a value TOML has no type for (None, a set, an object)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where}: the key {key!r} is not a string (a spec's tables and keys are named by strings)"
            if (problem := _toml_problem(item, f"{where}[{key!r}]")) is not None:
                return problem
        return None
    if isinstance(value, (list, tuple)):
        return next((p for i, item in enumerate(value) if (p := _toml_problem(item, f"{where}[{i}]")) is not None), None)
    if isinstance(value, (str, bool, int, float, datetime.date, datetime.time)):
        return None
    fix = " (leave the key out for its default)" if value is None else ""
    return f"{where}: {value!r} is not a TOML value (strings, numbers, booleans, dates, lists and tables){fix}"


@dataclass
class Plan:
    """A resolved spec: one :class:`runner.plugin.study.Prepared` per point (one without a sweep)."""

    sweep: Any
    """The :class:`runner.spec.sweep.Sweep`, or None."""
    prepared: list

    @property
    def unmet(self) -> list[str]:
        """Requirements this machine does not meet (``apply`` refuses while there are any)."""
        return list(dict.fromkeys(u for p in self.prepared for u in p.unmet))

    @property
    def store(self) -> Path:
        return self.sweep.root if self.sweep is not None else self.prepared[0].store_path

    def tasks(self) -> list[dict]:
        """Every task with its state (``done``, ``pending``, ``blocked``, ``unresolved``), as
        ``plan --json`` lists them, with the point's name for a sweep."""
        names = [pt.name for pt in self.sweep.points] if self.sweep is not None else [None]
        return [{**row, **({"point": name} if name else {})}
                for name, p in zip(names, self.prepared, strict=True) for row in plan_rows(p.tasks, states(p), p.labels)]

    def summary(self) -> str:
        rows = self.tasks()
        done = sum(r["state"] == "done" for r in rows)
        if self.unmet:
            return f"{len(rows)} tasks, not resolved until requirements are met: " + "; ".join(self.unmet)
        return f"{len(rows) - done} to run, {done} done; store {self.store}"


@checked
def plan(spec: str | Path | dict | SpecFile, overrides: Sequence[str] = ()) -> Plan:
    """Validate and resolve a spec (:class:`runner.spec.specfile.SpecError` listing every problem)."""
    sweep, prepared = prepare_all(load_spec(spec, overrides))
    return Plan(sweep, prepared)


@checked
def apply(spec: str | Path | dict | SpecFile | Plan, overrides: Sequence[str] = (), *, executor: str = "local",
          address: str | None = None, shards: int = 1, device: str | None = None, replace: bool = False,
          threads: int | None = None, quiet: bool = True) -> Outcome:
    """Run what the store is missing, as ``runner apply`` does (resumable: call it again after an
    interruption). The options are checked first, as the CLI's flags are (:class:`ApiArgumentError`:
    a device this machine lacks, ``shards`` < 1, ``threads`` outside 1..4096, an unknown executor,
    ``address`` without ``executor="ray"``, ``overrides`` with a :class:`Plan`). Raises
    :class:`runner.run.apply.Unmet` for requirements this machine does not meet and
    :class:`runner.run.apply.ReplaceRefused` before replacing finished results without ``replace``."""
    problem = options_problem(device=device, shards=shards, threads=threads, executor=executor, address=address,
                              flag=lambda name, value=None: name if value is None else f"{name}={value!r}")
    if problem:
        raise ApiArgumentError(f"runner.api.apply: {problem}")
    if isinstance(spec, Plan) and overrides:
        raise ApiArgumentError("runner.api.apply: overrides: a Plan is resolved already; give the overrides to "
                               "runner.api.plan(spec, overrides), or the spec itself to apply")
    planned = spec if isinstance(spec, Plan) else plan(spec, overrides)
    unmet = planned.unmet + ([problem] if (problem := executor_problem(executor)) else [])
    if unmet:
        raise Unmet(unmet)
    options = ExecutorOptions(executor, address, shards)
    for p in planned.prepared:
        check_shards(p, shards)
    kw = dict(device=device, quiet=quiet, executor=options, replace=replace, threads=threads)
    if planned.sweep is None:
        return apply_one(planned.prepared[0], **kw)
    return apply_sweep(planned.sweep, planned.prepared, **kw)


@checked
def open(store: str | Path, *, history: bool = False):  # noqa: A001  (runner.open, as xr.open_zarr)
    """A store as an ``xarray.Dataset``; a sweep's store as a ``DataTree`` (one node per point; or
    :func:`runner.spec.sweep.open_sweep` for one dataset with a dimension per swept key). With
    ``history``, a ``DataTree`` of the store as it is (``/current``) and each version that
    ``apply --replace`` kept (``/history/<version>``, oldest first). Raises
    :class:`runner.storage.location.BadLocation` for a location that names no store (``gs://``, a
    malformed bucket, ``~``), :class:`runner.storage.store_errors.StoreUnreachable` for a bucket that
    does not answer and :class:`NotAStore` for a path with no store (or a part of one, or corrupt
    metadata): all :class:`runner.core.errors.Unavailable` (66). A store of this runner whose
    recorded chunks are not all there (checked without reading them, as ``plan`` does), or that
    cannot be read, is :class:`runner.storage.verify.StoreDamaged` (74; ``runner verify`` reads
    every chunk back)."""
    import xarray as xr  # lazy: xarray

    path = location(store)
    check_reachable(path)  # a bucket that cannot be reached: one line naming the store (StoreUnreachable)
    if not (path / "zarr.json").exists():
        older = " (a zarr format 2 store; this runner reads its own stores, format 3)" if (path / ".zgroup").exists() else ""
        raise NotAStore(f"{path}: no store here{older or f' (run `{program()} apply` on its spec first)'}")
    node = node_type(path)
    if node is None:
        raise NotAStore(f"{path}: its metadata {path / 'zarr.json'} is corrupt (not JSON), so it cannot be opened")
    if node != "group":
        raise NotAStore(f"{path}: {'an array' if node == 'array' else 'a part'} of a store, not a store; open the "
                        f"store that holds it ({path.parent})")
    if not is_sweep(path) and store_id(path) is not None:  # a store of this runner: its recorded chunks all there
        with reading(runner_dir(path)):  # not while apply switches a new version in (runner.storage.readers)
            damage = verify(path, quick=True)
        if not damage.ok:
            raise StoreDamaged(damage.summary(spec_of(path)))
    tree_of = (lambda p: xr.open_datatree(p, engine="zarr", consolidated=False)) if is_sweep(path) else \
        (lambda p, what="store": xr.DataTree(_dataset(p, what)))
    read = functools.partial(_read, tree_of)
    if not history:
        with reading(runner_dir(path)):
            return read(path) if is_sweep(path) else _read(_dataset, path)
    tree = xr.DataTree()
    with reading(runner_dir(path)):
        tree["current"] = read(path)
        for v in versions(path):
            if "unreadable" in v.manifest:
                raise StoreDamaged(f"kept version {v.name} of {path}: {v.manifest['unreadable']}")
            if not is_sweep(path):
                try:
                    damage = verify(v.store, quick=True, version=v)
                except StoreUnreadable as err:  # its store gone or corrupt: the version is damaged
                    raise StoreDamaged(f"kept version {v.name} of {path}: {err}; `{program()} history {path}` lists "
                                       "the versions") from None
                if not damage.ok:
                    raise StoreDamaged(f"kept version {v.name}: {damage.summary()}")
            tree[f"history/{v.name}"] = read(v.store) if is_sweep(path) else _read(_dataset, v.store, f"kept version {v.name}")
    return tree


def _dataset(path, what: str = "store"):
    """A store's lazy dataset; on a local disk pinned to the version opened (its reads after a switch or a
    removal raise :class:`runner.storage.pinned.VersionSwitched`, never another version's values)."""
    import xarray as xr  # lazy: xarray

    return xr.open_zarr(location(path).reader_store(what), consolidated=False)


def _read(read, path, *args):
    """``read(path, *args)``, a damaged store (metadata corrupt, a version's store gone) told as
    :class:`runner.storage.verify.StoreDamaged` (74) naming it, never zarr's or xarray's exception."""
    try:
        return read(path, *args)
    except Exception as err:  # noqa: BLE001 - whatever zarr or xarray raise on a damaged store
        line = (str(err).strip().splitlines() or [""])[0]
        raise StoreDamaged(f"{path}: cannot be read ({type(err).__name__}: {line}); `{program()} verify {path}` says what is "
                           "damaged") from None


def on_common_steps(ds, dim: str = "step"):
    """The variables of ``ds`` whose time axis is a step dimension of their own (``lyapunov_step``
    every tau steps, ``neff_step`` every step, ...) on one ``dim`` holding every step any of them
    has; NaN where a variable was not sampled. Other variables are kept as they are. ``ds`` is one
    store's dataset (:func:`open`); a sweep's tree is refused: align each point's dataset."""
    import xarray as xr  # lazy: xarray

    if isinstance(ds, xr.DataTree):
        raise ApiArgumentError("runner.api.on_common_steps: ds is a sweep's (or history's) DataTree; pass one "
                               "point's dataset (tree[NAME].to_dataset()) or runner.spec.sweep.open_sweep(store)")
    if not isinstance(ds, xr.Dataset):
        raise ApiArgumentError(f"runner.api.on_common_steps: ds: an xarray.Dataset (runner.api.open(store)), "
                               f"not {type(ds).__name__}")
    if not isinstance(dim, str) or not dim:
        raise ApiArgumentError(f"runner.api.on_common_steps: dim: a dimension name, not {dim!r}")

    axes = [d for d in ds.dims if str(d).endswith("_step") and d in ds.coords and counted(ds[d].attrs) == "steps"]
    if not axes:
        return ds
    if dim in ds.variables:  # a store with checkpoints: its `step` is each checkpoint's training step
        raise ApiArgumentError(f"runner.api.on_common_steps: this dataset has a {dim!r} of its own (dims "
                               f"{dict(ds[dim].sizes)}), which the aligned axes would replace; pass another dim= "
                               f"(its step axes: {', '.join(map(str, axes))})")
    steps = np.unique(np.concatenate([ds[d].values for d in axes]))
    out = {}
    for name, v in ds.data_vars.items():
        own = [d for d in v.dims if d in axes]
        if len(own) == 1:
            v = v.rename({own[0]: dim}).reindex({dim: steps})
        out[name] = v
    aligned = xr.Dataset(out, attrs=ds.attrs)
    named = {"units": "1", "long_name": "step of the iterated map (every measure's steps)"}
    aligned[dim].attrs.update(with_internal(named, counts="steps"))
    return aligned
