"""A store on a local disk: :class:`Local`, a ``pathlib`` path with the operations of
:class:`runner.storage.location.Location`, and the one-step exchange of two folders that switches
a store's versions (:func:`exchange`)."""

from __future__ import annotations

import ctypes
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from runner.storage.digest import bytes_digests


class Local(type(Path())):  # PosixPath (or WindowsPath): pathlib.Path itself cannot be subclassed before 3.12
    """A local path; every path derived from it (``/``, ``parent``) is one too."""

    keeps_versions = True
    """Replacing, dropping or extending finished results keeps the earlier version in ``<store>.history/``."""
    note = None
    described = "a store on a local disk"

    def entries(self) -> list[tuple[Local, bool]]:
        """(entry, is a folder) of every entry directly in this folder, by name (none when it is not one)."""
        try:
            return sorted(((self / e.name, e.is_dir()) for e in os.scandir(self)), key=lambda e: e[0].name)
        except OSError:
            return []

    def files(self) -> dict[str, int]:
        """Every file under this folder, at any depth: its path relative to it ('/'-separated) -> its size."""
        out = {}
        for folder, _dirs, names in os.walk(self):
            rel = os.path.relpath(folder, self)
            for name in names:
                try:
                    out[name if rel == "." else f"{rel}/{name}".replace(os.sep, "/")] = \
                        os.path.getsize(os.path.join(folder, name))
                except FileNotFoundError:
                    continue  # removed meanwhile
        return out

    def read_many(self, paths: list[Local]) -> dict[Local, bytes]:
        """The bytes of many files; those gone meanwhile are left out, any other failure raised."""
        out = {}
        for p in paths:
            try:
                out[p] = p.read_bytes()
            except FileNotFoundError:
                continue
        return out

    def write_many(self, files: dict[str, bytes]) -> None:
        """Write many files under this folder (relative path -> bytes), each whole or not at all."""
        for name, data in files.items():
            (self / name).write_atomic(data)

    def digests(self, keys: list[str]) -> dict[str, str | None]:
        """Key -> the BLAKE2b digest of the file ``key`` under this folder, read (None: no such file)."""
        return bytes_digests(self, keys)

    def read_range(self, start: int, end: int) -> bytes:
        """Bytes ``start`` to ``end`` of this file (fewer at its end)."""
        with open(self, "rb") as f:
            f.seek(start)
            return f.read(max(0, end - start))

    def write_atomic(self, data: bytes | memoryview) -> None:
        """A temporary file, fsync and a rename: no partial file is ever left at this path."""
        self.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.parent, prefix=f".{self.name}.")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def append_line(self, line: bytes) -> None:
        self.parent.mkdir(parents=True, exist_ok=True)
        with open(self, "ab") as f:
            f.write(line)

    def mark_folder(self) -> None:
        self.mkdir(parents=True, exist_ok=True)

    def folder_marked(self) -> bool:
        return self.is_dir()

    def remove_tree(self) -> None:
        shutil.rmtree(self, ignore_errors=True)

    def move_tree(self, dst: Path) -> None:
        os.replace(self, dst)

    def zarr_store(self, read_only: bool = False):
        return self  # zarr and xarray open a local path as it is

    def open_lines(self) -> str:
        """Python lines that open the store here as a dataset ``ds``."""
        return f"import xarray as xr\nds = xr.open_zarr({str(self)!r})"

    def reader_store(self, what: str = "store"):
        """What a reader opens: the store pinned to the version opened (its reads after a switch or a
        removal raise :class:`runner.storage.pinned.VersionSwitched`, never another version's values)."""
        from runner.storage.pinned import Pinned  # lazy: zarr

        return Pinned(self, what)

    # --- versions (runner.storage.store.Store.transaction)
    def stage_at(self, beside: Path, version: str) -> Local:
        """Where the next version ``version`` of the store here is built: the folder ``beside``."""
        return Local(beside)

    def begin_stage(self, stage: Path) -> None:
        """Begin the next version: a copy of the store of hard links (zarr writes each file anew, so
        the store's own files stay as they were)."""
        shutil.rmtree(stage, ignore_errors=True)
        shutil.copytree(self, stage, copy_function=link_or_copy)

    def switch_stage(self, stage: Path) -> None:
        """Make the next version the store's: one exchange of the two folders."""
        exchange(stage, self)

    def end_stage(self, stage: Path, live: tuple = ()) -> None:
        """After a switch (or an error before it): the version before, or the unfinished one, removed."""
        shutil.rmtree(stage, ignore_errors=True)

    def finish_switch(self) -> None:
        """After a kill inside :func:`exchange`'s fallback: the store's folder put back."""
        finish_exchange(self)

    def fresh(self) -> Local:
        return self

    def reachable_problem(self) -> str | None:
        return None  # a disk is probed by store_path_problem's write test, when a store is made

    def local_folder(self) -> Path:
        """Where files that need a disk go (a SQLite database, figures): beside the store."""
        return Path(self.parent)

    def free_bytes(self) -> tuple[float, str]:
        """Bytes free on the disk this path will be written to, and the existing folder measured."""
        path = self.absolute()
        folder = next(p for p in [path, *path.parents] if p.exists())
        return shutil.disk_usage(folder).free, str(folder)

    def relative_name(self, path: Any) -> str:
        """``path`` relative to this store's parent folder (absolute when it lies elsewhere), as stored."""
        parent = self.parent.resolve()
        try:
            return str(Path(path).resolve().relative_to(parent))
        except ValueError:
            return str(Path(path).resolve())


def link_or_copy(src: str, dst: str) -> None:
    """A hard link, or a copy where there can be none (another filesystem)."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


_RENAME_EXCHANGE = 2  # linux/fs.h


def exchange(a: Path, b: Path) -> None:
    """Swap two folders of one file system in one step (Linux's ``renameat2(RENAME_EXCHANGE)``), so
    that a path names one whole folder or the other at every instant. Where the kernel or the file
    system cannot, two renames through ``<b>.old`` (for a moment ``b`` is absent; :func:`finish_exchange`
    completes a swap a kill cut short)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        renameat2 = None
    if renameat2 is not None:
        at_fdcwd = -100
        if renameat2(at_fdcwd, os.fsencode(os.path.abspath(a)), at_fdcwd, os.fsencode(os.path.abspath(b)),
                     _RENAME_EXCHANGE) == 0:
            return
    aside = b.with_name(b.name + ".old")
    os.replace(b, aside)
    os.replace(a, b)
    os.replace(aside, a)


def finish_exchange(b: Path) -> None:
    """After a kill inside :func:`exchange`'s two-rename fallback: put ``<b>.old`` back when ``b`` is gone."""
    aside = b.with_name(b.name + ".old")
    if aside.is_dir() and not b.exists():
        os.replace(aside, b)
