"""An executor added without touching the engine: groups run in a pool of threads.

It only submits and polls (runner.run.execute.executor); the records, events, progress and failures are
the recorder's. Each job runs off the scheduler's thread, so with a collecting reporter on a store
handle of its own: the resources a group provides reach the scheduler when the group ends.
``TOY_EXECUTOR_THREADS`` sets the pool's size (default 2); each group notes the thread it ran in.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from runner.run.execute.executor import Done, Job, run_here
from runner.run.execute.registry import register_executor


class ThreadExecutor:
    def __init__(self, p, device, options):
        self.capacity = int(os.environ.get("TOY_EXECUTOR_THREADS", "2"))
        self.pool = ThreadPoolExecutor(self.capacity, thread_name_prefix="toy-executor")
        self.running: dict[Future, Job] = {}

    def submit(self, job: Job) -> None:
        self.running[self.pool.submit(_run, job)] = job

    def poll(self) -> list[Done]:
        if not self.running:
            return []
        finished, _ = wait(self.running, timeout=0.5, return_when=FIRST_COMPLETED)
        for future in finished:
            del self.running[future]
        return [future.result() for future in finished]  # a stop or a store write error ends the run here

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def _run(job: Job) -> Done:
    """Run ``job`` in this thread, noting where it ran (a ``ran_in`` event when it ends)."""
    done = run_here(job, collect=True)
    done.notes.append(("ran_in", {"thread": threading.current_thread().name}))
    return done


register_executor("threads", f"{__name__}:ThreadExecutor")
