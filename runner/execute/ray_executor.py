"""``runner apply --executor ray``: the scheduler's groups run as Ray tasks on a cluster.

The driver (this process) holds the store's lock, opens the study's session (it lays out the
store and writes the inputs), runs the scheduler, and is the one writer of completion records
and of the event log. Each ready group becomes a Ray task that asks for one GPU (CUDA runs) or
one CPU; the worker re-prepares the spec from its file (same code, same ids), opens its own
session, attaches to the store without the lock and runs the group exactly as the local
executor would: a group writes its own network's chunks (a chunk has one writing task),
and saves its durable points beside the store. A worker killed mid-task is retried by Ray
(``max_retries``) and resumes from the last durable point. A group split into sample shards
(``--shards``) becomes one Ray task per shard; the shards write files beside the store, and the
driver merges them into the store when all are done (the session's ``merge``).

Workers and driver must see the store at the same path (a shared filesystem; see
docs/architecture.md). Progress bars move when a group ends, not per step.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import ray

from runner import interrupt
from runner.execute.local import LocalExecutor
from runner.store import Store
from runner.study import Unavailable

ENV_PREFIXES = ("TRANSIENT_", "HF_", "RUNNER_TEST_", "OMP_NUM_THREADS", "CUBLAS_WORKSPACE_CONFIG")
"""Environment variables the workers get from the driver (plugins, caches, the hub switch, test hooks)."""

LOCAL_CPUS_ENV = "TRANSIENT_RAY_CPUS"
"""CPUs of the local cluster started when no ``--address`` is given (default: all of this machine's)."""


class RayExecutor(LocalExecutor):
    def __init__(self, p, session, store, events, view, device, options):
        super().__init__(p, session, store, events, view, device, options)
        self.owns_cluster = not ray.is_initialized()
        if self.owns_cluster:
            env = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES)}
            local = {} if options.address else {"num_cpus": int(os.environ.get(LOCAL_CPUS_ENV, os.cpu_count() or 1)),
                                                "include_dashboard": False}
            try:
                ray.init(address=options.address, runtime_env={"env_vars": env}, logging_level="ERROR",
                         log_to_driver=False, configure_logging=False, **local)
            except (ConnectionError, RuntimeError, ValueError) as err:
                where = f"the Ray cluster at {options.address}" if options.address else "a local Ray cluster"
                raise Unavailable(f"--executor ray: cannot start or join {where}: {str(err).splitlines()[0]}") from None
        requested = options.extra.get("device", p.device)  # the workers' devices, not this machine's
        gpu = device.type == "cuda" or (requested == "auto" and ray.cluster_resources().get("GPU", 0) > 0)
        self.resources = {"num_gpus": 1} if gpu else {"num_cpus": 1}
        self.worker_device = "cuda" if gpu else "cpu"
        self.max_retries = int(options.extra.get("max_retries", 3))
        self.where = (str(Path.cwd()), str(Path(p.spec_file.path).absolute()), options.point)

    def close(self) -> None:
        if self.owns_cluster and ray.is_initialized():
            ray.shutdown()

    def schedule(self, scheduler) -> list:
        running: dict[Any, tuple[str, Any]] = {}  # ref -> (group key, shard)
        groups: dict[str, dict] = {}
        remote = ray.remote(_run_group)
        try:
            while True:
                interrupt.check()
                for group in scheduler.take():
                    key = group[0].group or group[0].id
                    shards = self.split(group)
                    groups[key] = {"group": group, "bar": self.started(group), "t0": time.monotonic(),
                                   "shards": shards, "left": len(shards or [None]), "results": [], "error": None}
                    for shard in shards or [None]:
                        ref = remote.options(max_retries=self.max_retries, name=f"{group[0].label}",
                                             **self.resources).remote(*self.where, [t.id for t in group], shard,
                                                                       self.worker_device)
                        running[ref] = (key, shard)
                if not running:
                    return scheduler.pending
                done, _ = ray.wait(list(running), num_returns=1, timeout=0.5)
                for ref in done:
                    key, _shard = running.pop(ref)
                    g = groups[key]
                    self._collect(ref, g)
                    if g["left"] == 0:
                        del groups[key]
                        scheduler.finished(*self._finish(g))
        finally:
            for ref in running:
                ray.cancel(ref, force=True)

    def _collect(self, ref, g: dict) -> None:
        g["left"] -= 1
        try:
            result = ray.get(ref)
        except ray.exceptions.RayTaskError as err:
            cause = err.cause if err.cause is not None else err
            g["error"] = g["error"] or f"{type(cause).__name__}: {cause}"
            return
        except ray.exceptions.RayError as err:  # the worker died more often than it may be retried
            g["error"] = g["error"] or f"{type(err).__name__}: {str(err).splitlines()[0]}"
            return
        g["results"].append(result)
        for event, fields in result["notes"]:
            self.events.emit(event, task=[t.id for t in g["group"]], network=g["group"][0].network, **fields)
        for message in result["warnings"]:
            self.view.warn(message)

    def _finish(self, g: dict) -> tuple[set[str], list[str]]:
        """Record a group whose Ray tasks all ended: ``(ids that succeeded, resources they provided)``."""
        group = g["group"]
        if g["error"] is None and g["shards"] is not None:
            try:
                with self.store.journal([t.id for t in group]):
                    self.session.merge(group, g["shards"], self.store)
            except Exception as err:
                g["error"] = f"{type(err).__name__}: {err}"
        if g["error"] is not None:
            self.failed_group(group, g["error"], g["bar"])
            return set(), []
        extra = dict(g["results"][0]["extra"])
        extra["resumed_from"] = min(r["extra"].get("resumed_from", 0) for r in g["results"])
        provided = [r for result in g["results"] for r in result["provided"]]
        return self.succeeded(group, time.monotonic() - g["t0"], extra, g["bar"]), provided


class _WorkerReport:
    """What a task tells the driver from a worker: collected and returned with its result."""

    def __init__(self, store: Store):
        self.store = store
        self.notes: list[tuple[str, dict]] = []
        self.warnings: list[str] = []
        self.provided: list[str] = []

    def progress(self, step: int) -> None:
        pass

    def provide(self, resource: str) -> None:
        self.provided.append(resource)

    def note(self, event: str, **fields: Any) -> None:
        self.notes.append((event, fields))

    def warn(self, message: str) -> None:
        self.warnings.append(message)


_SESSIONS: dict[tuple, tuple] = {}


def _session(spec_path: str, point: int, device_name: str):
    """The prepared spec and the study's session in this worker, kept for the worker's next tasks."""
    from runner.apply import prepare_all
    from runner.execute.device import make_deterministic, pick_device

    key = (spec_path, point, device_name, os.stat(spec_path).st_mtime_ns)
    if key not in _SESSIONS:
        _, prepared = prepare_all(spec_path)
        p = prepared[point]
        device = pick_device(device_name)
        make_deterministic(device)
        _SESSIONS.clear()
        _SESSIONS[key] = (p, p.study.open(p, device, lambda _message: None))
    return _SESSIONS[key]


def _run_group(cwd: str, spec_path: str, point: int, ids: list[str], shard, device_name: str) -> dict:
    """A Ray task: run one group (or one shard of it) of the spec's tasks against the shared store."""
    os.chdir(cwd)  # the spec's relative paths (its store) mean what they mean to the driver
    p, session = _session(spec_path, point, device_name)
    store = Store(p.store_path).attach()
    wanted = set(ids)
    group = [t for t in p.tasks if t.id in wanted]
    if len(group) != len(wanted):
        raise RuntimeError(f"{spec_path} changed while it was applied: its tasks are not those the driver planned")
    report = _WorkerReport(store)
    _note_worker(store, ids, shard)
    with store.journal(ids):  # the driver puts the chunks written into the records
        extra = session.run(group, report) if shard is None else session.run(group, report, shard)
    return {"extra": extra or {}, "notes": report.notes, "warnings": report.warnings, "provided": report.provided}


def _note_worker(store: Store, ids: list[str], shard) -> None:
    """``<store>.runner/workers/<task>.pid``: which process runs a task now (for an operator, or a
    test that kills it)."""
    import hashlib

    name = hashlib.sha256("/".join(sorted(ids)).encode()).hexdigest()[:16] + (f"-{getattr(shard, 'name', shard)}" if shard else "")
    folder = store.state_dir / "workers"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.pid").write_text(f"{os.getpid()}\n")
