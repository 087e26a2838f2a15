"""Where a store lives: a local folder, or a URL on object storage (``s3://bucket/path/name.zarr``).

A local store path stays a plain :class:`pathlib.Path`, and everything the runner does with it is
what it always did. A URL (any fsspec protocol name followed by ``://``, but ``file://``) becomes a
:class:`Remote`: the part of pathlib's API the runner uses on a store and on the runner's folder
beside it (``/``, ``name``, ``parent``, ``with_suffix``, ``exists``, ``is_dir``, ``read_bytes``,
``write_bytes``, ``unlink``, ``iterdir``, ``glob``), done through fsspec. The functions below do
what pathlib alone cannot, for either kind: a whole-or-nothing write (:func:`write_atomic`: a
temporary file and a rename on disk, one PUT on S3, which is atomic there), an appended line
(:func:`append_line`: on S3 a new small object per line, since objects cannot be appended to),
removing a folder, a zarr store to open (:func:`zarr_store`).

Credentials and endpoint come from the standard places, read by botocore: ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY`` (or ``AWS_PROFILE`` and ``~/.aws``), ``AWS_REGION``, and
``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL`` for an S3-compatible server (MinIO, Ceph, moto).
A store whose bucket cannot be reached is refused before any compute, naming the store
(:func:`reachable_problem`). Only ``s3://`` is written (its lock needs S3's conditional writes,
:mod:`runner.storage.bucket_lock`); other protocols are refused with that reason.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import tempfile
import time
from pathlib import Path, PurePosixPath
from typing import Any, Union
from urllib.parse import unquote, urlparse

from runner.core.errors import Unavailable

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
WRITABLE = ("s3",)
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


class BadLocation(Unavailable):
    """A store location that names no store this runner could read or write: a malformed or unknown
    URL, an invalid bucket or key, or a local path that would not mean what it says (``~/x``, a
    Windows path on POSIX, a NUL byte). Raised by :func:`location` before anything is read or
    written (exit 66); a spec's ``[experiment] store`` is checked by the same rules (exit 65)."""


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
    if "://" in text and not _URL.match(text):
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
    if _URL.match(text):
        return _url_problem(text)
    if text.startswith("~"):
        whole = os.path.expanduser(text)
        return (f"{text!r}: '~' is not expanded here (a shell would expand it); write the whole path"
                + (f", such as {whole!r}" if whole != text else ""))
    if os.sep == "/" and (re.match(r"^[A-Za-z]:[\\/]", text) or "\\" in text):
        return (f"{text!r} is a Windows path; on this machine write a POSIX path (folders separated by '/'), "
                "such as 'store/NAME.zarr'")
    return None


def _url_problem(url: str) -> str | None:
    """Why the URL ``url`` names no store the runner writes (an unknown scheme, a malformed bucket
    or key), or None; nothing is requested."""
    protocol = _URL.match(url).group(1).lower()
    if protocol not in WRITABLE:
        return (f"{url}: the runner writes stores on local disks and on s3:// only (the lock needs S3's "
                f"conditional writes); {protocol}:// is not supported")
    rest = url[_URL.match(url).end():]
    bucket, _, key = rest.partition("/")
    key = key.rstrip("/")
    if "?" in rest or "#" in rest:
        return (f"{url}: a store URL has no query or fragment ('?', '#'); write s3://BUCKET/NAME.zarr (the endpoint "
                "and credentials come from AWS_ENDPOINT_URL and AWS_PROFILE)")
    if not bucket:
        return f"{url}: no bucket after {protocol}://; write {protocol}://BUCKET/NAME.zarr"
    if not key:
        return f"{url}: name a store inside the bucket, such as s3://{bucket or 'BUCKET'}/NAME.zarr"
    if not _BUCKET.match(bucket) or ".." in bucket or re.match(r"^\d+\.\d+\.\d+\.\d+$", bucket):
        return (f"{url}: {bucket!r} is not a valid S3 bucket name (3-63 lowercase letters, digits, dots and "
                "hyphens, beginning and ending with a letter or digit)")
    parts = key.split("/")
    if any(part in (".", "..") for part in parts):
        return f"{url}: '.' and '..' are not folders on object storage; write the store's whole key"
    if "" in parts:
        return f"{url}: an empty folder name ('//') in the key; write s3://{bucket}/{'/'.join(p for p in parts if p)}"
    return None


def is_url(path: Any) -> bool:
    """True for a store on object storage (a :class:`Remote` or a URL other than ``file://``)."""
    if isinstance(path, Remote):
        return True
    return isinstance(path, str) and bool(_URL.match(path)) and not path.lower().startswith("file://")


def location(path: Any) -> Union[Path, "Remote"]:
    """``path`` as the runner addresses it: a :class:`Remote` for a URL, else a ``Path`` (a
    ``file://`` URL is its local path). A string is parsed here, once: :class:`BadLocation` for one
    :func:`location_problem` refuses."""
    if isinstance(path, Remote):
        return path
    if isinstance(path, str) and (problem := location_problem(path)):
        raise BadLocation(problem)
    if is_url(path):
        return Remote(path)
    if isinstance(path, str) and path.lower().startswith("file://"):
        return Path(local_path(path))
    return Path(path)


def local_path(url: str) -> str:
    """The local path a ``file://`` URL names; ValueError for one naming another host."""
    parsed = urlparse(url)
    if parsed.netloc not in ("", "localhost"):
        raise ValueError(f"{url!r}: a file:// URL names a path on this machine (file:///PATH/NAME.zarr), "
                         f"not on {parsed.netloc!r}")
    return unquote(parsed.path)


def storage_options(protocol: str) -> dict[str, Any]:
    """fsspec options for ``protocol``: no cached listings (another process adds records), the
    endpoint from ``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL``, and short retries so that an
    unreachable endpoint is reported in seconds rather than minutes."""
    if protocol != "s3":
        return {}
    options: dict[str, Any] = {"use_listings_cache": False,
                               "config_kwargs": {"connect_timeout": 5, "read_timeout": 30,
                                                 "retries": {"max_attempts": 2, "mode": "standard"}}}
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        options["endpoint_url"] = endpoint
    return options


def filesystem(protocol: str):
    import fsspec  # lazy: fsspec

    return fsspec.filesystem(protocol, **storage_options(protocol))


class Remote:
    """A path on an fsspec filesystem, with the part of pathlib's API the runner uses.

    Object stores have no folders: ``mkdir`` does nothing, a "folder" exists while an object is
    under it, and there are no symbolic links."""

    def __init__(self, url: str):
        match = _URL.match(url)
        if match is None:
            raise ValueError(f"{url!r} is not a URL")
        self.protocol = match.group(1).lower()
        self.key = re.sub(r"/+", "/", url[match.end():]).rstrip("/")

    @property
    def fs(self):
        return filesystem(self.protocol)

    def __str__(self) -> str:
        return f"{self.protocol}://{self.key}"

    def __repr__(self) -> str:
        return f"Remote({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Remote) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    def __truediv__(self, other: str | PurePosixPath) -> Remote:
        return Remote(f"{self}/{other}")

    # --- pure path parts
    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    @property
    def bucket(self) -> str:
        return self.key.split("/", 1)[0]

    @property
    def parent(self) -> Remote:
        return Remote(f"{self.protocol}://{self.key.rsplit('/', 1)[0]}") if "/" in self.key else self

    @property
    def parents(self) -> list[Remote]:
        out, p = [], self
        while p.parent != p:
            p = p.parent
            out.append(p)
        return out

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.name).suffix

    @property
    def stem(self) -> str:
        return PurePosixPath(self.name).stem

    def with_suffix(self, suffix: str) -> Remote:
        return self.parent / (self.stem + suffix)

    def absolute(self) -> Remote:
        return self

    resolve = absolute

    # --- the filesystem
    def exists(self) -> bool:
        return self.fs.exists(self.key)

    def is_dir(self) -> bool:
        return self.fs.isdir(self.key)

    def is_file(self) -> bool:
        return self.fs.isfile(self.key)

    def is_symlink(self) -> bool:
        return False

    def read_bytes(self) -> bytes:
        return self.fs.cat_file(self.key)

    def read_text(self) -> str:
        return self.read_bytes().decode()

    def write_bytes(self, data: bytes | memoryview) -> None:
        self.fs.pipe_file(self.key, bytes(data))

    def write_text(self, text: str) -> None:
        self.write_bytes(text.encode())

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        """Nothing to make: a prefix exists once an object is under it."""

    def unlink(self, missing_ok: bool = False) -> None:
        try:
            self.fs.rm_file(self.key)
        except FileNotFoundError:
            if not missing_ok:
                raise

    def iterdir(self) -> list[Remote]:
        try:
            found = self.fs.ls(self.key, detail=False)
        except FileNotFoundError:
            return []
        return [Remote(f"{self.protocol}://{p}") for p in found if p.rstrip("/") != self.key]

    def glob(self, pattern: str) -> list[Remote]:
        return [Remote(f"{self.protocol}://{p}") for p in self.fs.glob(f"{self.key}/{pattern}")]

    def read_many(self, paths: list[Remote]) -> dict[Remote, bytes]:
        """The bytes of many objects at once (fetched concurrently); those gone meanwhile are left out,
        any other failure raised (a caller never takes an object it could not read for a missing one)."""
        if not paths:
            return {}
        got = self.fs.cat([p.key for p in paths], on_error="return")
        for value in got.values():
            if isinstance(value, BaseException) and not isinstance(value, FileNotFoundError):
                raise value
        return {Remote(f"{self.protocol}://{k}"): v for k, v in got.items() if isinstance(v, bytes)}


Location = Union[Path, Remote]


def write_atomic(path: Location, data: bytes | memoryview) -> None:
    """Write ``path`` whole or not at all: a temporary file, fsync and a rename on a disk (no partial
    file left behind), one PUT on S3 (atomic there). Writes of the store go through
    :func:`runner.storage.store.atomic_write_bytes`, which adds the write guard and :class:`StoreWriteError`."""
    if isinstance(path, Remote):
        path.write_bytes(data)
        return

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def append_line(path: Location, line: bytes) -> None:
    """Append one line to the log ``path`` (a disk file), or, on object storage, write it as its own
    object ``<stem>.<time in ns>.<suffix>`` beside it (:func:`log_files` finds both)."""
    if isinstance(path, Remote):
        (path.parent / f"{path.stem}.{time.time_ns():020d}{path.suffix}").write_bytes(line)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as f:
        f.write(line)


def remove_tree(path: Location) -> None:
    """Remove a folder and what it holds (nothing when it is not there)."""
    if isinstance(path, Remote):
        try:
            path.fs.rm(path.key, recursive=True)
        except FileNotFoundError:
            pass
        return

    shutil.rmtree(path, ignore_errors=True)


def move_tree(src: Location, dst: Location) -> None:
    """Rename a folder (on object storage: copy every object, then delete the originals; not atomic,
    which :func:`runner.storage.store._finish_carries` tolerates for the one folder move the runner makes)."""
    if isinstance(src, Remote):
        src.fs.mv(src.key, dst.key if isinstance(dst, Remote) else str(dst), recursive=True)
        return
    os.replace(src, dst)


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


def zarr_store(path: Location, read_only: bool = False):
    """What ``zarr.open_group`` and ``xr.open_zarr`` open: the path itself on disk, or an fsspec store."""
    if not isinstance(path, Remote):
        return path
    from zarr.storage import FsspecStore  # lazy: zarr

    return FsspecStore.from_url(str(path), storage_options=storage_options(path.protocol), read_only=read_only)


def reachable_problem(path: Location) -> str | None:
    """Why the store at ``path`` cannot be reached (no such bucket, no credentials, no endpoint
    answering, a protocol the runner does not write), or None. One request, before any compute."""
    if not isinstance(path, Remote):
        return None
    problem = _url_problem(str(path))  # a Remote made without location() (a URL of its parts)
    if problem:
        return problem
    try:
        path.fs.ls(path.bucket, detail=False)
    except FileNotFoundError:
        return f"{path}: the bucket {path.bucket!r} does not exist (create it first){_endpoint()}"
    except PermissionError as err:
        return f"{path}: access to the bucket {path.bucket!r} is denied ({err}){_endpoint()}"
    except Exception as err:  # botocore's NoCredentialsError, EndpointConnectionError, ...: not OSErrors
        return f"{path}: cannot reach the bucket {path.bucket!r}: {_reason(err)}{_endpoint()}"
    return None


def _endpoint() -> str:
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    return f" (endpoint {endpoint}, from AWS_ENDPOINT_URL)" if endpoint else ""


def _reason(err: BaseException) -> str:
    name = type(err).__name__
    if "Credential" in name:
        return ("no credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE")
    if "Connect" in name or "Endpoint" in name or isinstance(err, (ConnectionError, TimeoutError)):
        return f"nothing answers ({err})"
    return f"{name}: {err}"
