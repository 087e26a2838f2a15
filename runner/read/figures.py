"""The papers' figures from a store: recipes registered by studies, drawn by one function.

A study registers each figure it can draw with :func:`runner.plugin.recipes.recipe`: the figure of the paper it
reproduces, the variables it reads (``needs``; a recipe whose variables the store lacks is
skipped, with the reason in the manifest) and a function ``draw(ds) -> matplotlib Figure``. A
recipe that finds the variables but not enough data in them (one network where it compares two)
raises :class:`~runner.plugin.recipes.NotDrawable` with the reason. A figure whose float variables hold no finite value
(a run stopped before its first durable point) is skipped as :class:`NoValues` before its recipe
runs: an empty figure is never listed as drawn.

:func:`figures` draws every recipe that applies to a store, a spec's store or any dataset opened
with xarray, and writes each as PNG and SVG next to ``figures.json``: figure id, the paper figure,
the variables read, the spec hash, and what was skipped and why. A partial run draws what exists:
values not computed yet are NaN in the store and leave gaps. For a sweep, a recipe that does not
draw the swept dimensions itself (``sweeps=True``) is drawn once per point (``fig2c@tokens=8``).

Stores no recipe covers get a fallback plot per variable (:mod:`runner.read.fallback`): ``only=["var:NAME"]``
draws one on any store, and a store to which no recipe applies gets one per numeric variable.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from models.registry_base import did_you_mean
from runner.core.commandline import program
from runner.core import toml
from runner.core.layout import internal
from runner.storage.location import Location, location, zarr_store
from runner.plugin.recipes import NotDrawable, Recipe, no_values, recipes

if TYPE_CHECKING:  # pragma: no cover
    import xarray as xr

FORMATS = ("png", "svg")
MANIFEST = "figures.json"


@dataclass
class Drawn:
    """One line of ``figures.json``."""

    id: str
    reproduces: str
    status: str
    """``"drawn"`` or ``"skipped"``."""
    reads: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    reason: str = ""


def study_of(ds: xr.Dataset) -> str | None:
    """The study whose spec made ``ds`` (from the spec text stored with it), or None."""
    prov = internal(ds.attrs)
    if prov.get("study"):
        return prov["study"]
    text = prov.get("spec_toml")
    if not text:
        return None
    from runner.spec.specfile import SpecError, SpecFile  # lazy: pydantic
    from runner.plugin.study import study_for  # lazy: pydantic
    from runner.spec.sweep import split  # lazy: pydantic

    try:
        return study_for(split(SpecFile(Path("<store>"), text, toml.loads(text)))[0]).name
    except (SpecError, toml.TOMLDecodeError):
        return None


def default_out(store: Location) -> Path:
    """``store/<name>.figures`` next to ``store/<name>.zarr``; for a store on object storage, in the
    working directory (figures are drawn to a local folder)."""
    return location(store).local_folder() / (store.name.removesuffix(".zarr") + ".figures")


def open_source(source: str | Path) -> tuple[xr.Dataset, Path]:
    """The dataset behind a spec (its store) or a store path, the points of a sweep combined
    (:func:`runner.spec.sweep.open_sweep`); raises FileNotFoundError with the path."""
    import xarray as xr  # lazy: xarray

    from runner.read.status import store_of  # lazy: filelock
    from runner.spec.sweep import is_sweep, open_sweep  # lazy: pydantic

    path = store_of(location(source))
    if not (path / "zarr.json").exists():
        raise FileNotFoundError(f"{path}: no store here (run `{program()} apply` first)")
    if is_sweep(path):
        return open_sweep(path), path
    return xr.open_zarr(zarr_store(path, read_only=True), consolidated=False), path


def figures(source: str | Path | xr.Dataset, out: str | Path | None = None,
            only: Sequence[str] | None = None, stamp: str | None = None) -> list[Drawn]:
    """Draw every figure the store's study can draw; write PNG, SVG and ``figures.json`` to ``out``.

    ``source`` is a spec, a store path or a dataset (``out`` is then required). ``only`` limits
    the figures to these ids; ``var:NAME`` draws the fallback plot of variable NAME. When no recipe
    applies to the store (none finds its variables), every numeric variable gets its fallback plot.
    Returns one :class:`Drawn` per figure considered. The manifest keeps the store's
    :func:`fingerprint` (``stamp``, when the caller has it), so that :func:`up_to_date` can tell
    figures that need no drawing again.
    """
    import xarray as xr  # lazy: xarray

    from runner.read import fallback  # lazy: matplotlib, xarray

    store = None
    if isinstance(source, xr.Dataset):
        if out is None:
            raise ValueError("figures(dataset) needs out= (a folder to write to)")
        ds = source
    else:
        ds, store = open_source(source)
        out = out if out is not None else default_out(store)
    out = Path(out)
    stamp = stamp or (fingerprint(store, only) if store is not None else None)
    study = study_of(ds)
    chosen = recipes(study)
    variables: list[str] = []
    uncovered = False
    if only:
        variables = [k.removeprefix(fallback.PREFIX) for k in only if k.startswith(fallback.PREFIX)]
        only = [k for k in only if not k.startswith(fallback.PREFIX)]
        fallback.check(ds, variables)
        unknown = sorted(set(only) - set(chosen))
        if unknown:
            hint = did_you_mean(unknown[0], chosen) if len(unknown) == 1 else ""
            raise KeyError(f"no figure {', '.join(unknown)}{hint}; this store's figures: {', '.join(sorted(chosen)) or 'none'}"
                           f" (or {fallback.PREFIX}NAME for any variable)")
        chosen = {k: chosen[k] for k in only}
    elif not any(all(v in ds.variables for v in r.needs) for r in chosen.values()):
        variables, uncovered = fallback.numeric(ds), True  # no recipe covers this store
    out.mkdir(parents=True, exist_ok=True)
    parts = _points(ds, store)
    drawn = [_save(fallback.recipe(ds, name), ds, out) for name in variables]
    for r in chosen.values():
        if r.sweeps or not parts:
            drawn.append(_draw(r, ds, out))
        else:
            drawn += [_draw(r, part, out, point) for point, part in parts.items()]
    manifest = {"spec_sha256": internal(ds.attrs).get("spec_sha256", ""), "study": study,
                "fallback": uncovered, "figures": [asdict(d) for d in drawn],
                **({"results": stamp} if stamp is not None else {})}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return drawn


def fingerprint(store: Path, only: Sequence[str] | None) -> str:
    """What the figures of ``store`` depend on: its completion records (and its points' in a sweep),
    the figures asked for and this package's version (its recipes)."""
    from runner.spec.sweep import is_sweep, points  # lazy: pydantic
    from runner.storage.store import read_tasks  # lazy: filelock

    names = [p["name"] for p in points(store)] if is_sweep(store) else [""]
    records = {name: read_tasks(store / name if name else store) for name in names}
    key = {"records": records, "only": sorted(only or []), "version": package_version()}
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()


def up_to_date(out: Path, stamp: str) -> list[Drawn] | None:
    """The figures drawn into ``out`` for results of this ``stamp``, when every file is still there."""
    try:
        manifest = json.loads((out / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if manifest.get("results") != stamp:
        return None
    drawn = [Drawn(**d) for d in manifest.get("figures", [])]
    return drawn if all((out / f).is_file() for d in drawn for f in d.files) else None


def package_version() -> str:
    from runner.run.provenance import package_versions  # lazy: pydantic

    return package_versions().get("transient", "unknown")


def _points(ds: xr.Dataset, store: Path | None) -> dict[str, xr.Dataset]:
    """The points of a sweep by name (each point's own store when there is one), or {}."""
    import xarray as xr  # lazy: xarray

    from runner.spec.sweep import ATTR, is_sweep, points  # lazy: pydantic

    if store is not None and is_sweep(store):
        return {p["name"]: xr.open_zarr(store / p["name"], consolidated=False) for p in points(store)
                if (store / p["name"] / "zarr.json").exists()}
    dims = json.loads(ds.attrs.get(ATTR, "[]"))
    return {",".join(f"{d}={v}" for d, v in zip(dims, combo, strict=True)): ds.sel(dict(zip(dims, combo, strict=True)))
            for combo in itertools.product(*(ds[d].values.tolist() for d in dims))}


def _draw(r: Recipe, ds: xr.Dataset, out: Path, point: str = "") -> Drawn:
    fid = f"{r.id}@{point}" if point else r.id
    missing = [v for v in r.needs if v not in ds.variables]
    if missing:
        return Drawn(fid, r.reproduces, "skipped", reason=f"the store has no {', '.join(missing)} "
                     "(add the measure that writes it to the spec)")
    return _save(r, ds, out, point)


def _save(r: Recipe, ds: xr.Dataset, out: Path, point: str = "") -> Drawn:
    """Draw ``r`` (skipped with the reason when its data has no values or it raises NotDrawable)
    and write it in each format; file names replace the ``:`` of a fallback's id."""
    fid = f"{r.id}@{point}" if point else r.id
    try:
        empty = no_values(ds, r.needs)
        if empty is not None:
            raise empty
        fig = r.draw(ds)
    except NotDrawable as e:
        return Drawn(fid, r.reproduces, "skipped", list(r.needs), reason=str(e))
    title = f"{r.title} ({r.reproduces})" if r.title else r.reproduces
    fig.suptitle(f"{title}, {point}" if point else title, fontsize="medium")
    files = []
    for fmt in FORMATS:
        path = out / f"{fid.replace(':', '_')}.{fmt}"
        fig.savefig(path, dpi=120 if fmt == "png" else None, bbox_inches="tight")
        files.append(path.name)
    return Drawn(fid, r.reproduces, "drawn", list(r.needs), files)
