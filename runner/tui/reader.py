"""What the monitor reads, incrementally: the event log (new bytes only) and the store's summaries.

:class:`StoreWatcher` keeps an :class:`~runner.storage.events.EventReader` (a byte offset into
``events.jsonl``), the events read so far, and the store's completion records; ``poll()`` reads only
the bytes appended since the last call and says whether the status changed and whether the store
holds new results (a segment of a per-step plot crossed, a checkpoint saved, a task done, a run
finished): only then does the app re-read the store's variables (:func:`read_summaries`, run in a
thread worker).

What to plot, and how, comes from the store alone: each variable's ``plot`` hint (its ``runner``
attribute, written through :func:`runner.plugin.measures.hints`) and its dims. The monitor names no study,
measure or variable.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from runner.core.commandline import program
from runner.storage.events import EventReader
from runner.core.layout import internal
from runner.storage.location import location, zarr_store
from runner.read.status import fold_status, store_of
from runner.storage.readers import reading
from runner.storage.store import read_tasks, runner_dir
from runner.tui.curves import Curves, axis_label, is_curve, read_curves, with_units

SUMMARIES = ("series", "log_series", "histogram")
"""Plot hints summarised over samples (:class:`Series`); ``curve`` is drawn as :class:`Curves`."""

PER_STEP = ("series", "log_series")
"""Plot hints of values along a step axis (the last dim), written segment by segment during a task."""


def plotted(ds) -> list[str]:
    """The variables the store asks the monitor to plot, in their ``plot_order``."""
    names = [n for n, v in ds.data_vars.items() if "plot" in internal(v.attrs)]
    return sorted(names, key=lambda n: (int(internal(ds[n].attrs).get("plot_order", 100)), n))


def plot_kind(attrs) -> str | None:
    return internal(attrs).get("plot")


@dataclass
class Poll:
    changed: bool
    """New events were read (the task table needs a refresh)."""
    new_results: bool
    """The store may hold new values (re-read the plotted variables)."""


class StoreWatcher:
    def __init__(self, target: Path):
        self.target = location(target)
        self.path = store_of(self.target)
        self.reader = EventReader(runner_dir(self.path) / "events.jsonl")
        self.events: list[dict] = []
        self.records: dict[str, dict] = {}
        self._segments: dict = {}
        self._first = True

    @property
    def exists(self) -> bool:
        return (self.path / "zarr.json").exists()

    def poll(self) -> Poll:
        new = self.reader.read_new()
        new_results = self._first and self.exists
        if self._first or any(e["event"] in ("task_done", "run_finished", "run_started") for e in new):
            self.records = read_tasks(self.path)
        self._first = False
        for e in new:
            if e["event"] in ("task_done", "task_failed", "run_finished", "checkpoint"):
                new_results = True
            elif e["event"] == "progress" and self.segment:
                key = (e.get("run"), e.get("network"))
                seg = int(e.get("step", 0)) // self.segment
                if self._segments.get(key) != seg:
                    self._segments[key] = seg
                    new_results = True
        self.events.extend(new)
        return Poll(changed=bool(new), new_results=new_results)

    @property
    def segment(self) -> int | None:
        """Steps one durable write of a per-step plot covers (its chunk length along time times its
        stride), read once from the store's metadata; None when the store plots nothing per step
        (curves, written at checkpoints): then progress events bring no new values."""
        if not getattr(self, "_segment_read", False) and self.exists:
            self._segment, self._segment_read = _segment_of(self.path), True
        return getattr(self, "_segment", None)

    def status(self) -> dict:
        if not self.exists and not runner_dir(self.path).exists():
            return {"store": str(self.path), "state": "absent", "tasks": [],
                    "message": f"no store yet: waiting for `{program()} apply`"}
        return fold_status(self.path, self.events, self.records)

    def written_upto(self) -> int | None:
        """The last step the store can hold values for, while no task with steps has finished yet (else
        None: read everything). Bounds what a read of a long, young run costs."""
        runs = [e for e in self.events if e["event"] == "run_started"]
        stepped = {t.get("id") for r in runs for t in r.get("tasks", []) if t.get("steps")}
        if not runs or any(task in self.records for task in stepped):
            return None
        run = runs[-1]["run"]
        steps = 0
        for e in self.events:
            if e.get("run") != run:
                continue
            if e["event"] in ("task_done", "run_finished"):
                return None
            if e["event"] == "progress":
                steps = max(steps, int(e.get("step", 0)))
        return steps

    def run_started(self) -> float | None:
        runs = [e["ts"] for e in self.events if e["event"] == "run_started"]
        return runs[-1] if runs else None


def _segment_of(path: Path) -> int | None:
    """The fewest steps one durable write of a per-step plot covers (chunk length along its step axis
    times the axis' stride); None when the store has no per-step plot or cannot be read yet."""
    try:
        import zarr  # lazy: zarr

        g = zarr.open_group(zarr_store(path, read_only=True), mode="r", use_consolidated=False)
        out = []
        for name in g.array_keys():
            arr = g[name]
            dims = arr.metadata.dimension_names or ()
            if plot_kind(arr.attrs) in PER_STEP and len(dims) >= 2 and dims[-1] in g:
                steps = np.asarray(g[dims[-1]][:2])
                stride = int(steps[1] - steps[0]) if steps.size > 1 else 1
                out.append(int(arr.chunks[-1]) * max(stride, 1))
        return min(out) if out else None
    except Exception:
        return None


# --------------------------------------------------------------------------- store contents


@dataclass
class Series:
    """One variable summarised over samples, per network, with the store's own labels."""

    name: str
    long_name: str
    units: str
    x_label: str
    networks: list[str]
    x: np.ndarray | None = None
    mean: dict[int, np.ndarray] = field(default_factory=dict)
    lo: dict[int, np.ndarray] = field(default_factory=dict)
    hi: dict[int, np.ndarray] = field(default_factory=dict)
    spread: str = ""
    values: dict[int, np.ndarray] = field(default_factory=dict)
    """Per-network values for histograms (no NaN / no -1)."""

    kind: str = "series"
    """How it is drawn: ``series`` (mean and spread over samples), ``log_series``, ``histogram``."""
    not_applicable: dict[int, str] = field(default_factory=dict)
    """Networks its measure does not apply to, and why (their values are NaN)."""

    def has_data(self, net: int) -> bool:
        if self.kind == "histogram":
            return net in self.values and self.values[net].size > 0
        return net in self.mean and bool(np.isfinite(self.mean[net]).any())


@dataclass
class StoreData:
    path: str
    dims: dict[str, int]
    variables: list[tuple[str, tuple[str, ...], str, str, str]]
    """(name, dims, dtype, long_name, units)"""
    attrs: dict[str, str]
    networks: list[str]
    series: dict[str, Series]
    """Variables summarised over samples (plot hints ``series``, ``log_series``, ``histogram``)."""
    curves: dict[str, Curves] = field(default_factory=dict)
    """Curve variables (plot hint ``curve``), a variable split by a dim as ``name:value``."""
    plots: list[str] = field(default_factory=list)
    """What ``v`` cycles through: the keys of ``series`` and ``curves``, in the store's ``plot_order``."""


def read_summaries(path: Path, upto: int | None = None, max_points: int = 1000) -> StoreData | None:
    """Open the store (no locks, not consolidated) and summarise the plotted variables over samples.

    Values not yet written are NaN (fill): they are skipped. ``upto`` (a
    step) limits the read to the steps written so far; at most ``max_points`` steps are read along
    time (evenly strided: a terminal plot has fewer columns than that). Curve variables (plot hint
    ``curve``) are read by :func:`runner.tui.curves.read_curves`.
    """
    import xarray as xr  # lazy: xarray

    path = location(path)
    if not (path / "zarr.json").exists():
        return None
    with reading(runner_dir(path)), xr.open_zarr(zarr_store(path, read_only=True), consolidated=False) as ds:
        labels = [str(v) for v in ds["network"].values] if "network" in ds.coords else []
        variables = [(n, tuple(v.dims), str(v.dtype), str(v.attrs.get("long_name", "")), str(v.attrs.get("units", "")))
                     for n, v in ds.data_vars.items()]
        series: dict[str, Series] = {}
        curves = read_curves(ds, labels, max_points)
        skipped = _not_applicable(path)
        plots = []
        for name in plotted(ds):
            if plot_kind(ds[name].attrs) in SUMMARIES:
                series[name] = _summarise(_thin(ds[name], upto, max_points), labels)
                series[name].not_applicable = skipped.get(str(internal(ds[name].attrs).get("measure")), {})
                plots.append(name)
            elif is_curve(ds[name].attrs):
                plots += [key for key in curves if key == name or key.startswith(f"{name}:")]
        attrs = {k: str(v) for k, v in ds.attrs.items()}
        dims = dict(ds.sizes)
    return StoreData(str(path), dims, sorted(variables), attrs, labels, series, curves, plots)


def _not_applicable(path: Path) -> dict[str, dict[int, str]]:
    """measure -> network index -> why it does not apply (from the completion records)."""
    out: dict[str, dict[int, str]] = {}
    for record in read_tasks(path).values():
        why = (record.get("key") or {}).get("not_applicable")
        if why and record.get("measure") is not None and record.get("network") is not None:
            out.setdefault(str(record["measure"]), {})[int(record["network"])] = str(why)
    return out


def _thin(var, upto: int | None, max_points: int):
    if var.ndim < 2 or not var.dims[-1].endswith("_step"):
        return var
    tdim = var.dims[-1]
    if upto is not None:
        var = var.sel({tdim: slice(None, upto)})
    n = var.sizes[tdim]
    if n > max_points:
        var = var.isel({tdim: slice(None, None, -(-n // max_points))})
    return var


def _summarise(var, labels: list[str]) -> Series:
    attrs = var.attrs
    s = Series(var.name, str(attrs.get("long_name", var.name)), str(attrs.get("units", "")), "", labels,
               kind=str(internal(attrs).get("plot", "series")))
    data = np.asarray(var.values, dtype=np.float64)
    if s.kind == "histogram":
        s.x_label = with_units(str(attrs.get("long_name", var.name)), str(attrs.get("units", "")))
        for i in range(data.shape[0]):
            v = data[i][np.isfinite(data[i])]
            s.values[i] = v
        return s
    tdim = var.dims[-1]
    x = var[tdim]
    s.x = np.asarray(x.values, dtype=np.float64)
    s.x_label = axis_label(x)
    log = s.kind == "log_series"
    if log:  # plotted as log10 on a linear axis: readable tick labels
        with np.errstate(all="ignore"):
            data = np.log10(np.where(data > 0, data, np.nan))
        s.units = f"log10, {s.units}" if s.units not in ("", "1") else "log10"
    for i in range(data.shape[0]):
        d = data[i]
        if d.ndim == 1:  # one value per network and step (e.g. N_eff): no spread over samples
            s.mean[i] = d
            continue
        with np.errstate(all="ignore"), _quiet():
            if log:  # spread of a log-scale quantity: quartiles
                s.mean[i] = np.nanmedian(d, axis=0)
                s.lo[i] = np.nanpercentile(d, 25, axis=0)
                s.hi[i] = np.nanpercentile(d, 75, axis=0)
                s.spread = "median, quartiles"
            else:
                m, sd = np.nanmean(d, axis=0), np.nanstd(d, axis=0)
                s.mean[i], s.lo[i], s.hi[i] = m, m - sd, m + sd
                s.spread = "mean, ± 1 s.d."
    return s


class _quiet:
    def __enter__(self):
        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore", category=RuntimeWarning)

    def __exit__(self, *exc):
        self._w.__exit__(*exc)


def provenance(attrs: dict[str, str]) -> dict[str, object]:
    """What a run recorded in the root's runner attribute: spec text, package versions, device, git commit."""
    prov = internal(attrs)
    return {"spec": prov.get("spec_toml", ""), "spec_sha256": prov.get("spec_sha256", ""),
            "versions": prov.get("package_versions", {}), "device": prov.get("device", "?"),
            "git": str(prov.get("git_commit", "?")) + (" (with changes)" if prov.get("git_dirty") else ""),
            "updated": prov.get("updated_utc", "?")}
