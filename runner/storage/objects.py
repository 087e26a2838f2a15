"""A store on object storage (``s3://bucket/path/name.zarr``): :class:`Remote`, the object-store
implementation of :class:`runner.storage.location.Location`, done through fsspec.

Object stores have no folders: ``mkdir`` does nothing, a "folder" exists while an object is under
it, and there are no symbolic links. A whole-or-nothing write is one PUT (atomic there); an appended
line is a new small object per line, since objects cannot be appended to.

Credentials and endpoint come from the standard places, read by botocore: ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY`` (or ``AWS_PROFILE`` and ``~/.aws``), ``AWS_REGION``, and
``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL`` for an S3-compatible server (MinIO, Ceph, moto).
Only ``s3://`` is written (its lock needs S3's conditional writes, :mod:`runner.storage.bucket_lock`);
other protocols are refused with that reason.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path, PurePosixPath
from typing import Any

URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
WRITABLE = ("s3",)
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def url_problem(url: str) -> str | None:
    """Why the URL ``url`` names no store the runner writes (an unknown scheme, a malformed bucket
    or key), or None; nothing is requested."""
    protocol = URL.match(url).group(1).lower()
    if protocol not in WRITABLE:
        return (f"{url}: the runner writes stores on local disks and on s3:// only (the lock needs S3's "
                f"conditional writes); {protocol}:// is not supported")
    rest = url[URL.match(url).end():]
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


def storage_options(protocol: str) -> dict[str, Any]:
    """fsspec options for ``protocol``: no cached listings (another process adds records), one
    request per object read, the endpoint from ``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL``, and
    short retries so that an unreachable endpoint is reported in seconds rather than minutes."""
    if protocol != "s3":
        return {}
    # max_concurrency 1: a whole object is one GET (s3fs asks its size first, one HEAD each, only to
    # split a large read into parallel ranges; the runner's objects are chunks and small JSON)
    options: dict[str, Any] = {"use_listings_cache": False, "max_concurrency": 1,
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
    """A path on an fsspec filesystem: the part of pathlib's API the runner uses, and the operations
    of :class:`runner.storage.location.Location`."""

    keeps_versions = False
    """Replacing, dropping or extending finished results keeps no earlier version in a plain prefix; a
    store's URL (``.../name.zarr``) is a :class:`runner.storage.versioned.Versioned`, which does."""
    note = "(object storage)"
    described = "a store on object storage"

    def __init__(self, url: str):
        match = URL.match(url)
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

    def _at(self, key: str) -> Remote:
        return Remote(f"{self.protocol}://{key}")

    # --- pure path parts
    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    @property
    def bucket(self) -> str:
        return self.key.split("/", 1)[0]

    @property
    def parent(self) -> Remote:
        return self._at(self.key.rsplit("/", 1)[0]) if "/" in self.key else self

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

    def with_name(self, name: str) -> Remote:
        return self.parent / name

    def absolute(self) -> Remote:
        return self

    def fresh(self) -> Remote:
        """This path as it is now (a plain path holds no version to resolve again)."""
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

    def read_range(self, start: int, end: int) -> bytes:
        """Bytes ``start`` to ``end`` of this object (one ranged GET)."""
        return self.fs.cat_file(self.key, start=start, end=end)

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
        return [self._at(p) for p in found if p.rstrip("/") != self.key]

    def glob(self, pattern: str) -> list[Remote]:
        return sorted((self._at(p) for p in self.fs.glob(f"{self.key}/{pattern}")), key=str)

    def entries(self) -> list[tuple[Remote, bool]]:
        """(entry, is a folder) of every entry directly under this prefix, by name; one listing."""
        try:
            listed = self.fs.ls(self.key, detail=True)
        except OSError:
            return []
        return sorted(((self / e["name"].rstrip("/").rsplit("/", 1)[-1], e["type"] == "directory") for e in listed),
                      key=lambda e: e[0].name)

    def files(self) -> dict[str, int]:
        """Every object under this prefix, at any depth: its key relative to it -> its size; one listing."""
        try:
            found = self.fs.find(self.key, detail=True)
        except FileNotFoundError:
            return {}
        return {k[len(self.key) + 1:]: int(v.get("size") or 0) for k, v in found.items() if k != self.key}

    def read_many(self, paths: list[Remote]) -> dict[Remote, bytes]:
        """The bytes of many objects at once (fetched concurrently); those gone meanwhile are left out,
        any other failure raised (a caller never takes an object it could not read for a missing one)."""
        if not paths:
            return {}
        got = self.fs.cat([p.key for p in paths], on_error="return")
        for value in got.values():
            if isinstance(value, BaseException) and not isinstance(value, FileNotFoundError):
                raise value
        return {self._at(k): v for k, v in got.items() if isinstance(v, bytes)}

    def write_many(self, files: dict[str, bytes]) -> None:
        """Write many objects under this prefix (relative key -> bytes), 1,000 at a time, concurrently."""
        names = list(files)
        for k in range(0, len(names), 1000):
            self.fs.pipe({f"{self.key}/{name}": files[name] for name in names[k:k + 1000]})

    def digests(self, keys: list[str]) -> dict[str, str | None]:
        """Key -> ``etag:<ETag>`` of the object ``key`` under this prefix, from one listing: a digest
        without a GET per chunk (an object written again gets another ETag); None where there is none."""
        try:
            found = self.fs.find(self.key, detail=True)
        except FileNotFoundError:
            found = {}
        tags = {k[len(self.key) + 1:]: str(v.get("ETag") or v.get("etag") or "").strip('"') for k, v in found.items()}
        return {k: f"etag:{tags[k]}" if tags.get(k) else None for k in keys}

    # --- the operations of a Location
    def write_atomic(self, data: bytes | memoryview) -> None:
        self.write_bytes(data)  # one PUT: whole or not at all

    def append_line(self, line: bytes) -> None:
        """Objects cannot be appended to: the line is its own object ``<stem>.<time in ns>.<suffix>``
        beside this one (:func:`runner.storage.events.log_files` finds both)."""
        (self.parent / f"{self.stem}.{time.time_ns():020d}{self.suffix}").write_bytes(line)

    def mark_folder(self) -> None:
        """An object stands for a folder (``.keep``), which a prefix alone cannot."""
        if not (self / ".keep").exists():
            (self / ".keep").write_bytes(b"")

    def folder_marked(self) -> bool:
        return (self / ".keep").exists()

    def remove_tree(self) -> None:
        try:
            self.fs.rm(self.key, recursive=True)
        except FileNotFoundError:
            pass

    def move_tree(self, dst: Remote) -> None:
        """Copy every object, then delete the originals: not atomic, which
        :func:`runner.storage.store._finish_carries` tolerates for the one folder move the runner makes."""
        fs, keys = self.fs, list(self.files())
        for key in keys:
            fs.copy(f"{self.key}/{key}", f"{dst.key}/{key}")
        fs.rm([f"{self.key}/{key}" for key in keys])

    def zarr_store(self, read_only: bool = False):
        from zarr.storage import FsspecStore  # lazy: zarr

        return FsspecStore.from_url(str(self), storage_options=storage_options(self.protocol), read_only=read_only)

    def open_lines(self) -> str:
        """Python lines that open the store here as a dataset ``ds``."""
        return ("import xarray as xr\nfrom runner.storage.location import zarr_store\n"
                f"ds = xr.open_zarr(zarr_store({str(self)!r}, read_only=True))")

    def reader_store(self, what: str = "store"):
        """What a reader opens: the store as it is (no folders to exchange, so no version to pin)."""
        return self.zarr_store(read_only=True)

    def reachable_problem(self) -> str | None:
        problem = url_problem(str(self))  # a Remote made without location() (a URL of its parts)
        if problem:
            return problem
        try:
            self.fs.ls(self.bucket, detail=False)
        except FileNotFoundError:
            return f"{self}: the bucket {self.bucket!r} does not exist (create it first){_endpoint()}"
        except PermissionError as err:
            return f"{self}: access to the bucket {self.bucket!r} is denied ({err}){_endpoint()}"
        except Exception as err:  # botocore's NoCredentialsError, EndpointConnectionError, ...: not OSErrors
            return f"{self}: cannot reach the bucket {self.bucket!r}: {_reason(err)}{_endpoint()}"
        return None

    def local_folder(self) -> Path:
        """Where files that need a disk go (a SQLite database, figures): the working directory."""
        return Path(".")

    def free_bytes(self) -> tuple[float, str]:
        """A bucket has no "free": infinite."""
        return float("inf"), str(self)

    def relative_name(self, path: Any) -> str:
        """``path`` (a URL beside this store) relative to this store's parent, as stored."""
        return str(path).removeprefix(str(self.parent) + "/")


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
