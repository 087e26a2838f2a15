"""What goes wrong writing a store, and the one gate every write passes: the store's exceptions
and the write guard (:func:`writing`), below the store, its records and its lock, which all raise
or pass through them."""

from __future__ import annotations

import errno
import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from runner.core.errors import Locked, SpecInvalid, StorageError, Unavailable
from runner.storage.location import Location


class StoreLocked(Locked):
    """Another process is applying a spec to this store."""


class StorePathError(SpecInvalid):
    """The store path names something the runner must not write to; the message says what."""


class StoreFormatError(SpecInvalid):
    """A store written by an older runner, in a layout this one does not write to."""


class StoreUnusable(Unavailable):
    """The store path holds a zarr store this runner did not write, or one whose root metadata is
    corrupt: nothing this runner may take over (66, as for the commands that read it)."""


class StoreUnreachable(Unavailable):
    """A store on object storage that cannot be reached: no such bucket, no credentials, no endpoint (66)."""


class StoreWriteError(StorageError):
    """The store (or the runner's folder beside it) cannot be written: disk full, read-only, ...
    Work recorded before the error is kept; applying again after fixing the cause resumes."""

    def __init__(self, path: Location, err: OSError, detail: str = ""):
        self.errno = err.errno
        reason = err.strerror or str(err)
        super().__init__(f"cannot write {path}: {reason}{detail}; finished work is kept: "
                         + ("free some space" if err.errno in (errno.ENOSPC, errno.EDQUOT) else "fix this")
                         + " and run apply again to resume")


_write_guard: Callable[[], None] | None = None


def guard_writes(check: Callable[[], None] | None) -> None:
    """Run ``check`` before every write of this process that goes through :func:`writing` (region
    writes, records, checkpoints, shard files); it raises to refuse the write. A worker of a
    distributed executor installs its lease check here (:mod:`runner.run.execute.lease`); None removes it."""
    global _write_guard
    _write_guard = check


@contextmanager
def writing(path: Location) -> Iterator[None]:
    """Turn an OS error while writing ``path`` into :class:`StoreWriteError` (after the write guard)."""
    if _write_guard is not None:
        _write_guard()
    try:
        yield
    except shutil.Error as err:  # a tree copy: a list of (source, target, why); the first one says it
        raise StoreWriteError(path, first_failure(err)) from None
    except OSError as err:
        raise StoreWriteError(path, err) from None


def first_failure(err: shutil.Error) -> OSError:
    """The first failure of a tree copy as one OS error naming its file (its errno kept where it says one)."""
    entries = err.args[0] if err.args and isinstance(err.args[0], list) else []
    if not entries or not isinstance(entries[0], tuple) or len(entries[0]) != 3:
        return OSError(str(err))
    _src, target, why = entries[0]
    code = re.match(r"\[Errno (\d+)\] ([^:]*)", str(why))
    more = f" (and {len(entries) - 1} more file(s))" if len(entries) > 1 else ""
    if code:
        return OSError(int(code.group(1)), code.group(2) + more, target)
    return OSError(f"{target}: {why}{more}")
