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

import json
import os
import tempfile
import uuid
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from filelock import FileLock, Timeout

from runner.layout import Layout

warnings.filterwarnings("ignore", message="Consolidated metadata is currently not part")


class StoreLocked(Exception):
    """Another process is applying a spec to this store."""


def runner_dir(path: Path) -> Path:
    return path.with_suffix(".runner")


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class Store:
    """An experiment store opened for writing by one ``apply``."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.state_dir = runner_dir(self.path)
        self._lock: FileLock | None = None
        self.group: zarr.Group | None = None

    # --- locking
    def lock(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._lock = FileLock(self.state_dir / "apply.lock", timeout=0)
        try:
            self._lock.acquire()
        except Timeout:
            owner = (self.state_dir / "apply.pid").read_text().strip() if (self.state_dir / "apply.pid").exists() else "?"
            raise StoreLocked(
                f"{self.path} is being written by another `runner apply` (pid {owner}); "
                "wait for it to finish or stop it, then apply again"
            ) from None
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
        if (self.path / "zarr.json").exists():
            self.group = zarr.open_group(self.path, mode="r+", use_consolidated=False)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.group = zarr.open_group(self.path, mode="w", zarr_format=3)
            self.group.attrs.update({"runner_store_id": uuid.uuid4().hex, "runner_tasks": "{}"})
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

    @property
    def store_id(self) -> str:
        return self.group.attrs["runner_store_id"]

    def write(self, name: str, region: tuple, values: np.ndarray) -> None:
        self.group[name][region] = values

    def read(self, name: str, region: tuple = (...,)) -> np.ndarray:
        return self.group[name][region]

    # --- completion records
    def tasks(self) -> dict[str, dict]:
        return json.loads(self.group.attrs.get("runner_tasks", "{}"))

    def record(self, task_id: str, record: dict) -> None:
        tasks = self.tasks()
        tasks[task_id] = record
        self.group.attrs["runner_tasks"] = json.dumps(tasks, sort_keys=True)

    def forget(self, task_ids: list[str]) -> None:
        tasks = self.tasks()
        for t in task_ids:
            tasks.pop(t, None)
        self.group.attrs["runner_tasks"] = json.dumps(tasks, sort_keys=True)

    def set_attrs(self, **attrs: Any) -> None:
        self.group.attrs.update(attrs)

    def consolidate(self) -> None:
        """Refresh consolidated metadata so a plain ``xr.open_zarr(path)`` sees current attrs."""
        zarr.consolidate_metadata(self.path)


def read_tasks(path: Path) -> dict[str, dict]:
    """Completion records of a store, read without taking the lock ({} when there is no store)."""
    if not (Path(path) / "zarr.json").exists():
        return {}
    g = zarr.open_group(path, mode="r", use_consolidated=False)
    return json.loads(g.attrs.get("runner_tasks", "{}"))
