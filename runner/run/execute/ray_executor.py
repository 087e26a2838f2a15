"""``runner apply --executor ray``: the scheduler's groups run as Ray tasks on a cluster.

The driver (this process) holds the store's lock, opens the study's session (it lays out the
store and writes the inputs), runs the scheduler and its recorder, the one writer of completion
records and of the event log; this executor only submits groups and polls for those that ended.
Each ready group becomes a Ray task that asks for one GPU (CUDA runs) or one CPU. The worker gets
the driver's plan (its :class:`runner.plugin.study.Prepared`, put into the object store once: the spec is
not read again), attaches to the store without the lock, opens the study's session there
(:meth:`runner.plugin.study.WorkerSessions.open_worker`: a study reads the inputs the driver wrote into the
store instead of drawing them from their source) and runs the group exactly as the local executor
would: a group writes its own network's chunks (a chunk has one writing task), and saves its
durable points beside the store. Every write of a worker is checked against the driver's lease
(:mod:`runner.run.execute.lease`): a worker whose driver is gone writes nothing more. A local cluster
started here ends with this process, ``kill -9`` included (:mod:`runner.run.execute.ray_cluster`).
A worker killed mid-task is retried by Ray (``max_retries``) and resumes from the last durable
point. A group split into sample shards (``--shards``) becomes one Ray task per shard; the shards
write files beside the store, and the driver's recorder merges them into the store when all are
done (the session's ``merge``, given every shard's result).

Workers and driver must see the store at the same place: a shared filesystem, or the same
``s3://`` URL (see docs/architecture.md). Progress bars move when a group ends, not per step.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import ray

from runner.run.execute import lease
from runner.run.execute.executor import Collected, Done, Job, error_text
from runner.run.execute.ray_cluster import forget_cluster, note_cluster, start_reaper
from runner.storage.records import group_key
from runner.storage.store import Store, runner_dir
from runner.storage.store_errors import guard_writes, writing
from runner.plugin.study import SourceUnavailable, worker_session
from runner.plugin.loader import load_plugins
from runner.core.device import make_deterministic, pick_device

ENV_PREFIXES = ("TRANSIENT_", "HF_", "RUNNER_TEST_", "OMP_NUM_THREADS", "CUBLAS_WORKSPACE_CONFIG")
"""Environment variables the workers get from the driver (plugins, caches, the hub switch, test hooks)."""

NO_REAPER_ENV = "RUNNER_TEST_NO_REAPER"
"""Test hook: start no reaper, so that a test sees what the lease alone refuses (and what a resume stops)."""

LOCAL_CPUS_ENV = "TRANSIENT_RAY_CPUS"
"""CPUs of the local cluster started when no ``--address`` is given (default: all of this machine's)."""


class RayExecutor:
    capacity = None  # every ready group at once: the cluster queues what it cannot place yet

    def __init__(self, p, device, options):
        self.owns_cluster = not ray.is_initialized()
        self.local_cluster = self.owns_cluster and not options.address
        self.state_dir = runner_dir(p.store_path)
        self.reaper = self.renewer = None
        self.running: dict[Any, tuple[Job, int]] = {}  # ref -> (job, part)
        self.parts: dict[Job, dict] = {}  # job -> {"left", "results" by part, "error"}
        if self.owns_cluster:
            env = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES)}
            local = {} if options.address else {"num_cpus": int(os.environ.get(LOCAL_CPUS_ENV, os.cpu_count() or 1)),
                                                "include_dashboard": False}
            try:
                ray.init(address=options.address, runtime_env={"env_vars": env}, logging_level="ERROR",
                         log_to_driver=False, configure_logging=False, **local)
            except (ConnectionError, RuntimeError, ValueError) as err:
                where = f"the Ray cluster at {options.address}" if options.address else "a local Ray cluster"
                raise SourceUnavailable(f"--executor ray: cannot start or join {where}: {str(err).splitlines()[0]}") from None
        try:
            self._start(p, device, options)
        except BaseException:  # a cluster this process started ends with it, whatever failed
            self.close()
            raise

    def _start(self, p, device, options) -> None:
        if self.local_cluster:  # ours: it ends with this process, however it ends
            session_dir = ray._private.worker._global_node.get_session_dir_path()
            if not os.environ.get(NO_REAPER_ENV):
                self.reaper = start_reaper(session_dir)
            note_cluster(self.state_dir, session_dir)
        held = lease.read(self.state_dir) or {}
        self.token = held.get("token") if held.get("pid") == os.getpid() else lease.take(self.state_dir)
        self.renewer = lease.Renewer(self.state_dir, self.token)
        requested = options.extra.get("device", p.device)  # the workers' devices, not this machine's
        gpu = device.type == "cuda" or (requested == "auto" and ray.cluster_resources().get("GPU", 0) > 0)
        self.resources = {"num_gpus": 1} if gpu else {"num_cpus": 1}
        self.worker_device = "cuda" if gpu else "cpu"
        self.max_retries = int(options.extra.get("max_retries", 3))
        self.where = (str(Path.cwd()), self.token, options.point, ray.put(p))  # the plan itself: never re-read
        self.remote = ray.remote(_run_group)

    def submit(self, job: Job) -> None:
        self.parts[job] = {"left": len(job.shards), "results": [None] * len(job.shards), "error": None}
        for index, shard in enumerate(job.shards):
            ref = self.remote.options(max_retries=self.max_retries, name=job.group[0].label,
                                      **self.resources).remote(*self.where, job.ids, shard, self.worker_device)
            self.running[ref] = (job, index)

    def poll(self) -> list[Done]:
        if not self.running:
            return []
        ready, _ = ray.wait(list(self.running), num_returns=1, timeout=0.5)
        out = []
        for ref in ready:
            job, index = self.running.pop(ref)
            state = self.parts[job]
            state["left"] -= 1
            try:
                state["results"][index] = ray.get(ref)
            except ray.exceptions.RayTaskError as err:
                cause = err.cause if err.cause is not None else err
                state["error"] = state["error"] or error_text(cause)
            except ray.exceptions.RayError as err:  # the worker died more often than it may be retried
                state["error"] = state["error"] or f"{type(err).__name__}: {str(err).splitlines()[0]}"
            if state["left"] == 0:
                del self.parts[job]
                out.append(_done(job, state))
        return out

    def close(self) -> None:
        for ref in self.running:
            ray.cancel(ref, force=True)
        self.running.clear()
        if self.renewer is not None:
            self.renewer.stop()
        if self.owns_cluster and ray.is_initialized():
            ray.shutdown()
        if self.reaper is not None:
            self.reaper.terminate()
            self.reaper.wait()
        if self.local_cluster:
            forget_cluster(self.state_dir)


def _done(job: Job, state: dict) -> Done:
    """A job whose Ray tasks all ended, with what its parts collected (whatever the error)."""
    got = [r for r in state["results"] if r is not None]
    done = Done(job, [r["extra"] for r in got] if state["error"] is None else [], error=state["error"])
    for r in got:
        done.provided += r["provided"]
        done.notes += r["notes"]
        done.warnings += r["warnings"]
    return done


_SESSIONS: dict[tuple, Any] = {}


def _session(p, token: str, point: int, device_name: str, store: Store):
    """The study's session in this worker, on the store the driver laid out (the inputs read from
    there, :func:`runner.plugin.study.worker_session`), kept for this apply's next tasks in this worker."""
    load_plugins()  # the registries the session looks measures up in
    key = (token, point, device_name)
    if key not in _SESSIONS:
        device = pick_device(device_name)
        make_deterministic(device)
        _SESSIONS.clear()
        _SESSIONS[key] = worker_session(p, device, store)
    return _SESSIONS[key]


def _run_group(cwd: str, token: str, point: int, p, ids: list[str], shard, device_name: str) -> dict:
    """A Ray task: run one group (or one shard of it) of the planned tasks ``p`` (the driver's
    :class:`runner.plugin.study.Prepared`) against the shared store, every write checked against the
    driver's lease (:mod:`runner.run.execute.lease`)."""
    os.chdir(cwd)  # the spec's relative paths (its store) mean what they mean to the driver
    guard_writes(lease.checker(runner_dir(p.store_path), token))
    store = Store(p.store_path).attach()
    session = _session(p, token, point, device_name, store)
    wanted = set(ids)
    group = [t for t in p.tasks if t.id in wanted]
    report = Collected(store)
    _note_worker(store, ids, shard)
    job = Job(group, None if shard is None else [shard], report, session, store)
    extra = job.run(shard)  # the driver's recorder puts the chunks it wrote into the records
    return {"extra": extra, "notes": report.notes, "warnings": report.warnings, "provided": report.provided}


def _note_worker(store: Store, ids: list[str], shard) -> None:
    """``<store>.runner/workers/<task>.pid``: which process runs a task now (for an operator, or a
    test that kills it)."""
    name = group_key(ids) + (f"-{getattr(shard, 'name', shard)}" if shard else "")
    folder = store.state_dir / "workers"
    with writing(folder):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.pid").write_text(f"{os.getpid()}\n")
