"""Export a finished (or partly finished) store to an experiment tracker: ``runner apply SPEC
--log-to mlflow[:TRACKING_URI]``. The zarr store stays the source of truth; the tracker gets a
copy in the shape labs compare runs in.

MLflow (``pip install -e '.[tracker]'``; the default URI is ``sqlite:///store/mlflow.db``, a
local database that works offline): one run per store (the experiment's name, its spec and
provenance as parameters and tags, the figures as artifacts) with one nested run per network:

* curves: every numeric variable over a step-like axis (a coordinate in ``steps`` or ``epochs``:
  training loss per step, validation loss per epoch, lambda(t) per interval, ...), averaged over
  its other axes (samples, tokens), logged as a metric history with the axis value as the step;
* headline numbers: ``runner show``'s results per network, as final metrics;
* the figures ``runner figures`` draws (drawn again into the store's figures folder).

Exporting again replaces the store's earlier runs (they are deleted, then logged anew), so a
resumed apply leaves one copy.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

#: Trackers ``--log-to`` knows, with the package each needs.
TRACKERS = {"mlflow": "mlflow"}
INSTALL = "pip install -e '.[tracker]'"
#: Points of one curve at most (longer curves are subsampled evenly, the last point kept).
MAX_POINTS = 5000
STEP_UNITS = ("steps", "epochs")


class TrackerError(Exception):
    """A ``--log-to`` that names no known tracker, or one whose package is missing."""


def parse(target: str) -> tuple[str, str | None]:
    """``mlflow`` or ``mlflow:URI`` -> (tracker, uri)."""
    name, _, uri = target.partition(":")
    if name not in TRACKERS:
        raise TrackerError(f"--log-to {target}: unknown tracker {name!r}; known: {', '.join(TRACKERS)}")
    return name, uri or None


def check(target: str) -> str | None:
    """Why ``--log-to target`` cannot work here (checked before anything runs), or None."""
    import importlib.util

    name, _ = parse(target)
    if importlib.util.find_spec(TRACKERS[name]) is None:
        return f"--log-to {name}: the {TRACKERS[name]} package is not installed ({INSTALL})"
    return None


def curves(ds) -> dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """``{network: {variable: (steps, values)}}`` for each numeric variable with one step-like axis."""
    out: dict[str, dict] = {}
    step_dims = [d for d in ds.dims if d in ds.coords and ds[d].attrs.get("units") in STEP_UNITS]
    for name, var in ds.data_vars.items():
        dims = [d for d in var.dims if d in step_dims]
        if "network" not in var.dims or len(dims) != 1 or var.dtype.kind not in "fiu":
            continue
        (dim,) = dims
        mean = var.astype("float64").mean([d for d in var.dims if d not in ("network", dim)], skipna=True)
        steps = np.asarray(ds[dim].values, dtype=np.float64)
        keep = np.unique(np.linspace(0, len(steps) - 1, min(len(steps), MAX_POINTS)).round().astype(int))
        for i, net in enumerate(ds["network"].values):
            values = np.asarray(mean.isel(network=i).values)[keep]
            finite = np.isfinite(values)
            if finite.any():
                out.setdefault(str(net), {})[name] = (steps[keep][finite], values[finite])
    return out


def export(store: str | Path, target: str) -> str:
    """Log ``store`` to the tracker ``target`` names; returns where it went (one line)."""
    name, uri = parse(target)
    return {"mlflow": _mlflow}[name](Path(store), uri)


def _key(text: str) -> str:
    """A metric or parameter name MLflow accepts."""
    return re.sub(r"[^\w\-. /]", "_", text).strip() or "value"


def _mlflow(store: Path, uri: str | None) -> str:
    import logging

    import xarray as xr
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    from runner.figures import default_out
    from runner.figures import figures as draw_figures
    from runner.layout import internal
    from runner.status import headlines

    logging.getLogger("mlflow").setLevel(logging.WARNING)  # its database set-up lines are not ours to print
    uri = uri or f"sqlite:///{(store.parent / 'mlflow.db').resolve()}"
    client = MlflowClient(tracking_uri=uri)
    ds = xr.open_zarr(store, consolidated=False)
    prov = internal(ds.attrs)
    experiment = str(ds.attrs.get("title", store.stem)).split(":")[0] or store.stem
    found = client.get_experiment_by_name(experiment)
    exp_id = found.experiment_id if found is not None else client.create_experiment(experiment)
    store_id = str(prov.get("store_id", store.resolve()))
    for old in client.search_runs([exp_id], f"tags.`transient.store_id` = '{store_id}'"):
        client.delete_run(old.info.run_id)
    tags = {"transient.store_id": store_id, "transient.store": str(store.resolve()),
            "transient.spec_sha256": str(prov.get("spec_sha256", "")), "transient.study": str(prov.get("study", "")),
            "mlflow.source.git.commit": str(prov.get("git_commit", ""))}
    parent = client.create_run(exp_id, run_name=store.stem, tags=tags)
    pid = parent.info.run_id
    client.log_param(pid, "spec_sha256", str(prov.get("spec_sha256", "")))
    if prov.get("overrides"):
        client.log_param(pid, "overrides", " ".join(prov["overrides"])[:6000])
    client.log_text(pid, str(prov.get("spec_toml", "")), "spec.toml")
    client.log_text(pid, json.dumps(prov.get("package_versions", {}), indent=2), "package_versions.json")
    out = default_out(store)
    draw_figures(store, out=out)
    client.log_artifacts(pid, str(out), "figures")
    heads, series_of = headlines(ds), curves(ds)
    for net in map(str, ds["network"].values):
        child = client.create_run(exp_id, run_name=net, tags={**tags, "mlflow.parentRunId": pid,
                                                              "transient.network": net})
        cid = child.info.run_id
        metrics = [Metric(_key(var), float(v), 0, int(round(s))) for var, (steps, values) in series_of.get(net, {}).items()
                   for s, v in zip(steps, values, strict=True)]
        metrics += [Metric(_key(label), float(values[net]), 0, 0) for label, _, values in heads
                    if values.get(net) is not None]
        for i in range(0, len(metrics), 1000):  # MLflow's batch limit
            client.log_batch(cid, metrics=metrics[i:i + 1000])
        client.set_terminated(cid)
    client.set_terminated(pid)
    return f"logged to MLflow ({uri}): experiment {experiment!r}, run {pid} with {ds.sizes['network']} network runs"
