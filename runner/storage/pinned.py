"""A reader pinned to the version of a store it opened (issue 48): a lazy dataset from
:func:`runner.api.open` reads every chunk from that version, or raises :class:`VersionSwitched`.

``apply`` never rewrites a finished store in place: a replace, an extension or a repair builds the
next version beside it and switches it in by exchanging the two folders (:meth:`runner.storage.store.
Store.transaction`), and ``runner history --remove`` deletes a kept version's folder. Either way the
folder at the store's path is no longer the one the reader opened: its inode differs, or it is gone.
:class:`Pinned` notes the folder's (device, inode) when it is opened and checks them after every read,
so a read that crossed a switch is refused instead of mixing new values with the old attributes, or
reading a removed version as fill values. The cost is one ``stat`` per chunk read (about a
microsecond, against the chunk's own read); nothing is copied.

Results an apply adds to a store in place (the chunks of tasks still to run) are not a switch: a held
dataset sees them, as before. On object storage (no folders to exchange) a store is read as it is.
"""

from __future__ import annotations

import os
from pathlib import Path

from zarr.abc.store import ByteRequest
from zarr.core.buffer import Buffer, BufferPrototype
from zarr.storage import LocalStore, WrapperStore

from runner.core.errors import Unavailable


class VersionSwitched(Unavailable):
    """The store's version a reader opened was switched out (replace, extension, repair) or removed
    since: open it again for the version it holds now (exit 66)."""


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


class Pinned(WrapperStore[LocalStore]):
    """A read-only local zarr store that reads only the version (folder) it was opened on."""

    def __init__(self, path: Path, what: str = "store"):
        super().__init__(LocalStore(path, read_only=True))
        self.path, self.what = Path(path), what
        self.pinned = _identity(self.path)

    def check(self) -> None:
        """:class:`VersionSwitched` when the folder at the path is no longer the one opened."""
        now = _identity(self.path)
        if now != self.pinned:
            how = "was removed" if now is None else "was switched to a newer version (an apply replaced, extended or repaired it)"
            raise VersionSwitched(f"{self.path}: the {self.what} this dataset was opened on {how} since; nothing was "
                                  "read from the new one. Open it again (runner.api.open) to read what it holds now")

    async def get(self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None) -> Buffer | None:
        out = await self._store.get(key, prototype, byte_range)
        self.check()  # after the read: a read that crossed the switch is refused, not returned
        return out

    async def get_partial_values(self, prototype, key_ranges):
        out = await self._store.get_partial_values(prototype, key_ranges)
        self.check()
        return out

    async def exists(self, key: str) -> bool:
        out = await self._store.exists(key)
        self.check()
        return out
