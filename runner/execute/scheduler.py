"""The order in which tasks run, shared by ``apply`` (an executor that runs them) and ``plan`` (one
that only notes them), so that the two cannot drift.

Tasks are taken in the study's order. A task is ready when every resource it needs exists; ready
tasks of one group run together. While a task runs it may provide resources (a checkpoint); then
the tasks that were waiting for them run at once, nested in it (only tasks with needs: a task
that needs nothing never starts inside another). A finished task provides ``task:<id>``; a failed
one provides nothing, so what depends on it stays pending and is reported.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from runner.plan import Task


class Executor(Protocol):
    def run(self, group: list[Task], provide: Callable[[str], None]) -> set[str]:
        """Run ``group``; call ``provide(resource)`` as resources appear; return the ids that succeeded."""


class Scheduler:
    def __init__(self, tasks: Iterable[Task], done: Iterable[str] = (), available: Iterable[str] = ()):
        done = set(done)
        self.pending = [t for t in tasks if t.id not in done]
        self.available = set(available) | {f"task:{i}" for i in done}
        self.order: list[str] = []
        """Ids in the order they were handed to the executor."""

    def run(self, executor: Executor) -> list[Task]:
        """Run everything that can run; return the tasks left pending (their needs never appeared)."""
        self._step(executor, nested=False)
        return self.pending

    def _step(self, executor: Executor, nested: bool) -> None:
        while (group := self._next(nested)):
            for t in group:
                self.pending.remove(t)
            self.order += [t.id for t in group]
            succeeded = executor.run(group, lambda resource: self._provide(resource, executor))
            self.available |= {f"task:{i}" for i in succeeded}

    def _provide(self, resource: str, executor: Executor) -> None:
        self.available.add(resource)
        self._step(executor, nested=True)

    def _next(self, nested: bool) -> list[Task]:
        for t in self.pending:
            if (nested and not t.requires) or not self._ready(t):
                continue
            if t.group is None:
                return [t]
            return [u for u in self.pending if u.group == t.group and self._ready(u)]
        return []

    def _ready(self, t: Task) -> bool:
        return all(r in self.available for r in t.requires)


class DryRun:
    """The executor of ``plan``: runs nothing, provides what each task declares it produces."""

    def run(self, group: list[Task], provide: Callable[[str], None]) -> set[str]:
        for t in group:
            for resource in t.produces:
                provide(resource)
        return {t.id for t in group}


def dry_run(tasks: list[Task], done: Iterable[str], available: Iterable[str] = ()) -> dict[str, str]:
    """The state ``apply`` would leave each task in: ``done`` already, ``pending`` (it would run),
    or ``blocked`` (it needs a resource nothing provides)."""
    done = set(done)
    scheduler = Scheduler(tasks, done, available)
    blocked = {t.id for t in scheduler.run(DryRun())}
    return {t.id: "done" if t.id in done else "blocked" if t.id in blocked else "pending" for t in tasks}
