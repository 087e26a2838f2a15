"""No writer without the lock: the store's lease, which every worker checks before each write.

The lock (``<store>.runner/apply.lock``) is held by one driver, but the workers of a distributed
executor write without it, and a worker can outlive its driver (a ``kill -9`` of the driver): it
would go on writing chunks, checkpoints and shard files while a new ``apply`` already resumes the
store. So the lock holder writes a lease beside the store when it takes the lock
(:func:`take`, ``<store>.runner/lease.json``): a fresh token, who holds it (host, pid and the
process's start time) and when it was last renewed. A worker gets the token with each task and
installs :func:`checker` as the store's write guard (:func:`runner.storage.store_errors.guard_writes`), which runs
before every write that goes through the store (region writes, checkpoints, shard files, the
chunk journal). A write is refused (:class:`LeaseLost`, the task fails) when:

- the lease holds another token: a newer ``apply`` took the store (fencing);
- the holder runs on this host and its process is gone (exact and immediate: the pid with the same
  start time, so a reused pid does not count);
- the holder runs on another host and renewed the lease more than :data:`TTL` seconds ago (the
  driver renews it every :data:`RENEW_SECONDS`, :class:`Renewer`; clocks are assumed to agree
  within seconds).

What remains: a write that passed its check while the driver was still alive can land after the
driver died (at most one region write or checkpoint per worker, milliseconds), and on another
host a worker may write up to :data:`TTL` seconds after its driver died, unless a newer ``apply``
took the lease first. The local cluster of an ``apply`` is also stopped with its driver
(:mod:`runner.run.execute.reaper`), which ends its workers in a fraction of a second.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable

from runner.core import processes
from runner.core.errors import Locked
from runner.storage.location import Location, location
from runner.storage.store import atomic_write_bytes

LEASE_FILE = "lease.json"
TTL = 30.0
RENEW_SECONDS = 5.0
REFUSED_LOG_ENV = "RUNNER_TEST_FENCE_LOG"
"""Test hook: a file where a worker notes each write its guard refused (it writes nothing else)."""


class LeaseLost(Locked):
    """This process no longer writes for the store's lock holder (75)."""


def _write(state_dir, lease: dict) -> None:
    atomic_write_bytes(location(state_dir) / LEASE_FILE, (json.dumps(lease) + "\n").encode())


def read(state_dir) -> dict | None:
    try:
        return json.loads((location(state_dir) / LEASE_FILE).read_text())
    except (OSError, ValueError):
        return None


def take(state_dir: Location) -> str:
    """A new lease for this process (the lock holder); its token. Workers of an earlier holder are
    refused from now on."""
    token = uuid.uuid4().hex
    _write(state_dir, {"token": token, **processes.me(), "renewed": time.time()})
    return token


def renew(state_dir: Location, token: str) -> bool:
    """Mark the lease renewed now; False when it is no longer this token's."""
    lease = read(state_dir)
    if lease is None or lease.get("token") != token:
        return False
    _write(state_dir, {**lease, "renewed": time.time()})
    return True


def problem(state_dir: Location, token: str) -> str | None:
    """Why a worker given ``token`` may not write now, or None."""
    lease = read(state_dir)
    if lease is None or lease.get("token") != token:
        return "another `runner apply` took the store"
    if processes.gone_here(lease):
        return f"the apply that holds the store (pid {lease['pid']}) is gone"
    if lease.get("host") != socket.gethostname() and time.time() - float(lease.get("renewed", 0)) > TTL:
        return f"the apply that holds the store (pid {lease['pid']} on {lease['host']}) stopped renewing its lease"
    return None


def checker(state_dir: Location, token: str) -> Callable[[], None]:
    """The write guard of a worker given ``token``: raises :class:`LeaseLost` when it may not write."""
    state_dir = location(state_dir)

    def check() -> None:
        why = problem(state_dir, token)
        if why is None:
            return
        log = os.environ.get(REFUSED_LOG_ENV)
        if log:
            with open(log, "a") as f:
                f.write(f"{os.getpid()} refused: {why}\n")
        raise LeaseLost(f"{state_dir.parent}: a write refused: {why}; this worker stops")

    return check


class Renewer:
    """The driver's thread that renews its lease every :data:`RENEW_SECONDS` (for workers on other hosts)."""

    def __init__(self, state_dir: Location, token: str):
        self.state_dir, self.token = location(state_dir), token
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease-renewer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(RENEW_SECONDS):
            try:
                if not renew(self.state_dir, self.token):
                    return
            except Locked:  # this apply lost the store's lock (object storage): its lease is not to be kept
                return
            except Exception:  # a full disk, a server that did not answer: the run's own writes say so
                continue

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1)
