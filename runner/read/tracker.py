"""Export a finished (or partly finished) store to an experiment tracker: ``runner apply SPEC
--log-to mlflow[:TRACKING_URI]``. The zarr store stays the source of truth; the tracker gets a
copy in the shape labs compare runs in.

MLflow (``pip install -e '.[tracker]'``; the default URI is ``sqlite:///store/mlflow.db``, a
local database that works offline): one run per store (the experiment's name, its spec and
provenance as parameters and tags, the figures as artifacts) with one nested run per network:

* parameters: every parameter of the spec as the run resolved it (its ``--set`` overrides and every
  default), flattened to keys (``experiment.seed``, ``measure.<kind>.<parameter>``); a network's run adds its
  own ``[[model]]`` entry (``model.source``, ...) and ``replicate``, so MLflow's compare view lines up
  networks, and runs of one spec with different overrides, by what differs;
* curves: the variables the monitor plots over a step-like axis (a coordinate counting steps or
  epochs: training loss per step, validation loss per epoch, lambda(t) per interval, ...),
  summarised as the monitor summarises them: a ``series`` by its mean over samples, a
  ``log_series`` by its median, a ``curve`` one metric per value of its other axis (``svcca_final/
  lstm1``); values that mean nothing as a mean (a trajectory's elements, projections, weight
  maps) are left out; logged as a metric history with the axis value as the step;
* headline numbers: ``runner show``'s results per network, as final metrics;
* the figures ``runner figures`` draws (drawn again into the store's figures folder).

The export streams: while ``apply`` runs, the curves' new points are logged every
``EVERY_S`` seconds (and at the end, with the headline numbers and the figures). Exporting a
store again replaces its earlier runs (deleted, then logged anew), so a resumed apply leaves one
copy.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

from runner.core import toml
from runner.core.errors import Unavailable
from runner.core.layout import counted, internal
from runner.read.figures import default_out
from runner.read.figures import figures as draw_figures
from runner.storage.location import Location, location, zarr_store

#: Trackers ``--log-to`` knows, with the package each needs.
TRACKERS = {"mlflow": "mlflow"}
INSTALL = "pip install -e '.[tracker]'"
#: Points of one curve at most (longer curves are subsampled evenly, the last point kept).
MAX_POINTS = 5000
#: Seconds between two streamed updates while a run goes.
EVERY_S = 30.0
#: A parameter of the one table of a measure kind (``measure.<kind>.<parameter>``).
PER_NETWORK = re.compile(r"^measure\.[^.]+\.[^.]+$")
#: What a step-like axis counts (:func:`runner.core.layout.counted`).
STEP_COUNTS = ("steps", "epochs")


#: The tracking URI schemes MLflow stores runs at (``postgresql+psycopg2:``: the part before ``+``);
#: a URI without a scheme is a local folder.
URI_SCHEMES = ("file", "sqlite", "http", "https", "postgresql", "mysql", "mssql", "databricks", "databricks-uc", "uc")


class TrackerError(Exception):
    """A ``--log-to`` that names no known tracker, or one whose package is missing."""


def parse(target: str) -> tuple[str, str | None]:
    """``mlflow`` or ``mlflow:URI`` -> (tracker, uri)."""
    name, colon, uri = target.partition(":")
    if name not in TRACKERS:
        raise TrackerError(f"--log-to {target}: unknown tracker {name!r}; known: {', '.join(TRACKERS)}")
    if colon and not uri.strip():
        raise TrackerError(f"--log-to {target}: no URI after ':'; write --log-to {name} (its default) or {name}:URI")
    scheme = re.match(r"^([A-Za-z][A-Za-z0-9+.-]+):", uri)  # two letters at least: C:\ is a drive
    if scheme and scheme.group(1).split("+")[0].lower() not in URI_SCHEMES:
        raise TrackerError(f"--log-to {target}: MLflow stores no runs at {scheme.group(1)}: URIs; give a folder, "
                           f"sqlite:///FILE.db, http(s)://SERVER or {', '.join(s + ':' for s in URI_SCHEMES[4:7])}...")
    if scheme and scheme.group(1).lower() == "sqlite" and not uri[scheme.end():].startswith("///"):
        raise TrackerError(f"--log-to {target}: a SQLite URI names its file after three slashes: sqlite:///FILE.db "
                           "(four for an absolute path: sqlite:////PATH/FILE.db)")
    return name, uri or None


#: Seconds a tracking server has to answer before a run starts.
SERVER_TIMEOUT_S = 5.0


class TrackerUnavailable(Unavailable):
    """Where ``--log-to`` would store runs cannot take them: said before anything runs (exit 66)."""


def check(target: str) -> str | None:
    """What this machine lacks for ``--log-to target`` (its package: a requirement), or None."""
    name, _ = parse(target)
    if importlib.util.find_spec(TRACKERS[name]) is None:
        return f"--log-to {name}: the {TRACKERS[name]} package is not installed ({INSTALL})"
    return None


def check_target(target: str, timeout: float = SERVER_TIMEOUT_S) -> None:
    """:class:`TrackerUnavailable` when where the runs would go cannot take them (a folder or SQLite
    file that cannot be written, a server that does not answer within ``timeout`` seconds)."""
    _, uri = parse(target)
    problem = uri_problem(uri, timeout) if uri is not None else None
    if problem:
        raise TrackerUnavailable(f"--log-to {target}: {problem}; nothing ran")


def uri_problem(uri: str, timeout: float = SERVER_TIMEOUT_S) -> str | None:
    """Why MLflow cannot store runs at ``uri`` (see :func:`check`), or None."""
    scheme = re.match(r"^([A-Za-z][A-Za-z0-9+.-]+):", uri)
    kind = scheme.group(1).split("+")[0].lower() if scheme else None
    if kind is None:
        if not re.match(r"^[\w~./\\-]", uri):
            return f"{uri!r} is neither a tracking URI nor a folder"
        return _folder_problem(Path(uri).expanduser())
    if kind == "file":
        return _folder_problem(Path(uri[scheme.end():].removeprefix("//")))
    if kind == "sqlite":
        return _sqlite_problem(Path(uri[scheme.end():].removeprefix("///")))
    if kind in ("http", "https"):
        return _server_problem(uri, timeout)
    return None  # a database server or a hosted service: MLflow's client says what it thinks of it


def _writable_parent(path: Path) -> str | None:
    """Why ``path`` cannot be made (a file among its folders, or the first existing folder not writable)."""
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                return f"{path} lies under {parent}, which is a file"
            if not os.access(parent, os.W_OK):
                return f"{parent} cannot be written (permission denied)"
            return None
    return None


def _folder_problem(path: Path) -> str | None:
    if path.exists() and not path.is_dir():
        return f"{path} is a file; MLflow keeps runs in a folder there"
    return None if path.exists() and os.access(path, os.W_OK) else _writable_parent(path) if not path.exists() \
        else f"{path} cannot be written (permission denied)"


def _sqlite_problem(path: Path) -> str | None:
    if path.is_dir():
        return f"{path} is a folder, not an SQLite database file"
    if path.is_file():
        with open(path, "rb") as f:
            head = f.read(16)
        if head and head != b"SQLite format 3\x00":
            return f"{path} is not an SQLite database (it starts with {head[:8]!r})"
        return None if os.access(path, os.W_OK) else f"{path} cannot be written (permission denied)"
    return _writable_parent(path)


def _server_problem(uri: str, timeout: float) -> str | None:
    """None when a server answers at ``uri`` within ``timeout`` seconds (any HTTP answer: MLflow's client
    then says what it thinks of it); else why not, in one line."""
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout):
            return None
    except urllib.error.HTTPError:
        return None  # it answered
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        return f"no tracking server answers at {uri} within {timeout:g} s ({reason})"


#: Lines of one ``curve`` variable at most (one per value of its other axes).
MAX_LINES = 32


def curves(ds) -> dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """``{network: {metric: (steps, values)}}`` for each variable the monitor plots over one
    step-like axis (see the module docstring)."""
    out: dict[str, dict] = {}
    step_dims = [d for d in ds.dims if d in ds.coords and counted(ds[d].attrs) in STEP_COUNTS]
    for name, var in ds.data_vars.items():
        dims = [d for d in var.dims if d in step_dims]
        plot = internal(var.attrs).get("plot")
        if "network" not in var.dims or len(dims) != 1 or var.dtype.kind not in "fiu" or plot not in LOGGED_PLOTS:
            continue
        (dim,) = dims
        others = [d for d in var.dims if d not in ("network", dim)]
        values = var.astype("float64")
        if plot == "curve":
            lines = values.stack(line=others) if others else values.expand_dims(line=[None])
            if lines.sizes["line"] > MAX_LINES:
                continue
            series = {_line_name(name, lines["line"].values[j]): lines.isel(line=j) for j in range(lines.sizes["line"])}
        else:
            reduce = values.median if plot == "log_series" else values.mean
            series = {name: reduce(others, skipna=True) if others else values}
        steps = np.asarray(ds[dim].values, dtype=np.float64)
        keep = np.unique(np.linspace(0, len(steps) - 1, min(len(steps), MAX_POINTS)).round().astype(int))
        for metric, da in series.items():
            da = da.transpose("network", dim)
            for i, net in enumerate(ds["network"].values):
                row = np.asarray(da.isel(network=i).values)[keep]
                finite = np.isfinite(row)
                if finite.any():
                    out.setdefault(str(net), {})[metric] = (steps[keep][finite], row[finite])
    return out


#: The monitor's plot hints of the variables logged as curves: over samples (``series``, ``log_series``)
#: or one line per value of another axis (``curve``); a ``histogram`` is no curve.
LOGGED_PLOTS = ("series", "log_series", "curve")


def _line_name(name: str, value) -> str:
    parts = value if isinstance(value, tuple) else (value,)
    return "/".join([name, *(str(p) for p in parts if p is not None)])


def resolved_spec(prov: dict) -> dict:
    """The run's spec as it ran: its ``--set`` overrides set and every default filled in, as plain
    values (the tables as written where it no longer validates: a study that changed since)."""
    from runner.plugin.study import studies  # lazy: pydantic
    from runner.spec import overrides as ov  # lazy: pydantic
    from runner.spec.specfile import SpecError, SpecFile, validate  # lazy: pydantic

    text = str(prov.get("spec_toml", ""))
    try:
        data = toml.loads(text)
    except toml.TOMLDecodeError:
        return {}
    study = studies().get(str(prov.get("study", "")))
    try:
        sf = ov.apply(SpecFile(Path("spec.toml"), text, data), [ov.parse(o) for o in prov.get("overrides") or []])
        return validate(study().spec_model(), sf).model_dump(mode="json") if study else sf.data
    except (SpecError, ValueError, TypeError):
        return data


def flat(value, prefix: str = "") -> dict[str, str]:
    """Nested tables as ``{"a.b": "value"}``; a list of tables by each entry's ``kind`` or ``name``
    (``measure.<kind>.<parameter>``, ``model.<name>.source``; ``measure.<kind>.<n>.<parameter>`` for
    the n-th of several tables of one kind), else its index."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in flat(item, f"{prefix}.{key}" if prefix else key).items()}
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        names = [str(entry.get("kind") or entry.get("name") or i) for i, entry in enumerate(value)]
        out: dict[str, str] = {}
        for i, (entry, name) in enumerate(zip(value, names, strict=True)):
            if names.count(name) > 1:  # one kind in several tables (a comparison by mode): each its own
                name = f"{name}.{names[:i].count(name)}"
            out.update(flat(entry, f"{prefix}.{name}"))
        return out
    return {prefix: value if isinstance(value, str) else json.dumps(value)}


def network_params(spec: dict, ds) -> dict[str, dict[str, str]]:
    """Each network's parameters: the spec's (but the other networks' entries), its own
    ``[[model]]`` entry as ``model.*``, and its replicate."""
    shared = flat({k: v for k, v in spec.items() if k != "model"})
    entries = {str(m.get("name")): m for m in spec.get("model", []) if isinstance(m, dict)}
    models = ds["model"].values if "model" in ds.coords else ds["network"].values
    replicates = ds["replicate"].values if "replicate" in ds.coords else [None] * ds.sizes["network"]
    out = {}
    for net, model, rep in zip(map(str, ds["network"].values), map(str, models), replicates, strict=True):
        own = flat({"model": entries.get(model, {"name": model})})
        out[net] = {**shared, **own, **({"replicate": str(int(rep))} if rep is not None and rep == rep else {})}
    return out


def _without(params: dict[str, str], keys) -> dict[str, str]:
    return {k: v for k, v in params.items() if k not in keys}


def per_network_values(ds, key: str) -> dict[str, str]:
    """``measure.<kind>.<parameter>``'s value per network, as the store's ``<kind>_<parameter>`` (a
    variable over ``network`` alone) holds it, for the networks that computed it; empty when none."""
    _, kind, name = key.split(".")
    var = ds.data_vars.get(f"{kind}_{name}")
    if var is None or var.dims != ("network",):
        return {}
    return {str(net): str(value.item()) for net, value in zip(ds["network"].values, var.values, strict=True)
            if value == value}  # NaN: not computed yet


def export(store: str | Path, target: str) -> str:
    """Log ``store`` to the tracker ``target`` names, whole; returns where it went (one line)."""
    exporter = Exporter(store, target)
    return exporter.finish()


class Exporter:
    """One store's runs in MLflow: created once, then each :meth:`update` logs the curves' points
    that are new since the last, and :meth:`finish` the headline numbers and figures."""

    def __init__(self, store: str | Location, target: str):
        name, uri = parse(target)

        from mlflow.tracking import MlflowClient  # lazy: mlflow

        logging.getLogger("mlflow").setLevel(logging.WARNING)  # its database set-up lines are not ours to print
        self.store = location(store)
        # beside the store; for a store on object storage, in the working directory (SQLite needs a disk)
        db = self.store.local_folder() / "mlflow.db"
        self.uri = uri or f"sqlite:///{db.resolve()}"
        # a SQLite database keeps its artifacts (figures, the spec) in a folder beside it, not in MLflow's
        # default ./mlruns of whatever directory apply runs in; a tracking server chooses its own
        local_db = self.uri.removeprefix("sqlite:///") if self.uri.startswith("sqlite:///") else None
        self.artifacts = Path(local_db).parent.joinpath("mlartifacts").resolve().as_uri() if local_db else None
        self.where = str(self.store.resolve())
        self.client = MlflowClient(tracking_uri=self.uri)
        self.runs: dict[str, str] = {}
        self.logged: dict[tuple[str, str], float] = {}  # (network, variable) -> last step logged
        self.parent: str | None = None
        self.deferred: list[str] = []  # measure parameters logged per network by finish

    def _start(self, ds) -> None:
        client, prov = self.client, internal(ds.attrs)
        self.experiment = str(ds.attrs.get("title", self.store.stem)).split(":")[0] or self.store.stem
        found = client.get_experiment_by_name(self.experiment)
        exp_id = found.experiment_id if found is not None else client.create_experiment(self.experiment, artifact_location=self.artifacts)
        store_id = str(prov.get("store_id", self.where))
        for old in client.search_runs([exp_id], f"tags.`transient.store_id` = '{store_id}'"):
            client.delete_run(old.info.run_id)
        tags = {"transient.store_id": store_id, "transient.store": self.where,
                "transient.spec_sha256": str(prov.get("spec_sha256", "")), "transient.study": str(prov.get("study", "")),
                "mlflow.source.git.commit": str(prov.get("git_commit", ""))}
        self.parent = client.create_run(exp_id, run_name=self.store.stem, tags=tags).info.run_id
        spec = resolved_spec(prov)
        run_params = {"spec_sha256": str(prov.get("spec_sha256", "")),
                      **({"overrides": " ".join(prov["overrides"])} if prov.get("overrides") else {})}
        shared = flat(spec)
        # a measure parameter left None is chosen per network when the run computes it: logged by finish
        self.deferred = sorted(k for k, v in shared.items() if v == "null" and PER_NETWORK.match(k))
        self._params(self.parent, {**_without(shared, self.deferred), **run_params})
        client.log_text(self.parent, str(prov.get("spec_toml", "")), "spec.toml")
        client.log_text(self.parent, json.dumps(prov.get("package_versions", {}), indent=2), "package_versions.json")
        for net, params in network_params(spec, ds).items():
            self.runs[net] = client.create_run(exp_id, run_name=net, tags={
                **tags, "mlflow.parentRunId": self.parent, "transient.network": net}).info.run_id
            self._params(self.runs[net], {**_without(params, self.deferred), **run_params})

    def _per_network_params(self, ds) -> None:
        """The deferred parameters: ``measure.<kind>.<parameter>`` as each network used it, read from the
        store's ``<kind>_<parameter>`` per network (the parent run: ``per network`` and one key per network;
        a network's run: its own value), or ``null`` as the spec says when the store holds no such values."""
        parent: dict[str, str] = {}
        own: dict[str, dict[str, str]] = {net: {} for net in self.runs}
        for key in self.deferred:
            values = per_network_values(ds, key)
            parent[key] = "per network" if values else "null"
            for net in own:
                own[net][key] = values.get(net, "not computed") if values else "null"
            parent.update({f"{key}.{net}": value for net, value in (values or {}).items()})
        self._params(self.parent, parent)
        for net, params in own.items():
            self._params(self.runs[net], params)

    def _params(self, run: str, params: dict[str, str]) -> None:
        """Log ``params`` (MLflow's limits: 100 a batch, 6000 characters a value)."""
        from mlflow.entities import Param  # lazy: mlflow

        items = [Param(_key(k)[:250], str(v)[:6000]) for k, v in params.items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(run, params=items[i:i + 100])

    def update(self) -> None:
        """Log the curves' points that are new since the last update (none before the store exists)."""
        import xarray as xr  # lazy: xarray
        from mlflow.entities import Metric  # lazy: mlflow

        if not (self.store / "zarr.json").exists():
            return
        ds = xr.open_zarr(zarr_store(self.store, read_only=True), consolidated=False)
        if self.parent is None:
            self._start(ds)
        for net, series in curves(ds).items():
            metrics = []
            for var, (steps, values) in series.items():
                last = self.logged.get((net, var), -np.inf)
                new = steps > last
                metrics += [Metric(_key(var), float(v), 0, int(round(s))) for s, v in zip(steps[new], values[new],
                                                                                           strict=True)]
                if new.any():
                    self.logged[(net, var)] = float(steps[new][-1])
            for i in range(0, len(metrics), 1000):  # MLflow's batch limit
                self.client.log_batch(self.runs[net], metrics=metrics[i:i + 1000])

    def finish(self) -> str:
        """The last points, the headline numbers and the figures; the runs end. Returns one line."""
        import xarray as xr  # lazy: xarray
        from mlflow.entities import Metric  # lazy: mlflow

        from runner.read.status import headlines  # lazy: filelock

        self.update()
        if self.parent is None:
            return f"nothing logged to MLflow: {self.store} was not created"
        ds = xr.open_zarr(zarr_store(self.store, read_only=True), consolidated=False)
        for label, _, values in headlines(ds):
            for net, value in values.items():
                if value is not None:
                    self.client.log_batch(self.runs[net], metrics=[Metric(_key(label), float(value), 0, 0)])
        self._per_network_params(ds)
        out = default_out(self.store)
        draw_figures(self.store, out=out)
        self.client.log_artifacts(self.parent, str(out), "figures")
        for run in [*self.runs.values(), self.parent]:
            self.client.set_terminated(run)
        return (f"logged to MLflow ({self.uri}): experiment {self.experiment!r}, run {self.parent} with "
                f"{len(self.runs)} network runs")


def stream(store: str | Location, target: str, stop, every: float = EVERY_S) -> Exporter:
    """Update an :class:`Exporter` of ``store`` every ``every`` seconds until ``stop`` (a
    :class:`threading.Event`) is set; the caller then calls its ``finish``."""
    exporter = Exporter(store, target)
    while not stop.wait(every):
        try:
            exporter.update()
        except Exception:  # noqa: BLE001 - a tracker hiccup never stops the run; finish says what failed
            continue
    return exporter


def _key(text: str) -> str:
    """A metric or parameter name MLflow accepts."""
    return re.sub(r"[^\w\-. /]", "_", text).strip() or "value"
