"""Readers see whole versions of a store (issue 36): a shared lock for readers, an exclusive one for
the moment ``apply`` switches the store to a new version.

``apply`` builds every change to a store's layout and metadata beside it and switches it in with
renames (:meth:`runner.storage.store.Store.transaction`); the few writes it makes in place are each
one file. Between two such steps a reader that reads many files (``show``, ``status``, ``verify``,
the monitor, xarray through them) could still see a mix of two versions, so the switch takes
``<store>.runner/readers.lock`` exclusively, and those readers hold it shared while they read:
they wait the switch out (milliseconds), never see it half done. A kill releases the lock (the
kernel drops a dead process's ``flock``), and what a kill leaves is a whole version either way.

A reader never creates the lock file (reading writes nothing): where it does not exist (no apply
has run since this lock was added, a read-only copy) the reader reads without it. Local disks
only; a store on object storage has no such lock (its apply writes in place, as before), nor has a
system without ``fcntl``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from runner.storage.location import Location, location
from runner.storage.objects import Remote

LOCK = "readers.lock"
WAIT_S = 120.0
"""How long a reader waits for a switch before it reads anyway (a switch takes milliseconds; a
writer stopped by SIGSTOP would hold it for ever)."""

try:
    import fcntl
except ImportError:  # pragma: no cover - not on this project's platforms
    fcntl = None

_held: dict[str, int] = {}
"""Lock files this process holds exclusively -> nesting depth (a writer reading its own store does not wait for itself)."""


def _lock_file(state_dir: Location) -> str | None:
    state_dir = location(state_dir)
    if fcntl is None or isinstance(state_dir, Remote):
        return None
    return os.path.abspath(state_dir / LOCK)


def guarded(state_dir: Location) -> bool:
    """Whether readers of the store whose runner folder is ``state_dir`` hold a lock a switch waits for
    (a local disk where an apply has run): what they read is then one version, never a mix."""
    path = _lock_file(state_dir)
    return path is not None and os.path.exists(path)


@contextmanager
def reading(state_dir: Location, wait_s: float = WAIT_S) -> Iterator[None]:
    """Hold the readers' lock of the store whose runner folder is ``state_dir`` shared while the block
    reads (see the module docstring)."""
    path = _lock_file(state_dir)
    if path is None or path in _held:
        yield
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # no lock file (no apply since), or one this user cannot open: read without it
        yield
        return
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.01)
            except OSError:  # a file system without flock: read without it
                break
        yield
    finally:
        os.close(fd)  # releases the lock


@contextmanager
def switching(state_dir: Location) -> Iterator[None]:
    """Hold the readers' lock exclusively while the block switches the store to a new version
    (nested: once per process)."""
    path = _lock_file(state_dir)
    if path is None:
        yield
        return
    if path in _held:
        _held[path] += 1
        try:
            yield
        finally:
            _held[path] -= 1
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # a file system without flock
            pass
        _held[path] = 1
        try:
            yield
        finally:
            del _held[path]
    finally:
        os.close(fd)
