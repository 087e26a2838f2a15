"""The recorder of ``apply`` with the local executor on a real store: every shard's result is kept
(``merge`` receives them all, the records resume from the earliest), and a group's recorded seconds
leave out the groups run inside it while it provided a resource."""

from __future__ import annotations

import time

import numpy as np

from runner.storage.events import EventLog
from runner.run.execute.local import LocalExecutor
from runner.run.execute.recorder import Recorder, combine
from runner.run.execute.scheduler import Scheduler
from runner.core.layout import LayoutBuilder
from runner.core.plan import Task
from runner.core.progress import ProgressView
from runner.storage.store import read_tasks
from runner.plugin.study import Prepared, Shards
from runner.run.apply import open_run, close_run


class Halves(Shards):
    """A study whose groups split into ``n`` shards named by their index (declared: :class:`Shards`)."""

    name = "halves"

    def split(self, p, group, n):
        return list(range(n))


class Session:
    def __init__(self):
        b = LayoutBuilder()
        b.index("network", 1)
        b.var("x", "m", ("network",), "float64", np.nan, "a value", "1", "")
        self.layout = b.build()
        self.merged = None

    def run(self, group, report, shard=None):
        if group[0].measure == "inner":
            time.sleep(0.2)  # the work of a group run inside another
        for resource in group[0].produces:
            report.provide(resource)
        return {"resumed_from": 10 * (shard or 0) + 5, "device": "cpu"}

    def merge(self, group, shards, store, results):
        self.merged = results
        store.write("x", (0,), np.float64(len(results)))


def run(tmp_path, tasks, shards=1):
    p = Prepared(Halves(), None, None, tasks, ["net"])
    session = Session()
    store, events, view = open_run(tmp_path / "s.zarr", quiet=True)
    try:
        store.open(session.layout, {})
        recorder = Recorder(p, session, store, events, view, "cpu", shards)
        left = Scheduler(tasks).run(LocalExecutor(), recorder)
    finally:
        close_run(store, events, view)
    return session, recorder, left


def test_every_shards_result_reaches_merge_and_the_record(tmp_path):
    session, recorder, left = run(tmp_path, [Task("a", "k", "m", 0, "m", steps=3)], shards=3)
    assert left == [] and recorder.failed == {}
    assert session.merged == [{"resumed_from": r, "device": "cpu"} for r in (5, 15, 25)]
    (record,) = read_tasks(tmp_path / "s.zarr").values()
    assert record["resumed_from"] == 5 and record["chunks"]["x"]  # the merge's writes are the task's


def test_a_group_run_inside_another_is_not_counted_in_its_seconds(tmp_path):
    tasks = [Task("outer", "k", "outer", 0, "outer", produces=("ckpt",)),
             Task("inner", "k", "inner", 0, "inner", needs=("ckpt",))]
    _, recorder, _ = run(tmp_path, tasks)
    records = read_tasks(tmp_path / "s.zarr")
    assert recorder.ran == ["inner", "outer"]  # inner ran (and ended) inside outer
    assert records["inner"]["seconds"] >= 0.2 > records["outer"]["seconds"]


def test_the_results_of_parts_combine_into_one_record():
    assert combine([]) == {}
    assert combine([{"resumed_from": 3, "loop_seconds": 1.0, "device": "cpu"}]) == \
        {"resumed_from": 3, "loop_seconds": 1.0, "device": "cpu"}
    assert combine([{"resumed_from": 7, "loop_seconds": 1.0, "device": "cpu"},
                    {"resumed_from": 2, "loop_seconds": 0.5, "device": "cpu"}]) == \
        {"resumed_from": 2, "loop_seconds": 1.5, "device": "cpu"}
