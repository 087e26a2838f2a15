"""The order in which tasks run, shared by ``apply`` (an executor runs them) and ``plan`` (one that
only notes them), so that the two cannot drift; and the loop that drives an executor.

Tasks are taken in the study's order. A task is ready when every resource it needs exists; ready
tasks of one group run together. While a task runs it may provide resources (a checkpoint); then
the tasks that were waiting for them run at once, nested in it (only tasks with needs: a task
that needs nothing never starts inside another). A finished task provides ``task:<id>``; a failed
one provides nothing, so what depends on it stays pending and is reported.

:meth:`Scheduler.run` drives an executor (:mod:`runner.run.execute.executor`) by submit and poll:
each ready group becomes a job (made by the recorder, :mod:`runner.run.execute.recorder`, which also
takes each job that ends), at most ``executor.capacity`` at once per level of nesting; a job that
runs in this process and provides a resource makes the scheduler run the groups waiting for it
before the job goes on. With capacity 1 (the local executor) the order is exactly the sequential
one that ``plan`` shows. A stop (Ctrl-C) is taken between polls.

Each resource keeps the tasks waiting for it and ready tasks sit in heaps by their place in the
study's order, so scheduling n tasks costs O(n log n) (a plan of thousands of checkpoint
measures is scheduled in milliseconds); ``tests/runner/run/execute/test_scheduler.py`` holds it to the plain
scan of the pending list that it replaced.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from typing import Protocol

from runner.core import interrupt
from runner.run.execute.executor import Done, Executor, Job
from runner.core.plan import Task


class Bookkeeper(Protocol):
    """The scheduler's bookkeeper (:class:`runner.run.execute.recorder.Recorder` in ``apply``)."""

    def start(self, group: list[Task], provide: Callable[[str], None]) -> Job:
        """The job of a group about to be submitted; its reporter calls ``provide`` in this process."""

    def finish(self, done: Done) -> set[str]:
        """Take a job that ended; the ids that succeeded."""


class Bare:
    """The recorder of a dry run: jobs with only a ``provide``; a job succeeds unless it failed."""

    def start(self, group: list[Task], provide: Callable[[str], None]) -> Job:
        return Job(group, None, _Provides(provide))

    def finish(self, done: Done) -> set[str]:
        return set() if done.error is not None else set(done.job.ids)


class _Provides:
    def __init__(self, provide: Callable[[str], None]):
        self.provide = provide


class Scheduler:
    def __init__(self, tasks: Iterable[Task], done: Iterable[str] = (), available: Iterable[str] = ()):
        done = set(done)
        self.tasks = [t for t in tasks if t.id not in done]
        self.available: set[str] = set()
        self.order: list[str] = []
        """Ids in the order they were handed to the executor."""
        self._pos = {t.id: i for i, t in enumerate(self.tasks)}
        self._taken: set[str] = set()
        self._missing = {t.id: set(t.requires) for t in self.tasks}
        self._waiting: dict[str, list[Task]] = {}
        self._groups: dict[str, list[Task]] = {}
        self._running: set[Job] = set()
        """Jobs submitted and not yet back."""
        # ready tasks by position: those that need something (may start nested) and those that need nothing
        self._ready_needs: list[tuple[int, str]] = []
        self._ready_free: list[tuple[int, str]] = []
        for t in self.tasks:
            if t.group is not None:
                self._groups.setdefault(t.group, []).append(t)
            if not t.requires:
                heapq.heappush(self._ready_free, (self._pos[t.id], t.id))
            for r in set(t.requires):
                self._waiting.setdefault(r, []).append(t)
        for r in set(available) | {f"task:{i}" for i in done}:
            self._add(r)

    @property
    def pending(self) -> list[Task]:
        return [t for t in self.tasks if t.id not in self._taken]

    def run(self, executor: Executor, recorder: Bookkeeper | None = None) -> list[Task]:
        """Run everything that can run; return the tasks left pending (their needs never appeared)."""
        self._drive(executor, recorder or Bare(), nested=False)
        return self.pending

    def _drive(self, executor: Executor, recorder: Bookkeeper, nested: bool) -> None:
        """Submit ready groups (nested: only those that need something) and take the jobs that end,
        until nothing of this level runs and nothing more is ready."""
        limit = getattr(executor, "capacity", None) or float("inf")
        mine: set[Job] = set()
        while True:
            interrupt.check()
            while len(mine) < limit and (group := self._next(nested)):
                self._taken.update(t.id for t in group)
                self.order += [t.id for t in group]
                job = recorder.start(group, lambda resource: self._provide(resource, executor, recorder))
                mine.add(job)
                self._running.add(job)
                executor.submit(job)
            mine &= self._running
            if not mine:
                return
            for done in executor.poll():
                self._running.discard(done.job)
                self.finished(recorder.finish(done), done.provided)
            mine &= self._running

    def finished(self, succeeded: Iterable[str], provided: Iterable[str] = ()) -> None:
        """A job ended: ``provided`` resources exist, and ``task:<id>`` of each id that succeeded."""
        for resource in provided:
            self._add(resource)
        for i in succeeded:
            self._add(f"task:{i}")

    def _provide(self, resource: str, executor: Executor, recorder: Bookkeeper) -> None:
        self._add(resource)
        self._drive(executor, recorder, nested=True)

    def _add(self, resource: str) -> None:
        if resource in self.available:
            return
        self.available.add(resource)
        for t in self._waiting.pop(resource, []):
            self._missing[t.id].discard(resource)
            if not self._missing[t.id]:
                heapq.heappush(self._ready_needs, (self._pos[t.id], t.id))

    def _first(self, heap: list[tuple[int, str]]) -> tuple[int, str] | None:
        while heap and heap[0][1] in self._taken:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def _next(self, nested: bool) -> list[Task]:
        """The first ready task in the study's order (nested: only tasks that need something), with
        the ready tasks of its group."""
        candidates = [c for c in (self._first(self._ready_needs), None if nested else self._first(self._ready_free)) if c]
        if not candidates:
            return []
        t = self.tasks[min(candidates)[0]]
        if t.group is None:
            return [t]
        return [u for u in self._groups[t.group] if u.id not in self._taken and not self._missing[u.id]]


class DryRun:
    """The executor of ``plan``: runs nothing, provides what each task declares it produces."""

    capacity = 1

    def __init__(self):
        self._done: list[Done] = []

    def submit(self, job: Job) -> None:
        for t in job.group:
            for resource in t.produces:
                job.report.provide(resource)
        self._done.append(Done(job, [{}]))

    def poll(self) -> list[Done]:
        done, self._done = self._done, []
        return done

    def close(self) -> None:
        pass


def dry_run(tasks: list[Task], done: Iterable[str], available: Iterable[str] = ()) -> dict[str, str]:
    """The state ``apply`` would leave each task in: ``done`` already, ``pending`` (it would run),
    or ``blocked`` (it needs a resource nothing provides)."""
    done = set(done)
    scheduler = Scheduler(tasks, done, available)
    blocked = {t.id for t in scheduler.run(DryRun())}
    return {t.id: "done" if t.id in done else "blocked" if t.id in blocked else "pending" for t in tasks}
