"""Where a store lives: a local folder or a URL on object storage (``s3://bucket/path/name.zarr``),
as one :class:`Location`.

:func:`location` parses what a user wrote, once, into a :class:`runner.storage.local.Local` (a
``pathlib`` path) or a :class:`runner.storage.objects.Remote`. Both carry the part of pathlib's API
the runner uses on a store and on the runner's folder beside it, and the operations whose way
differs by the kind of location: a whole-or-nothing write, an appended line, a folder's marker,
removal and move, listing, the zarr store to write and the one to read, reachability, free space,
and whether earlier versions are kept there. Callers outside :mod:`runner.storage` never ask which
kind a location is (``tests/runner/storage/test_location_protocol.py`` keeps it so): they call these.

A store that cannot be reached is refused before any compute, naming the store
(:func:`reachable_problem`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Protocol, Union, runtime_checkable
from urllib.parse import unquote, urlparse

from runner.core.errors import Unavailable
from runner.storage.local import Local
from runner.storage.objects import URL, Remote, url_problem
from runner.storage.versioned import Versioned


class BadLocation(Unavailable):
    """A store location that names no store this runner could read or write: a malformed or unknown
    URL, an invalid bucket or key, or a local path that would not mean what it says (``~/x``, a
    Windows path on POSIX, a NUL byte). Raised by :func:`location` before anything is read or
    written (exit 66); a spec's ``[experiment] store`` is checked by the same rules (exit 65)."""


@runtime_checkable
class StoreLocation(Protocol):
    """What the runner does with a store's place, on any kind of storage (beside pathlib's
    ``/``, ``name``, ``parent``, ``exists``, ``read_bytes``, ``iterdir``, ``glob``, ...)."""

    keeps_versions: bool
    note: str | None
    """What a user should know of where this is (``(object storage)``), or None."""
    described: str
    """A store here, in words (``a store on object storage``)."""

    def write_atomic(self, data: bytes | memoryview) -> None:
        """Write whole or not at all."""

    def append_line(self, line: bytes) -> None:
        """Append one line to this log."""

    def mark_folder(self) -> None:
        """Make this folder exist, empty (on object storage: a marker object)."""

    def folder_marked(self) -> bool:
        """Whether :meth:`mark_folder` made this folder."""

    def remove_tree(self) -> None:
        """Remove this folder and what it holds (nothing when it is not there)."""

    def move_tree(self, dst: Any) -> None:
        """Rename this folder to ``dst``."""

    def entries(self) -> list:
        """(entry, is a folder) directly under this folder, by name."""

    def files(self) -> dict[str, int]:
        """Every file under this folder: relative key -> size."""

    def write_many(self, files: dict[str, bytes]) -> None:
        """Write many files under this folder (relative path -> bytes)."""

    def read_many(self, paths: list) -> dict:
        """The bytes of many files; those gone are left out."""

    def read_range(self, start: int, end: int) -> bytes:
        """Bytes ``start`` to ``end`` of this file."""

    def digests(self, keys: list[str]) -> dict[str, str | None]:
        """Key -> a digest of the file ``key`` under this folder that changes when its bytes do (None:
        no such file)."""

    def zarr_store(self, read_only: bool = False) -> Any:
        """What ``zarr.open_group`` opens to write (or read) the store here."""

    def open_lines(self) -> str:
        """Python lines that open the store here as a dataset ``ds`` (what ``apply`` prints)."""

    def reader_store(self, what: str = "store") -> Any:
        """What a reader's ``xr.open_zarr`` opens."""

    def reachable_problem(self) -> str | None:
        """Why this cannot be reached (one request), or None."""

    def local_folder(self) -> Path:
        """A folder on this machine's disk for what needs one (a database, figures)."""

    def free_bytes(self) -> tuple[float, str]:
        """Bytes free where this will be written, and where that was measured."""

    def relative_name(self, path: Any) -> str:
        """``path`` as stored: relative to this store's parent where it lies under it."""


Location = Union[Local, Remote, Path]
"""A location, or a plain local path that :func:`location` makes one."""


def location_problem(text: str) -> str | None:
    """Why the store location ``text`` (as a user wrote it: a local path, ``file:///PATH`` or
    ``s3://BUCKET/KEY``) names no store, or None. The one place a store location is parsed: the
    spec's validation, :func:`location` and :func:`reachable_problem` ask it, so that nothing is
    written, and no request made, for a location that cannot be right."""
    if "\0" in text:
        return f"{text!r} holds a NUL byte, which no path or key may hold"
    if not text.strip():
        return f"{text!r} names no store; give a path such as 'store/NAME.zarr', or s3://BUCKET/NAME.zarr"
    scheme = re.match(r"^([A-Za-z][A-Za-z0-9+.-]+):", text)  # two letters at least: C:\ is a drive
    if scheme and not text[scheme.end():].startswith("//"):
        return (f"{text!r} looks like a URL without '//' after '{scheme.group(1)}:'; write s3://BUCKET/NAME.zarr, "
                "file:///PATH/NAME.zarr or a local path")
    if "://" in text and not URL.match(text):
        return (f"{text!r} is neither a URL (a scheme such as s3:// or file:// first) nor a local path; write "
                "s3://BUCKET/NAME.zarr, file:///PATH/NAME.zarr or a local path")
    if text.lower().startswith("file://"):
        try:
            local = local_path(text)
        except ValueError as err:
            return str(err)
        if not local:
            return f"{text!r} names no path; write file:///PATH/NAME.zarr (three slashes before an absolute path)"
        return location_problem(local)
    if URL.match(text):
        return url_problem(text)
    if text.startswith("~"):
        whole = os.path.expanduser(text)
        return (f"{text!r}: '~' is not expanded here (a shell would expand it); write the whole path"
                + (f", such as {whole!r}" if whole != text else ""))
    if os.sep == "/" and (re.match(r"^[A-Za-z]:[\\/]", text) or "\\" in text):
        return (f"{text!r} is a Windows path; on this machine write a POSIX path (folders separated by '/'), "
                "such as 'store/NAME.zarr'")
    return None


def is_url(path: Any) -> bool:
    """True for a store on object storage (a :class:`Remote` or a URL other than ``file://``)."""
    if isinstance(path, Remote):
        return True
    return isinstance(path, str) and bool(URL.match(path)) and not path.lower().startswith("file://")


def location(path: Any) -> Local | Remote:
    """``path`` as the runner addresses it: a :class:`Remote` for a URL, else a :class:`Local` (a
    ``file://`` URL is its local path). A string is parsed here, once: :class:`BadLocation` for one
    :func:`location_problem` refuses."""
    if isinstance(path, (Remote, Local)):
        return path
    if isinstance(path, str) and (problem := location_problem(path)):
        raise BadLocation(problem)
    if is_url(path):
        return _remote(path)
    if isinstance(path, str) and path.lower().startswith("file://"):
        return Local(local_path(path))
    return Local(path)


def _remote(url: str) -> Remote:
    """A URL naming a store (``.../name.zarr``, not inside a store's kept folders) is a :class:`Versioned`
    store (:mod:`runner.storage.versioned`); any other a plain :class:`Remote`."""
    parts = Remote(url).key.split("/")
    if parts[-1].endswith(".zarr") and not any(p.endswith((".zarr", ".runner", ".history")) for p in parts[1:-1]):
        return Versioned(url)
    return Remote(url)


def local_path(url: str) -> str:
    """The local path a ``file://`` URL names; ValueError for one naming another host."""
    parsed = urlparse(url)
    if parsed.netloc not in ("", "localhost"):
        raise ValueError(f"{url!r}: a file:// URL names a path on this machine (file:///PATH/NAME.zarr), "
                         f"not on {parsed.netloc!r}")
    return unquote(parsed.path)


def write_atomic(path: Location, data: bytes | memoryview) -> None:
    """Write ``path`` whole or not at all (:meth:`StoreLocation.write_atomic`). Writes of the store go
    through :func:`runner.storage.store.atomic_write_bytes`, which adds the write guard and
    :class:`StoreWriteError`."""
    location(path).write_atomic(data)


def append_line(path: Location, line: bytes) -> None:
    location(path).append_line(line)


def remove_tree(path: Location) -> None:
    location(path).remove_tree()


def move_tree(src: Location, dst: Location) -> None:
    location(src).move_tree(location(dst))


def zarr_store(path: Location, read_only: bool = False):
    """What ``zarr.open_group`` and ``xr.open_zarr`` open: the path itself on disk, or an fsspec store."""
    return location(path).zarr_store(read_only)


def reachable_problem(path: Location) -> str | None:
    """Why the store at ``path`` cannot be reached (no such bucket, no credentials, no endpoint
    answering, a protocol the runner does not write), or None. One request, before any compute."""
    return location(path).reachable_problem()
