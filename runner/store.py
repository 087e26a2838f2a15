"""The zarr v3 store of an experiment and the run state kept beside it.

``store/<name>.zarr`` is a plain zarr v3 group that ``xr.open_zarr`` reads with no runner
installed. Beside it, ``store/<name>.runner/`` holds what only the runner needs: the lock that
refuses a second ``apply``, the event log, and resume checkpoints.

Rules (see docs/architecture.md): arrays are created up front from the :class:`Layout` and filled
by region writes aligned to chunks; a chunk has exactly one writing task; a finished task is
recorded explicitly in the root attribute ``runner_tasks`` (JSON text), never inferred from the
data; an array whose layout changed is recreated and the tasks that wrote it are forgotten.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from filelock import FileLock, Timeout

from runner.layout import STORE_FORMAT, Layout

if TYPE_CHECKING:  # pragma: no cover
    import zarr

warnings.filterwarnings("ignore", message="Consolidated metadata is currently not part")


class StoreLocked(Exception):
    """Another process is applying a spec to this store."""


class StorePathError(Exception):
    """The store path names something the runner must not write to; the message says what."""


class StoreFormatError(Exception):
    """A store written by an older runner, in a layout this one does not write to."""


class StoreWriteError(Exception):
    """The store (or the runner's folder beside it) cannot be written: disk full, read-only, ...
    Work recorded before the error is kept; applying again after fixing the cause resumes."""

    def __init__(self, path: Path, err: OSError):
        self.errno = err.errno
        reason = err.strerror or str(err)
        super().__init__(f"cannot write {path}: {reason}; finished work is kept: "
                         + ("free some space" if err.errno in (errno.ENOSPC, errno.EDQUOT) else "fix this")
                         + " and run apply again to resume")


@contextmanager
def writing(path: Path) -> Iterator[None]:
    """Turn an OS error while writing ``path`` into :class:`StoreWriteError`."""
    try:
        yield
    except OSError as err:
        raise StoreWriteError(path, err) from None


def runner_dir(path: Path) -> Path:
    """The runner's folder beside a store (event log, lock, checkpoints): ``x.zarr`` -> ``x.runner``;
    for a point of a sweep (a store inside a ``.zarr`` group), ``x.runner/<point>``, outside the
    zarr hierarchy."""
    if path.parent.suffix == ".zarr":
        return runner_dir(path.parent) / path.name
    return path.with_suffix(".runner")


def root_attrs(path: Path) -> dict | None:
    try:
        meta = json.loads((Path(path) / "zarr.json").read_text())
    except (OSError, ValueError):
        return None
    return meta.get("attributes") or {} if isinstance(meta, dict) else None


def is_runner_store(path: Path) -> bool:
    """True for a zarr group this runner created (its root attributes carry ``runner_store_id``)."""
    attrs = root_attrs(path)
    return attrs is not None and "runner_store_id" in attrs


def format_problem(path: Path) -> str | None:
    """Why a store of this runner cannot be written by this version (an older ``store_format``)."""
    attrs = root_attrs(path) or {}
    found = int(attrs.get("store_format", 1))
    if found == STORE_FORMAT:
        return None
    return (f"{path} was written by {'an older' if found < STORE_FORMAT else 'a newer'} runner (store format {found}; "
            f"this one writes format {STORE_FORMAT}, see docs/architecture.md). Its results stay readable with "
            f"xarray. To run the spec, move the store away (mv {path} {path}.v{found}) or set [experiment] store to "
            "a new path")


def store_path_problem(path: Path, sweep: bool = False) -> str | None:
    """Why ``path`` cannot be this experiment's store (``sweep``: of a spec with a sweep), or None.

    The runner writes only where it owns the place: a new path, an empty folder, or a store it
    created. An existing file, a folder holding anything else, or another program's zarr store is
    refused (the runner never deletes what it did not create), and so is a place it cannot write.
    """
    name = path.name
    if str(path).strip() == "" or name in ("", ".", ".."):
        return f"{str(path)!r} names no folder of its own; give a path such as 'store/NAME.zarr'"
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            return f"{path} exists and is not a store (it is a file); choose another path"
        if (path / "zarr.json").exists():
            if not is_runner_store(path):
                return f"{path} is a zarr store this runner did not create; choose another path"
            if ("runner_sweep" in (root_attrs(path) or {})) != sweep:
                held, spec = ("a sweep", "has no [sweep]") if not sweep else ("a run without a sweep", "has a [sweep]")
                return f"{path} holds {held} and this spec {spec}; set [experiment] store to another path"
            return format_problem(path)  # ours: a write that fails later (read-only, full) is a store error
        else:
            entries = sorted(p.name for p in path.iterdir())
            if entries:
                shown = ", ".join(entries[:4]) + (", ..." if len(entries) > 4 else "")
                return (f"{path} exists and is not a store of this project (it holds {len(entries)} "
                        f"entr{'y' if len(entries) == 1 else 'ies'}: {shown}); nothing there is touched. "
                        "Choose a new path or an empty folder")
    state = runner_dir(path)
    if state.exists() and not state.is_dir():
        return f"{state} (the runner's folder beside the store) exists and is not a folder; choose another path"
    return _unwritable(path)


def _unwritable(path: Path) -> str | None:
    """Probe the nearest existing folder with a temporary directory (created and removed)."""
    folder = path if path.is_dir() else next((p for p in path.absolute().parents if p.exists()), None)
    if folder is None or not folder.is_dir():
        return f"{path}: no existing folder to create it in"
    try:
        os.rmdir(tempfile.mkdtemp(dir=folder, prefix=".runner-probe-"))
    except OSError as err:
        return f"{path} cannot be created: {folder} is not writable ({err.strerror or err})"
    return None


def atomic_write_bytes(path: Path, data: bytes | memoryview) -> None:
    """Write ``path`` whole or not at all (temporary file, fsync, rename); :class:`StoreWriteError`
    on a full or read-only disk, with no partial file left behind."""
    with writing(path.parent):
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


class Store:
    """An experiment store opened for writing by one ``apply``."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.state_dir = runner_dir(self.path)
        self._lock: FileLock | None = None
        self.group: zarr.Group | None = None

    # --- locking
    def lock(self) -> None:
        with writing(self.state_dir):
            self.state_dir.mkdir(parents=True, exist_ok=True)
        self._lock = FileLock(self.state_dir / "apply.lock", timeout=0)
        try:
            self._lock.acquire()
        except Timeout:  # before OSError: filelock's Timeout is a TimeoutError
            owner = (self.state_dir / "apply.pid").read_text().strip() if (self.state_dir / "apply.pid").exists() else "?"
            raise StoreLocked(
                f"{self.path} is being written by another `runner apply` (pid {owner}); "
                "wait for it to finish or stop it, then apply again"
            ) from None
        except OSError as err:
            raise StoreWriteError(self.state_dir, err) from None
        with writing(self.state_dir):
            (self.state_dir / "apply.pid").write_text(str(os.getpid()))

    def unlock(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    # --- layout
    def open(self, layout: Layout, root_attrs: dict[str, Any]) -> list[str]:
        """Create or update arrays to match ``layout``; return the variables (re)created.

        The completion records of the tasks that wrote a recreated variable are dropped, so those
        tasks run again (all tasks, for a variable every task writes: measure ``"*"``)."""
        with writing(self.path):
            return self._open(layout, root_attrs)

    def _open(self, layout: Layout, root_attrs: dict[str, Any]) -> list[str]:
        if (self.path / "zarr.json").exists():
            if not is_runner_store(self.path):
                raise StorePathError(f"{self.path} is a zarr store this runner did not create")
            if format_problem(self.path):
                raise StoreFormatError(format_problem(self.path))
            import zarr  # imported here: reading records (a no-op apply) needs no zarr

            self.group = zarr.open_group(self.path, mode="r+", use_consolidated=False)
        else:
            if self.path.exists() and (not self.path.is_dir() or any(self.path.iterdir())):
                raise StorePathError(store_path_problem(self.path) or f"{self.path} is not a store")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            import zarr

            self.group = zarr.open_group(self.path, mode="w", zarr_format=3)
            self.group.attrs.update({"runner_store_id": uuid.uuid4().hex, "runner_tasks": "{}",
                                     "store_format": STORE_FORMAT})
        g = self.group
        existing = set(g.array_keys())
        for c in layout.coords.values():
            values = c.values
            if c.name in existing:
                old = g[c.name]
                if old.shape == values.shape and np.array_equal(old[...], values):
                    continue
                del g[c.name]
            dtype = str if values.dtype == object else values.dtype
            arr = g.create_array(c.name, shape=values.shape, dtype=dtype, chunks=values.shape or None,
                                 dimension_names=list(c.dims), attributes=c.attrs,
                                 fill_value="" if dtype is str else None)
            arr[...] = values
        recreated = []
        coords = layout.coords
        for v in layout.vars.values():
            sig = v.signature(coords)
            if v.name in existing and g[v.name].attrs.get("runner_layout") == sig:
                if any(g[v.name].attrs.get(k) != val for k, val in v.attrs.items()):
                    g[v.name].attrs.update(v.attrs)  # e.g. a new threshold; the data is rewritten by its task
                continue
            if v.name in existing:
                del g[v.name]
            g.create_array(v.name, shape=v.shape, chunks=v.chunks, dtype=v.dtype, fill_value=v.fill,
                           dimension_names=list(v.dims), attributes={**v.attrs, "runner_layout": sig})
            recreated.append(v.name)
        non_index = [c.name for c in coords.values() if c.dims != (c.name,)]
        g.attrs.update({**root_attrs, "coordinates": " ".join(non_index)})
        stale = {layout.vars[v].measure for v in recreated}
        self.forget([tid for tid, rec in self.tasks().items() if "*" in stale or rec.get("measure") in stale])
        self.consolidate()  # a plain xr.open_zarr during the run sees every array (their data is live)
        return recreated

    def attach(self) -> Store:
        """Open a store that another process has locked and laid out, to write a task's own regions
        (a worker of a distributed executor: no lock, no layout changes, no completion records)."""
        import zarr

        with writing(self.path):
            self.group = zarr.open_group(self.path, mode="r+", use_consolidated=False)
        return self

    @property
    def store_id(self) -> str:
        return self.group.attrs["runner_store_id"]

    def write(self, name: str, region: tuple, values: np.ndarray) -> None:
        with writing(self.path):
            self.group[name][region] = values

    def read(self, name: str, region: tuple = (...,)) -> np.ndarray:
        return self.group[name][region]

    # --- completion records
    def tasks(self) -> dict[str, dict]:
        return json.loads(self.group.attrs.get("runner_tasks", "{}"))

    def record(self, task_id: str, record: dict) -> None:
        self.record_many({task_id: record})

    def record_many(self, records: dict[str, dict]) -> None:
        """Record finished tasks in one rewrite of the records (its cost grows with their number)."""
        tasks = self.tasks()
        tasks.update(records)
        self.set_attrs(runner_tasks=json.dumps(tasks, sort_keys=True))

    def forget(self, task_ids: list[str]) -> None:
        tasks = self.tasks()
        for t in task_ids:
            tasks.pop(t, None)
        self.set_attrs(runner_tasks=json.dumps(tasks, sort_keys=True))

    def set_attrs(self, **attrs: Any) -> None:
        with writing(self.path):
            self.group.attrs.update(attrs)

    def consolidate(self) -> None:
        """Refresh consolidated metadata so a plain ``xr.open_zarr(path)`` sees current attrs."""
        with writing(self.path):
            import zarr

            zarr.consolidate_metadata(self.path)


def read_tasks(path: Path) -> dict[str, dict]:
    """Completion records of a store, read without the lock or zarr ({} when there is no store)."""
    attrs = root_attrs(Path(path))
    return json.loads(attrs.get("runner_tasks", "{}")) if attrs else {}
