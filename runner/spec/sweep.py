"""Sweeps: a ``[sweep]`` table turns one spec into a grid of runs stored together.

```toml
[sweep.input]
tokens = [8, 16, 32, 64, 128]      # Fig. 2B: synchronisation offset against N_w
```

Each key of a ``[sweep.<table>]`` names a key of that table of the spec (``[sweep.<table>.<sub>]``
a key of its sub-table ``[<table>.<sub>]``); several keys span their product. Every point of the grid is the spec with those values, run as its own experiment into
its own store inside the sweep's store: ``store/<name>.zarr/tokens=8`` (a zarr group of the
sweep's group; its event log and lock under ``store/<name>.runner/tokens=8``). So a point that is
done is never recomputed, and a value added to the grid computes only that point.
``xr.open_datatree(store)`` reads the points as they are; :func:`open_sweep` combines them into
one dataset with each swept key as a dimension (named after the key, e.g. ``tokens``).
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import math
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.core.formats import STORE_FORMAT
from runner.spec.specfile import SpecError, SpecFile
from runner.storage.store_errors import writing

if TYPE_CHECKING:  # pragma: no cover
    import xarray as xr

TABLE = "sweep"
ATTR = "sweep"
MAX_POINTS = 1000
"""The most points a sweep may hold: each is its own experiment, validated, planned and stored on its
own, so a larger grid would spend minutes before the first line of its plan (split it into specs)."""
#: Keys the sweep sets itself: each point's store lies inside the sweep's.
UNSWEPT = {("experiment", "store"): "each point's store is a folder of the sweep's store; set [experiment] store "
                                    "(or name) once, outside [sweep]"}
"""The sweep root's entry (dims and points) in its runner attribute."""


@dataclass(frozen=True)
class Point:
    name: str
    """The point's folder in the sweep's store, e.g. ``tokens=8`` or ``tokens=8,seed=1``."""
    values: dict[str, Any]
    """``{"input.tokens": 8}``"""
    spec_file: SpecFile
    """The spec of this point alone (no ``[sweep]``, its own store)."""


@dataclass(frozen=True)
class Sweep:
    root: Path
    axes: dict[str, list]
    """``{"input.tokens": [8, 16, 32]}``, in the spec's order."""
    points: list[Point]

    def dims(self) -> dict[str, str]:
        """Dataset dimension of each swept key: the key's own name (``input.tokens`` -> ``tokens``)."""
        return {path: path.rsplit(".", 1)[1] for path in self.axes}

    def describe(self) -> list[str]:
        grid = " x ".join(f"{path} = {values}" for path, values in self.axes.items())
        return [f"sweep      {grid}: {len(self.points)} point(s), stored together in {self.root}"]


def split(sf: SpecFile) -> tuple[SpecFile, dict[str, list] | None]:
    """The spec without its ``[sweep]`` table, and the grid it declares (None without one)."""
    if TABLE not in sf.data:
        return sf, None
    data = {k: v for k, v in sf.data.items() if k != TABLE}
    base = dataclasses.replace(sf, data=data)
    table = sf.data[TABLE]
    problems, axes = [], {}
    if not isinstance(table, dict) or not table:
        problems.append(sf.problem((TABLE,), "declare the grid as [sweep.<table>] key = [values, ...]"))
        table = {}
    for name, keys in table.items():
        if not isinstance(keys, dict) or not keys:
            problems.append(sf.problem((TABLE, name), f"expected a table of lists: [sweep.{name}] key = [v1, v2]"))
            continue
        if isinstance(data.get(name), list):
            problems.append(sf.problem((TABLE, name), f"[[{name}]] is a list of tables; a sweep sets keys of "
                                       "single tables ([experiment], ...)"))
            continue
        for key, values in _leaves(keys):
            if isinstance(values, dict):  # an empty sub-table
                problems.append(sf.problem((TABLE, name, key), "expected a table of lists: key = [v1, v2]"))
            elif not isinstance(values, list) or not values:
                problems.append(sf.problem((TABLE, name, key), "expected a non-empty list of values"))
            elif (name, key) in UNSWEPT:
                problems.append(sf.problem((TABLE, name, key), f"cannot be swept: {UNSWEPT[(name, key)]}"))
            elif len({json.dumps(v, sort_keys=True) for v in values}) != len(values):
                problems.append(sf.problem((TABLE, name, key), "a value is listed twice"))
            else:
                axes[f"{name}.{key}"] = values
    if not problems and len({p.rsplit(".", 1)[1] for p in axes}) != len(axes):
        problems.append(sf.problem((TABLE,), "two swept keys have the same name; a sweep dimension is named "
                                   "after its key"))
    size = math.prod(len(v) for v in axes.values())
    if not problems and size > MAX_POINTS:
        problems.append(sf.problem((TABLE,), f"the grid has {size:,} points ({' x '.join(str(len(v)) for v in axes.values())}"
                                   f"); a sweep holds at most {MAX_POINTS:,}: split it into several specs"))
    if problems:
        raise SpecError(sf.path, problems)
    return base, axes


def _leaves(keys: dict, prefix: str = ""):
    """``(dotted key, values)`` of a sweep table; a sub-table sweeps the keys of the spec's sub-table
    of that name (``[sweep.a.b] k = [...]`` sets ``[a.b] k``)."""
    for key, values in keys.items():
        if isinstance(values, dict) and values:
            yield from _leaves(values, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", values


def point_problem(axes: dict[str, list]) -> tuple[tuple, str] | None:
    """Why the grid cannot name its points' stores, as ``(location, message)``, or None: each
    point's store is the folder ``<sweep store>/<key>=<value>``, so a value must make one plain
    folder name (no ``/``); :func:`split` refuses ``[experiment] store`` as an axis."""
    for path, values in axes.items():
        for v in values:
            name = point_name({path: v})
            if "/" in name or "\\" in name or "\0" in name:
                table, key = path.split(".", 1)
                return ((f"{TABLE}.{table}", key), f"the value {v!r} would put its point's store at "
                        f"{name!r}, outside a folder of its own in the sweep's store; use values without '/'")
    return None


def point_name(values: dict[str, Any]) -> str:
    return ",".join(f"{path.rsplit('.', 1)[1]}={_text(v)}" for path, v in values.items())


def _text(v: Any) -> str:
    return json.dumps(v) if not isinstance(v, str) else v


def expand(base: SpecFile, axes: dict[str, list], root: Path) -> Sweep:
    """One spec per point of the grid, each with its store inside ``root``."""
    points = []
    for combo in itertools.product(*axes.values()):
        values = dict(zip(axes, combo, strict=True))
        data = copy.deepcopy(base.data)
        for path, v in values.items():
            *tables, key = path.split(".")
            table = data
            for t in tables:
                table = table.setdefault(t, {})
            table[key] = v
        name = point_name(values)
        data.setdefault("experiment", {})["store"] = str(root / name)
        points.append(Point(name, values, dataclasses.replace(base, data=data)))
    return Sweep(root, axes, points)


def is_sweep(path: Path) -> bool:
    from runner.storage.store import is_sweep_root  # lazy: filelock, numpy

    return is_sweep_root(path)


def _meta(path: Path) -> dict:
    from runner.core.layout import internal  # lazy: numpy
    from runner.storage.store import root_attrs  # lazy: filelock, numpy

    return internal(root_attrs(path)).get(ATTR) or {}


def record(sweep: Sweep, spec_text: str) -> None:
    """Create the sweep's store (a zarr group) or add this grid's points to it."""
    import zarr  # lazy: zarr

    from runner.core.layout import internal, with_internal  # lazy: numpy

    with writing(sweep.root):
        if (sweep.root / "zarr.json").exists():
            group = zarr.open_group(sweep.root, mode="r+", use_consolidated=False)
            known = internal(group.attrs)[ATTR]["points"]
        else:
            group = zarr.open_group(sweep.root, mode="w", zarr_format=3)
            group.attrs.update({**with_internal({}, store_id=uuid.uuid4().hex), "store_format": STORE_FORMAT,
                                "title": f"sweep over {', '.join(sweep.axes)}"})
            known = []
        names = {p["name"] for p in known}
        known += [{"name": p.name, "values": p.values} for p in sweep.points if p.name not in names]
        group.attrs.update(with_internal(dict(group.attrs), **{ATTR: {"dims": sweep.dims(), "points": known},
                                                                 "spec_toml": spec_text}))
    zarr.consolidate_metadata(sweep.root)  # xr.open_datatree(path, engine="zarr") opens it consolidated


def points(root: Path) -> list[dict]:
    """The points recorded in a sweep's store: ``[{"name": ..., "values": {...}}]``."""
    return _meta(root)["points"]


def open_sweep(root: str | Path) -> xr.Dataset:
    """The points of a sweep's store as one dataset, each swept key a dimension (points not started
    yet are left out; values a point lacks, e.g. tokens beyond its N_w, are NaN)."""
    import xarray as xr  # lazy: xarray

    root = Path(root)
    meta = _meta(root)
    dims: dict[str, str] = meta["dims"]
    parts = []
    for p in meta["points"]:
        if (root / p["name"] / "zarr.json").exists():
            ds = xr.open_zarr(root / p["name"], consolidated=False)
            parts.append(ds.expand_dims({dims[k]: [v] for k, v in p["values"].items()}))
    if not parts:
        raise FileNotFoundError(f"{root}: no point of the sweep has been run yet")
    kw = dict(join="outer", combine_attrs="override", coords="different", compat="equals")
    if len(dims) == 1:
        ds = xr.concat(parts, dim=next(iter(dims.values())), **kw)
    else:
        ds = xr.concat([p.stack(sweep_point=list(dims.values())) for p in parts], dim="sweep_point", **kw)
        ds = ds.unstack("sweep_point")
    ds.attrs["sweep_dims"] = list(dims.values())
    return ds.sortby(list(dims.values())).transpose(*dims.values(), ...)
