"""The default executor: each group runs in this process, at once, when it is submitted.

One group at a time (``capacity = 1``), so the order is the plan's; a group that provides a
resource while it runs (a checkpoint) has the groups waiting for it run inside its ``provide``,
between its steps. Its shards (``--shards``) run one after the other. The bookkeeping is the
recorder's (:mod:`runner.run.execute.recorder`).
"""

from __future__ import annotations

from runner.run.execute.executor import Done, Job, run_here


class LocalExecutor:
    capacity = 1

    def __init__(self, p=None, device=None, options=None):
        self._done: list[Done] = []

    def submit(self, job: Job) -> None:
        done = run_here(job)  # before taking the list: a poll of the groups run inside it replaces it
        self._done.append(done)

    def poll(self) -> list[Done]:
        done, self._done = self._done, []
        return done

    def close(self) -> None:
        pass
