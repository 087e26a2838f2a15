"""Stopping a run cleanly: Ctrl-C (SIGINT) and SIGTERM end it at the next safe point.

Inside :func:`graceful_stop`, the first SIGINT or SIGTERM only sets a flag; the loops call
:func:`check` between steps, batches and tasks, where nothing is half-written, and it raises
:class:`KeyboardInterrupt` there. So a signal never lands inside a store write, a checkpoint
save or the lock's release, and it is never lost: once requested, the stop happens at the next
check. A second signal interrupts at once (the user insists).

:func:`stall_point` is a test hook: with ``RUNNER_TEST_STALL="<network label>@<step>"`` in the
environment, the run of that network pauses after that step: it writes ``<state dir>/stalled``
and waits there (checking for a stop) until the file is removed, so that a test can signal or
kill it, or change its surroundings (fill the disk), at a known point. With
``RUNNER_TEST_KILL="<label>@<step>"`` (read when the point is reached) the process kills itself
there with SIGKILL instead: a kill at an exact point of a switch, for the tests of what a kill leaves.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

STALL_ENV = "RUNNER_TEST_STALL"
KILL_ENV = "RUNNER_TEST_KILL"

_requested: list[int] = []
_stall = os.environ.get(STALL_ENV)


def check() -> None:
    """Raise :class:`KeyboardInterrupt` if a stop was requested (call it at safe points)."""
    if _requested:
        raise KeyboardInterrupt


def requested() -> bool:
    return bool(_requested)


@contextmanager
def graceful_stop() -> Iterator[None]:
    """Turn SIGINT/SIGTERM into a stop at the next :func:`check` while the block runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, _frame) -> None:
        _requested.append(signum)
        if len(_requested) > 1:
            raise KeyboardInterrupt

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        _requested.clear()


def stall_point(state_dir: Path, label: str, step: int) -> None:
    """Test hook (see the module docstring); does nothing unless ``RUNNER_TEST_STALL`` or
    ``RUNNER_TEST_KILL`` names this point."""
    if os.environ.get(KILL_ENV) == f"{label}@{step}":
        os.kill(os.getpid(), signal.SIGKILL)  # pragma: no cover  (the suite kills here; no coverage is saved)
    if _stall is None or _stall != f"{label}@{step}":
        return
    marker = state_dir / "stalled"
    marker.write_text(f"{os.getpid()} {label}@{step}\n")
    while marker.exists():
        check()
        time.sleep(0.05)
