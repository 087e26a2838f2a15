"""The scheduler against its specification: the straightforward list scan it replaced, on random plans."""

from __future__ import annotations

import random

import pytest

from runner.run.execute.executor import Done
from runner.run.execute.scheduler import Bare, DryRun, Scheduler
from runner.core.plan import Task


class Reference:
    """The specification: scan the pending tasks in the study's order for the first ready one, run
    it to its end (what waits for a resource it provides runs inside it), then scan again."""

    def __init__(self, tasks, done=(), available=()):
        self.pending = [t for t in tasks if t.id not in set(done)]
        self.available = set(available) | {f"task:{i}" for i in done}
        self.order = []

    def run(self, executor):
        self._step(executor, False)
        return self.pending

    def _step(self, executor, nested):
        while group := self._next(nested):
            for t in group:
                self.pending.remove(t)
            self.order += [t.id for t in group]
            executor.submit(Bare().start(group, lambda r: self._provide(r, executor)))
            (done,) = executor.poll()
            self.available |= {f"task:{i}" for i in Bare().finish(done)}

    def _provide(self, r, executor):
        self.available.add(r)
        self._step(executor, True)

    def _next(self, nested):
        ready = lambda t: all(r in self.available for r in t.requires)  # noqa: E731
        for t in self.pending:
            if (nested and not t.requires) or not ready(t):
                continue
            return [t] if t.group is None else [u for u in self.pending if u.group == t.group and ready(u)]
        return []


class Flaky(DryRun):
    """Provides what a task produces, but fails some tasks (what depends on them stays pending)."""

    def __init__(self, failing):
        super().__init__()
        self.failing = failing

    def submit(self, job):
        for t in job.group:
            if t.id not in self.failing:
                for r in t.produces:
                    job.report.provide(r)
        failed = {t.id for t in job.group} & self.failing
        self._done.append(Done(job, [{}]) if not failed else Done(job, error=f"{sorted(failed)} failed"))


def random_plan(rng: random.Random, n: int) -> list[Task]:
    tasks = []
    for i in range(n):
        earlier = [t.id for t in tasks]
        deps = tuple(rng.sample(earlier, rng.randint(0, min(3, len(earlier))))) if earlier and rng.random() < 0.6 else ()
        needs = None
        if rng.random() < 0.3:  # a resource another task produces (a checkpoint), or one nothing produces
            needs = deps and tuple(f"task:{d}" for d in deps) or ()
            needs = tuple(needs) + (f"ckpt:{rng.randint(0, n // 2)}",)
        produces = tuple(f"ckpt:{rng.randint(0, n // 2)}" for _ in range(rng.randint(0, 2)))
        group = f"g{rng.randint(0, 4)}" if rng.random() < 0.4 else None
        tasks.append(Task(f"t{i}", "k", "m", 0, f"t{i}", deps=deps, needs=needs, produces=produces, group=group))
    rng.shuffle(tasks)
    return tasks


@pytest.mark.parametrize("seed", range(40))
def test_the_scheduler_runs_tasks_in_the_order_of_its_specification(seed):
    rng = random.Random(seed)
    tasks = random_plan(rng, rng.randint(1, 60))
    done = {t.id for t in tasks if rng.random() < 0.2}
    available = {f"ckpt:{k}" for k in range(5) if rng.random() < 0.3}
    failing = {t.id for t in tasks if rng.random() < 0.1}
    for executor in (DryRun(), Flaky(failing)):
        fast, ref = Scheduler(tasks, done, available), Reference(tasks, done, available)
        assert [t.id for t in fast.run(executor)] == [t.id for t in ref.run(executor)]
        assert fast.order == ref.order


def test_a_large_plan_is_scheduled_in_linear_time():
    tasks = [Task(f"t{i}", "k", "m", 0, "x", deps=(f"t{i - 1}",) if i % 10 else ()) for i in range(20_000)]
    scheduler = Scheduler(tasks)
    assert scheduler.run(DryRun()) == [] and len(scheduler.order) == 20_000


class Pool(Flaky):
    """Every ready group at once, run elsewhere: a job's resources reach the scheduler when it ends,
    and jobs end in a random order."""

    capacity = None

    def __init__(self, failing, rng):
        super().__init__(failing)
        self.rng, self.jobs = rng, []

    def submit(self, job):
        self.jobs.append(job)

    def poll(self):
        if not self.jobs:
            return []
        job = self.jobs.pop(self.rng.randrange(len(self.jobs)))
        provided = [r for t in job.group if t.id not in self.failing for r in t.produces]
        failed = {t.id for t in job.group} & self.failing
        return [Done(job, [{}], provided=provided) if not failed else Done(job, error="failed", provided=provided)]


@pytest.mark.parametrize("seed", range(20))
def test_an_executor_that_runs_groups_at_once_runs_what_the_specification_runs(seed):
    rng = random.Random(seed)
    tasks = random_plan(rng, rng.randint(1, 60))
    done = {t.id for t in tasks if rng.random() < 0.2}
    # a failed job fails its whole group, and which tasks of a group run together depends on when
    # they become ready: only tasks outside groups fail here, so that the outcome cannot depend on it
    failing = {t.id for t in tasks if t.group is None and rng.random() < 0.1}
    pooled, ref = Scheduler(tasks, done), Reference(tasks, done)
    assert {t.id for t in pooled.run(Pool(failing, rng))} == {t.id for t in ref.run(Flaky(failing))}
    assert sorted(pooled.order) == sorted(ref.order)  # each task handed out once
