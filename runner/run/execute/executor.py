"""What an executor is: it submits groups of tasks and polls for the ones that finished; nothing else.

The scheduler (:mod:`runner.run.execute.scheduler`) hands an executor one :class:`Job` at a time with
:meth:`Executor.submit` and asks :meth:`Executor.poll` for the jobs that ended, as :class:`Done`
(each part's result, or the error). The bookkeeping (completion records, events, progress bars,
failures, timing, merging shards) is the recorder's (:mod:`runner.run.execute.recorder`), so an
executor is only where and how a group runs:

- in this process: :meth:`Job.run` (the job's own reporter, whose ``provide`` lets the scheduler
  run the tasks waiting for a resource at once, nested in the running group); :func:`run_here`
  runs every part of a job so and catches its failure;
- elsewhere (a thread, a worker process, a cluster): :meth:`Job.run` with a :class:`Collected`
  reporter on a store of its own (:meth:`Job.collecting`); the resources, notes and warnings it
  collected come back in :class:`Done`, and the scheduler learns the resources when the job ends.

Stops (:class:`KeyboardInterrupt`), store write errors (:class:`runner.storage.store_errors.StoreWriteError`) and
a lost lock (:class:`runner.core.errors.Locked`: this apply may no longer write the store) end the whole
run: an executor lets them through (from ``submit`` or ``poll``); any other error fails only its
job (its dependents stay pending).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from runner.core.errors import Locked
from runner.core.plan import Task
from runner.plugin.study import Reporter, Session
from runner.storage.store_errors import StoreWriteError

FATAL: tuple[type[BaseException], ...] = (KeyboardInterrupt, Locked)
"""Errors that end the whole run rather than fail one job (with :class:`runner.storage.store_errors.StoreWriteError`)."""


def fatal(err: BaseException) -> bool:
    return isinstance(err, (*FATAL, StoreWriteError))


def error_text(err: BaseException) -> str:
    """How a failed job's error is recorded and shown: ``"ValueError: what went wrong"``."""
    return f"{type(err).__name__}: {err}"


@dataclass(eq=False)
class Job:
    """A group of ready tasks to run: whole (``parts`` is None) or as sample shards (one run each)."""

    group: list[Task]
    parts: list[Any] | None
    """The group's sample shards (``Shards.split``, ``--shards``), each run on its own; None: run it whole."""
    report: Reporter
    """The reporter of a run in this process, on the scheduler's thread (progress bars, events,
    resources provided at once)."""
    session: Session | None = None
    store: Any = None
    """The locked store the run writes to (:class:`runner.storage.store.Store`)."""

    @property
    def ids(self) -> list[str]:
        return [t.id for t in self.group]

    @property
    def shards(self) -> list[Any]:
        """What to run: each part, or the whole group once (``[None]``)."""
        return self.parts if self.parts is not None else [None]

    def run(self, shard: Any = None, report: Reporter | None = None) -> dict[str, Any]:
        """Run the group (or one of its shards) in this process through the study's session, noting the
        chunks it writes for its records; return what the session returns (fields for the records)."""
        report = report if report is not None else self.report
        with report.store.journal(self.ids):
            out = (self.session.run(self.group, report) if shard is None
                   else self.session.run(self.group, report, shard))
        return out or {}

    def collecting(self) -> Collected:
        """A reporter for a run off the scheduler's thread, on a store handle of its own."""
        from runner.storage.store import Store  # lazy: filelock

        return Collected(Store(self.store.path).attach())


@dataclass
class Done:
    """A job that ended: one result per part (in order), or the error that failed it."""

    job: Job
    results: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    provided: list[str] = field(default_factory=list)
    """Resources it provided that the scheduler has not seen (a run elsewhere); they exist now."""
    notes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """Events it noted elsewhere, written to the event log when it ends."""
    warnings: list[str] = field(default_factory=list)


class Executor(Protocol):
    """Where groups run (``runner apply --executor NAME``): built with ``(prepared, device, options)``."""

    capacity: int | None
    """How many jobs may run at once (the local executor: 1); None: as many as are ready."""

    def submit(self, job: Job) -> None:
        """Start ``job`` (or run it now); it is reported by a later :meth:`poll`."""

    def poll(self) -> list[Done]:
        """The jobs that ended since the last poll; may wait a moment (well under a second) for one."""

    def close(self) -> None:
        """Cancel what still runs and release what the executor holds (a cluster it started)."""


class Collected:
    """The reporter of a run off the scheduler's thread: it collects what the run tells the engine,
    which returns in :class:`Done` when the job ends (progress is not reported)."""

    def __init__(self, store):
        self.store = store
        self.notes: list[tuple[str, dict[str, Any]]] = []
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


def run_here(job: Job, collect: bool = False) -> Done:
    """Run every part of ``job`` in this process, one after the other: with its own reporter, or
    (``collect``, off the scheduler's thread) with a :class:`Collected` one. A failure fails the job;
    a stop or a store write error is raised."""
    report = job.collecting() if collect else None
    try:
        results = [job.run(shard, report) for shard in job.shards]
    except BaseException as err:
        if fatal(err) or not isinstance(err, Exception):
            raise
        return Done(job, error=error_text(err))
    if report is None:
        return Done(job, results)
    return Done(job, results, provided=report.provided, notes=report.notes, warnings=report.warnings)
