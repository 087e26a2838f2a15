"""The zarr v3 store of an experiment and the run state kept beside it.

``store/<name>.zarr`` is a plain zarr v3 group that ``xr.open_zarr`` reads with no runner
installed. Beside it, ``store/<name>.runner/`` holds what only the runner needs: the lock that
refuses a second ``apply``, the event log, resume checkpoints and the completion records.

Rules (see docs/architecture.md): arrays are created up front from the :class:`Layout` and filled
by region writes aligned to chunks; a chunk has exactly one writing task; a finished task is
recorded explicitly (:mod:`runner.storage.records`), never inferred from the data; an array whose layout
changed is remade, keeping the values of the networks it can (:func:`plan_reshape`), and the tasks
whose values it could not keep are forgotten.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from filelock import FileLock, Timeout

from runner.core import interrupt
from runner.core.formats import STORE_FORMAT
from runner.core.layout import INTERNAL, Layout, internal, with_internal
from runner.storage.bucket_lock import Lease
from runner.storage.location import Location, location, move_tree, reachable_problem, write_atomic, zarr_store
from runner.storage.objects import Remote
from runner.storage.versioned import KeyMapStore
from runner.storage.manifest import (MANIFEST, NEXT, ROOT, ManifestCorrupt, array_nodes, build, chunk_keys, chunk_digests,
                                     normalized, read_any_manifest, read_manifest, unlist, write_manifest)
from runner.storage.readers import switching
from runner.storage.records import (drop_records, fold_records, journal_file, make_records_dir, note_written, read_records,
                            records_exist, unreadable_records, write_records)
from runner.storage.store_errors import (StoreFormatError, StoreLocked, StorePathError,
                                         StoreUnreachable, StoreWriteError, guard_writes, writing)

if TYPE_CHECKING:  # pragma: no cover
    import zarr

warnings.filterwarnings("ignore", message="Consolidated metadata is currently not part")


def check_reachable(path: Location) -> None:
    """Raise :class:`StoreUnreachable` for a store URL whose bucket cannot be reached (nothing for a disk)."""
    problem = reachable_problem(location(path))
    if problem:
        raise StoreUnreachable(problem)


def chunk_codecs() -> dict[str, Any]:
    """The bytes-to-bytes codecs of every array the runner creates: zarr's default compression
    (zstd) followed by a CRC-32C checksum of each compressed chunk (zarr v3 ``crc32c``), so that a
    chunk whose bytes changed on disk fails to read instead of decoding to wrong values
    (:mod:`runner.storage.verify`). Stores made before this (format 3 without checksums) read as before."""
    from zarr.codecs import Crc32cCodec, ZstdCodec  # lazy: zarr

    return {"compressors": (ZstdCodec(level=0, checksum=False), Crc32cCodec())}


def _write_every_chunk() -> None:
    """Store chunks that hold only the fill value too: a chunk a finished task wrote always exists,
    so a missing chunk file is damage, never "all NaN" (zarr skips such chunks by default)."""
    import zarr  # lazy: zarr

    zarr.config.set({"array.write_empty_chunks": True})


def runner_dir(path: Location) -> Location:
    """The runner's folder beside a store (event log, lock, checkpoints): ``x.zarr`` -> ``x.runner``;
    for a point of a sweep (a store inside a ``.zarr`` group), ``x.runner/<point>``, outside the
    zarr hierarchy."""
    path = location(path)
    if path.parent.suffix == ".zarr":
        return runner_dir(path.parent) / path.name
    return path.with_suffix(".runner")


def now() -> str:
    """The time now, as ACDD's dates and the ``history`` lines give it (ISO 8601, UTC, seconds)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def root_attrs(path: Path) -> dict | None:
    """The root's attributes; where its ``zarr.json`` is there but corrupt, those the store's manifest
    binds (:func:`manifest_root`: ``verify`` names the root damaged and ``apply`` writes it back)."""
    try:
        meta = json.loads((location(path) / "zarr.json").read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        meta = None
    if not isinstance(meta, dict):
        kept = manifest_root(path)
        return None if kept is None else kept["attributes"]
    return meta.get("attributes") or {}


def root_reads(path: Location) -> bool:
    """Whether the store's root ``zarr.json`` is there and reads as metadata (a damaged store's may not)."""
    try:
        return isinstance(json.loads((location(path) / "zarr.json").read_bytes()), dict)
    except (OSError, ValueError):
        return False


def manifest_root(path: Path) -> dict | None:
    """The root ``zarr.json`` of the store at ``path`` as its manifest binds it (a group with its
    attributes), when a manifest whose digest holds is there and names the store its root attributes
    name; else None. What a corrupt root is repaired from."""
    found = read_any_manifest(runner_dir(location(path))) or {}
    attrs = (found.get("metadata") or {}).get(ROOT, {}).get("attributes")
    if not isinstance(attrs, dict) or internal(attrs).get("store_id") != found.get("store_id"):
        return None
    return {"zarr_format": 3, "node_type": "group", "attributes": attrs}


def node_type(path) -> str | None:
    """The zarr node at ``path`` (``"group"``, ``"array"``), or None where no ``zarr.json`` can be read."""
    try:
        meta = json.loads((location(path) / "zarr.json").read_text())
    except (OSError, ValueError):
        return None
    return meta.get("node_type") if isinstance(meta, dict) else None


def store_id(path: Path) -> str | None:
    """The id of a store this runner created (None for anything else, or no store)."""
    attrs = root_attrs(path)
    if attrs is None:
        return None
    return internal(attrs).get("store_id") or attrs.get("runner_store_id")  # the second: store formats 1-2


def is_runner_store(path: Path) -> bool:
    """True for a zarr group this runner created (its root's runner attribute carries a store id)."""
    return store_id(path) is not None


def format_problem(path: Path) -> str | None:
    """Why a store of this runner cannot be written by this version (an older ``store_format``)."""
    attrs = root_attrs(path) or {}
    try:
        found = int(attrs.get("store_format", 1))
    except (TypeError, ValueError):
        found = 0
    if found == STORE_FORMAT:
        return None
    return (f"{path} was written by {'an older' if found < STORE_FORMAT else 'a newer'} runner (store format {found}; "
            f"this one writes format {STORE_FORMAT}, see docs/architecture.md). Its results stay readable with "
            f"xarray. To run the spec, move the store away (mv {path} {path}.v{found}) or set [experiment] store to "
            "a new path")


def is_sweep_root(path: Path) -> bool:
    attrs = root_attrs(path) or {}
    return "sweep" in internal(attrs) or "runner_sweep" in attrs


def foreign_or_corrupt(path: Location) -> bool:
    """A zarr store at ``path`` that is not this runner's, or whose root metadata cannot be read."""
    return isinstance(path, Path) and (path / "zarr.json").is_file() and not is_runner_store(path)


def kept_folder(path: Location, itself: bool = False) -> Path | None:
    """The ``<name>.history`` or ``<name>.runner`` folder of a store ``<name>.zarr`` that ``path``
    lies in (``itself``: or is), or None (local paths; a bucket has no such nesting to guard)."""
    if not isinstance(path, Path):
        return None
    here = Path(os.path.abspath(path))
    for folder in ((here,) if itself else ()) + tuple(here.parents):
        if folder.suffix in (".history", ".runner") and folder.with_suffix(".zarr").is_dir():
            return folder
    return None


def store_path_problem(path: Path, sweep: bool = False, point: bool = False) -> str | None:
    """Why ``path`` cannot be this experiment's store (``sweep``: of a spec with a sweep; ``point``:
    a point of a sweep, whose store is a folder of the sweep's store), or None.

    The runner writes only where it owns the place: a new path, an empty folder, or a store it
    created. An existing file, a folder holding anything else, or another program's zarr store is
    refused (the runner never deletes what it did not create), and so is a place it cannot write,
    a store inside another zarr store (but a sweep's points), and a symbolic link as the store or
    the runner's folder beside it (the runner never writes through a link it did not create). A
    bucket is assumed reachable: :func:`check_reachable` says so first.
    """
    path = location(path)
    problem = _placement_problem(path, sweep, point)
    if problem is None and path.is_dir() and (path / "zarr.json").exists():
        return _store_problem(path, sweep)  # ours: a write that fails later (read-only, full) is a store error
    return problem or _existing_problem(path) or _unwritable(path)


def _placement_problem(path: Location, sweep: bool, point: bool) -> str | None:
    """Why ``path`` is no place for a store: no name, a sweep on object storage, inside another store or
    a store's kept folders, or a symbolic link as the store, its runner folder or in it."""
    name = path.name
    if str(path).strip() == "" or name in ("", ".", ".."):
        return f"{str(path)!r} names no folder of its own; give a path such as 'store/NAME.zarr'"
    if isinstance(path, Remote) and (sweep or point):
        return (f"{path}: a spec with a [sweep] writes its store on a local disk only (its points are folders of "
                "the sweep's store); give a local path, or one spec per point")
    outer = enclosing_store(path)
    if outer is not None and not (point and outer == location(os.path.abspath(path.parent) if isinstance(path, Path)
                                                             else path.parent)):
        return (f"{path} is inside the zarr store {outer}; a store is never made inside another one: "
                "choose a path outside it")
    keeper = kept_folder(path)
    if keeper is not None:
        return (f"{path} is inside {keeper}, where the runner keeps another store's "
                f"{'earlier versions' if keeper.suffix == '.history' else 'run state'}: a kept version is never "
                "written in place and no store is made there; choose a path outside it")
    for link in (path, runner_dir(path)):
        if link.is_symlink():
            return (f"{link} is a symbolic link (to {os.readlink(link)}); the runner never writes through a link it "
                    "did not create: give the folder it points to, or a new path")
    state = runner_dir(path)
    if state.is_dir():
        links = sorted(p.name for p in state.iterdir() if p.is_symlink())
        if links:
            return (f"{state} holds symbolic links ({', '.join(links)}); the runner never writes through a link it "
                    "did not create: remove them or choose another path")
    return None


def _store_problem(path: Location, sweep: bool) -> str | None:
    """Why the zarr store at ``path`` is not one this spec may write: corrupt, another program's, or
    of the other kind (a sweep or not); or its format's problem."""
    if root_attrs(path) is None:
        return (f"{path}: its metadata {path / 'zarr.json'} is corrupt (not JSON), so whose store it is "
                "cannot be told; move it away or choose another path")
    if not is_runner_store(path):
        return f"{path} is a zarr store this runner did not create; choose another path"
    if is_sweep_root(path) != sweep:
        held, spec = ("a sweep", "has no [sweep]") if not sweep else ("a run without a sweep", "has a [sweep]")
        return f"{path} holds {held} and this spec {spec}; set [experiment] store to another path"
    return format_problem(path)


def _existing_problem(path: Location) -> str | None:
    """Why what is at ``path`` now (not a zarr store) is no place for one: a file, a folder holding
    anything, or a runner folder that is a file."""
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            return f"{path} exists and is not a store (it is a file); choose another path"
        entries = sorted(p.name for p in path.iterdir())
        if entries:
            shown = ", ".join(entries[:4]) + (", ..." if len(entries) > 4 else "")
            return (f"{path} exists and is not a store of this project (it holds {len(entries)} "
                    f"entr{'y' if len(entries) == 1 else 'ies'}: {shown}); nothing there is touched. "
                    "Choose a new path or an empty folder")
    state = runner_dir(path)
    if state.exists() and not state.is_dir():
        return f"{state} (the runner's folder beside the store) exists and is not a folder; choose another path"
    return None


def output_problem(path: str | Path) -> str | None:
    """Why a command's own output (``figures --out``, a netCDF export) may not go to ``path``: a zarr
    store, a place inside one, or a store's ``.runner`` or ``.history`` folder or a place inside it; a
    store is written by ``apply`` alone. None when it may."""
    here = Path(os.path.abspath(path))
    if (here / "zarr.json").is_file():
        return f"{path} is a zarr store; outputs are written beside stores, never into one: choose another path"
    outer = enclosing_store(here)
    if outer is not None:
        return f"{path} is inside the zarr store {outer}; outputs are never written into a store: choose a path outside it"
    folder = kept_folder(here, itself=True)
    if folder is not None:
        what = "earlier versions" if folder.suffix == ".history" else "run state"
        where = "is" if folder == here else "is inside"
        return (f"{path} {where} {folder}, where the runner keeps {folder.with_suffix('.zarr').name}'s {what}; "
                "choose a path outside it")
    return None


def enclosing_store(path: Location) -> Location | None:
    """The nearest folder above ``path`` that is a zarr store (has a ``zarr.json``), or None."""
    path = location(path)
    for parent in (path.parents if isinstance(path, Remote) else Path(os.path.abspath(path)).parents):
        if (parent / "zarr.json").is_file():
            return parent
    return None


def _unwritable(path: Path) -> str | None:
    """Probe the nearest existing folder with a temporary directory (created and removed); a bucket
    was probed by :func:`runner.storage.location.reachable_problem`."""
    if isinstance(path, Remote):
        return None
    folder = path if path.is_dir() else next((p for p in path.absolute().parents if p.exists()), None)
    if folder is None or not folder.is_dir():
        return f"{path}: no existing folder to create it in"
    try:
        os.rmdir(tempfile.mkdtemp(dir=folder, prefix=".runner-probe-"))
    except OSError as err:
        return f"{path} cannot be created: {folder} is not writable ({err.strerror or err})"
    return None


def atomic_write_bytes(path: Location, data: bytes | memoryview) -> None:
    """Write ``path`` whole or not at all (temporary file, fsync, rename; on object storage one PUT,
    atomic there); :class:`StoreWriteError` on a full or read-only disk, with no partial file left behind."""
    with writing(path.parent):
        write_atomic(path, data)


class Store:
    """An experiment store opened for writing by one ``apply``."""

    def __init__(self, path: str | Location):
        self.path = location(path)
        self.state_dir = runner_dir(self.path)
        self._lock: FileLock | None = None
        self._lease = None  # on object storage: runner.storage.bucket_lock.Lease
        self._written: dict[str, dict] = {}  # on object storage: the records this apply wrote, for the fold
        self.group: zarr.Group | None = None
        self._journal: Path | None = None
        self._own: set[str] | None = None
        """The arrays this apply writes itself (coordinates, inputs), whose chunks the manifest binds;
        None until :meth:`open` (and in a worker, which writes no manifest)."""
        self._stage: Path | None = None
        """Inside :meth:`transaction`: the next version of the store, built beside it."""
        self.layout_id: str | None = None
        """Inside :meth:`transaction`: the id of the version being built (see :meth:`transaction`)."""
        self._held = False
        """Whether the next version is held for the run's values (``transaction(hold=True)``)."""

    @property
    def root(self) -> Location:
        """Where the store's files are written now: the next version inside :meth:`transaction`, else the store."""
        return self._stage if self._stage is not None else self.path

    # --- locking
    def lock(self) -> None:
        if isinstance(self.state_dir, Remote):
            self._lease = Lease(self.state_dir)
            with writing(self.state_dir):
                self._lease.acquire()
            guard_writes(self._lease.check)  # no write of this process once the lease is lost
            return
        with writing(self.state_dir):
            self.state_dir.mkdir(parents=True, exist_ok=True)
        self._lock = FileLock(self.state_dir / "apply.lock", timeout=0)
        try:
            self._lock.acquire()
        except Timeout:  # before OSError: filelock's Timeout is a TimeoutError
            raise self._locked() from None
        except OSError as err:
            raise StoreWriteError(self.state_dir, err) from None
        with writing(self.state_dir):
            (self.state_dir / "apply.pid").write_text(str(os.getpid()))

    def check_unlocked(self) -> None:
        """:class:`StoreLocked` when another apply holds the lock now, without taking it: asked before
        anything else is said of a run (a store being written is locked, whatever consent it needs)."""
        if isinstance(self.state_dir, Remote) or not (self.state_dir / "apply.lock").exists():
            return
        probe = FileLock(self.state_dir / "apply.lock", timeout=0)
        try:
            probe.acquire()
        except Timeout:
            raise self._locked() from None
        except OSError:
            return  # said by lock() itself
        probe.release()

    def _locked(self) -> StoreLocked:
        pid = self.state_dir / "apply.pid"
        owner = pid.read_text().strip() if pid.exists() else "?"
        return StoreLocked(f"{self.path} is being written by another `runner apply` (pid {owner}); "
                           "wait for it to finish or stop it, then apply again")

    def unlock(self) -> None:
        if self._lease is not None:
            guard_writes(None)
            self._lease.release()
            self._lease = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    # --- layout
    def reshape(self, layout: Layout) -> Reshape:
        """What :meth:`open` would do to the arrays of this store for ``layout`` (nothing is written)."""
        held = held_stage(self.path)
        working = self.path.stage_at(self.state_dir / STAGE, held) if held else self.path
        if not (working / "zarr.json").exists():
            return Reshape()
        import zarr  # lazy: zarr

        return plan_reshape(zarr.open_group(zarr_store(working, read_only=True), mode="r", use_consolidated=False),
                            layout)

    def open(self, layout: Layout, root_attrs: dict[str, Any], reshape: Reshape | None = None) -> list[str]:
        """Create or update arrays to match ``layout``; return the variables (re)created.

        A remade array keeps the values of the networks ``reshape`` carries over (a network added
        or taken out, a new chunking); the completion records of the results it could not keep are
        dropped, so those tasks run again. ``apply`` asks the user before that drops a finished
        result that the spec no longer plans (:mod:`runner.run.changes`)."""
        with writing(self.path):
            return self._open(layout, root_attrs, reshape)

    @contextmanager
    def transaction(self, hold: bool = False) -> Iterator[None]:
        """Make every change of the block to an existing store's layout, metadata and own arrays in
        a copy beside it (``<store>.runner/next.zarr``, hard links to the store's files: zarr writes
        each file anew, so the store's own stay as they were), then switch the copy in with one
        exchange of the two folders, under the readers' lock (:mod:`runner.storage.readers`). The
        manifest of the new version is written first as ``manifest.next.json``, named by the version's
        ``layout_id`` (in the root's runner attribute), and renamed into place after the switch; a
        reader takes the manifest whose ``layout_id`` is the store's. So a reader, or a kill at any
        point, sees the store as it was or as it is now, never half of it. A store that does not
        exist yet, or on object storage, is written in place.

        ``hold``: the copy stays the store's working version after the block, so that the tasks'
        values go there too, until :meth:`switch_held` (the run's end); a kill leaves it, with its
        records (bound to it: :func:`live_records`), for the next apply to continue. A copy held
        by an apply that was stopped is taken up again here, whatever ``hold`` says."""
        if self._stage is not None or not (self.path / "zarr.json").exists():
            yield
            return
        with writing(self.state_dir):
            self.finish_switch()
            held = held_stage(self.path)
            layout_id = held or uuid.uuid4().hex
            stage = self.path.stage_at(self.state_dir / STAGE, layout_id)
            if held is None:
                self.path.begin_stage(stage)
        self._stage, self.layout_id = stage, layout_id
        self._held = held is not None or hold
        if self._held and held is None:
            self._mark_held()
        try:
            yield
        except BaseException:
            if not self._held:
                self._end_stage(stage)
            raise
        if self._held and held is None:  # laid out: from now on the next apply continues it
            with writing(self.state_dir):
                write_atomic(self.state_dir / HELD, json.dumps({"layout_id": self.layout_id, "ready": True}).encode())
        if not self._held:
            with writing(self.state_dir):
                self._commit(stage)
            self._end_stage(stage)

    def _mark_held(self) -> None:
        """Name the held copy in its root and beside the store (``next.json``), so that the next apply
        knows it, and whether the switch already happened, by its ``layout_id``."""
        meta_path = self._stage / "zarr.json"
        meta = json.loads(meta_path.read_bytes())
        meta["attributes"] = with_internal(meta.get("attributes") or {}, layout_id=self.layout_id)
        with writing(self.state_dir):
            write_atomic(meta_path, json.dumps(meta, indent=2).encode())
            write_atomic(self.state_dir / HELD, json.dumps({"layout_id": self.layout_id, "ready": False}).encode())

    def switch_held(self) -> None:
        """Switch in the copy :meth:`transaction` held for the run's values (nothing when none is held)."""
        stage = self._stage
        if stage is None or not self._held:
            return
        with writing(self.state_dir):
            self._commit(stage)
        self._end_stage(stage)

    def _end_stage(self, stage: Path) -> None:
        """After a switch (or an error before it): the version before, or the unfinished copy, removed."""
        self._stage, self._held, self.layout_id = None, False, None
        (self.state_dir / HELD).unlink(missing_ok=True)
        self.path.end_stage(stage)
        self.path = self.path.fresh()
        if self.group is not None:
            import zarr  # lazy: zarr

            self.group = zarr.open_group(zarr_store(self.path), mode="r+", use_consolidated=False)

    def _commit(self, stage: Path) -> None:
        attrs = dict(self.group.attrs)
        stages = list(internal(attrs).get(STAGES) or []) + ([self.layout_id] if self._held else [])
        self.group.attrs.update(with_internal(attrs, layout_id=self.layout_id, **({STAGES: stages} if self._held else {})))
        self.consolidate()
        manifest = self._manifest(stage)
        interrupt.stall_point(self.state_dir, "switch", 1)  # test hook: the next version is complete
        if manifest is not None:
            write_manifest(self.state_dir, manifest, NEXT)
        interrupt.stall_point(self.state_dir, "switch", 2)  # and its manifest written beside the store's
        with switching(self.state_dir):
            self.path.switch_stage(stage)
            interrupt.stall_point(self.state_dir, "switch", 3)  # test hook: switched, the manifest not yet
            if manifest is not None:
                self._promote_next()

    def finish_switch(self) -> None:
        """After a kill inside a switch (:meth:`transaction`, :meth:`set_attrs`): put the next manifest in
        place when the store is the version it describes, else drop it; under the readers' lock, as
        the switch it completes."""
        with switching(self.state_dir):  # a reader between the store and its manifest would see them disagree
            self.path.finish_switch()
            if (self.state_dir / HELD).exists() and held_stage(self.path) is None:  # switched in, or gone
                self.path.end_stage(self.path.stage_at(self.state_dir / STAGE, _held_id(self.state_dir) or ""))
                (self.state_dir / HELD).unlink(missing_ok=True)
                self.path = self.path.fresh()
            nxt = self.state_dir / NEXT
            if not nxt.exists():
                return
            try:
                lid = json.loads(nxt.read_bytes()).get("layout_id")
            except (OSError, ValueError, AttributeError):
                lid = None
            if lid is not None and lid == internal(root_attrs(self.path) or {}).get("layout_id"):
                self._promote_next()
            else:
                nxt.unlink(missing_ok=True)

    def _open(self, layout: Layout, root_attrs: dict[str, Any], reshape: Reshape | None) -> list[str]:
        _write_every_chunk()
        g = self.group = self._existing_group() if (self.root / "zarr.json").exists() else self._new_group()
        _finish_carries(g)
        reshape = reshape if reshape is not None else plan_reshape(g, layout)
        carried = {name: _carried_values(g, name, layout, labels) for name, labels in reshape.remake.items()
                   if labels}
        for name in reshape.orphans:
            del g[name]
        existing = set(g.array_keys())
        _write_coords(g, layout, existing)
        interrupt.stall_point(self.state_dir, "layout", 1)  # test hook: inside the reshape (coordinates remade)
        recreated = _make_vars(g, layout, reshape, existing, carried)
        non_index = [c.name for c in layout.coords.values() if c.dims != (c.name,)]
        attrs = dict(root_attrs)
        if INTERNAL in attrs:  # merged into the runner attribute the store has (its id)
            attrs[INTERNAL] = with_internal(dict(g.attrs), **internal(attrs))[INTERNAL]
        attrs = {**attrs, "coordinates": " ".join(non_index)}
        in_place = self._stage is None  # a new store, or one on object storage: the root as set_attrs writes it
        if not in_place:
            g.attrs.update(attrs)
        self.forget(reshape.lost(self.tasks()))
        self.consolidate()  # a plain xr.open_zarr during the run sees every array (their data is live)
        self._own = set(layout.coords) | self._sealed_own()
        if in_place:
            self.set_attrs(**attrs)  # the root with its next manifest, never one without the other
        else:
            self.seal()
        return recreated

    def _existing_group(self) -> zarr.Group:
        import zarr  # lazy: zarr (reading records, as a no-op apply does, needs no zarr)

        if not is_runner_store(self.root):
            raise StorePathError(f"{self.path} is a zarr store this runner did not create")
        if format_problem(self.root):
            raise StoreFormatError(format_problem(self.path))
        g = zarr.open_group(zarr_store(self.root), mode="r+", use_consolidated=False)
        make_records_dir(self.state_dir)  # again, after apply --replace kept them
        if "date_created" not in g.attrs:  # written before ACDD's dates: when its first apply ran
            first = str(g.attrs.get("history", "")).split(" ", 1)[0]
            g.attrs.update({"date_created": first or now()})
        return g

    def _new_group(self) -> zarr.Group:
        import zarr  # lazy: zarr

        if self.path.exists() and (not self.path.is_dir() or any(self.path.iterdir())):
            raise StorePathError(store_path_problem(self.path) or f"{self.path} is not a store")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        make_records_dir(self.state_dir)  # before the store: see records_lost
        g = zarr.open_group(zarr_store(self.path), mode="w", zarr_format=3)
        g.attrs.update({**with_internal({}, store_id=uuid.uuid4().hex), "store_format": STORE_FORMAT,
                        "date_created": now()})
        return g

    def attach(self) -> Store:
        """Open a store that another process has locked and laid out, to write a task's own regions
        (a worker of a distributed executor: no lock, no layout changes, no completion records)."""
        import zarr  # lazy: zarr

        _write_every_chunk()
        held = held_stage(self.path)
        if held is not None:  # the driver's run writes its values into the next version
            self._stage, self._held, self.layout_id = self.path.stage_at(self.state_dir / STAGE, held), True, held
        with writing(self.path):
            self.group = zarr.open_group(zarr_store(self.root), mode="r+", use_consolidated=False)
        return self

    @property
    def store_id(self) -> str:
        return internal(self.group.attrs)["store_id"]

    def write(self, name: str, region: tuple, values: np.ndarray) -> None:
        with writing(self.path):
            arr = self.group[name]
            arr[region] = values
            if self._journal is not None:
                note_written(self._journal, name, arr, region)
            elif self._own is not None:  # written by apply itself, outside any task (the inputs)
                self._own.add(name)

    def claim(self, name: str, region: tuple) -> None:
        """Count ``region`` of array ``name`` as written by the running group (values it keeps in
        place, as a longer run keeps the run it extends), for its completion records."""
        if self._journal is not None:
            note_written(self._journal, name, self.group[name], region)

    # --- the manifest (runner.storage.manifest): every zarr.json, and the chunks of the arrays apply writes
    def _sealed_own(self) -> set[str]:
        """The arrays the last manifest bound chunk by chunk (apply's own), that are still here."""
        try:
            found = read_manifest(self.state_dir, self.store_id) or {}
        except ManifestCorrupt:
            found = {}
        here = set(self.group.array_keys())
        return {name for name in found.get("chunks") or {} if name in here}

    def _manifest(self, root: Location, root_meta: dict | None = None) -> dict | None:
        """The manifest of the store's files at ``root`` (``root_meta``: the root's ``zarr.json`` as it
        is about to be written), listing the records there are now; None before :meth:`open`."""
        if self._own is None or self.group is None:
            return None
        metadata = {name: normalized(node) for name, _, node in array_nodes(root) if node is not None}
        root_meta = root_meta if root_meta is not None else json.loads((root / "zarr.json").read_bytes())
        metadata[ROOT] = normalized(root_meta, root=True)
        chunks = {}
        for name in sorted(self._own & set(metadata)):
            digests = chunk_digests(root / name, chunk_keys(root / name))
            chunks[name] = {k: d for k, d in digests.items() if d is not None}
        records = {tid: {"digest": rec.get("digest"), "network_label": rec.get("network_label"),
                         "label": rec.get("label") or rec.get("measure")} for tid, rec in self.tasks().items()}
        return build(self.store_id, metadata, chunks, records=records,
                     layout_id=internal(root_meta.get("attributes") or {}).get("layout_id"))

    def seal(self) -> None:
        """Write the manifest as the store is now (the driver, after it wrote metadata or its own
        arrays); inside :meth:`transaction`, when the next version is switched in."""
        if self._stage is not None:
            return
        with writing(self.state_dir):
            manifest = self._manifest(self.path)
            if manifest is not None:
                write_manifest(self.state_dir, manifest)

    @contextmanager
    def journal(self, task_ids: list[str]) -> Iterator[None]:
        """Note the chunks every write makes until the block ends, for the records of ``task_ids``
        (:func:`runner.storage.records.note_written`: kept on disk, so a resumed group's earlier writes count)."""
        outer, self._journal = self._journal, journal_file(self.state_dir, task_ids)
        try:
            yield
        finally:  # a group run inside another (measures between training steps) hands the journal back
            self._journal = outer

    def read(self, name: str, region: tuple = (...,)) -> np.ndarray:
        return self.group[name][region]

    # --- completion records (runner.storage.records: one file each, beside the store)
    def tasks(self) -> dict[str, dict]:
        """The finished tasks of the version being written (with those bound to a held next version)."""
        return live_records(read_records(self.state_dir, self.store_id), self.group.attrs,
                            self.layout_id if self._held else None)

    def record_many(self, records: dict[str, dict]) -> None:
        if self._held:  # finished in the held next version: a record of the store once it is switched in
            records = {tid: {**rec, STAGED: self.layout_id} for tid, rec in records.items()}
        with writing(self.state_dir):
            written = write_records(self.state_dir, self.store_id, records)
        if isinstance(self.state_dir, Remote):
            self._written.update(written)

    def fold_records(self) -> None:
        """On object storage, fold the records into one object (:func:`runner.storage.records.fold_records`)."""
        if isinstance(self.state_dir, Remote):
            with writing(self.state_dir):
                fold_records(self.state_dir, self.store_id, self._written)

    def forget(self, task_ids: list[str]) -> None:
        """Drop the records of ``task_ids``: first from the manifests' lists of finished tasks (a record
        the manifest lists and that is gone is damage: :mod:`runner.storage.verify`), then the files."""
        for task_id in task_ids:
            self._written.pop(task_id, None)
        if task_ids:
            with writing(self.state_dir):
                for name in (MANIFEST, NEXT):
                    unlist(self.state_dir, name, task_ids)
        drop_records(self.state_dir, task_ids)

    def set_attrs(self, **attrs: Any) -> None:
        """Update the root's attributes. In place on a local disk, as one switch: the manifest of the
        new root is written beside the store's first (``manifest.next.json``, with a new
        ``layout_id``), then the root's ``zarr.json``, then the manifest is renamed into place, the
        last two under the readers' lock; a kill anywhere leaves a root and a manifest that agree."""
        if self._stage is not None or self._own is None:
            with writing(self.root):
                self.group.attrs.update(attrs)
            self.seal()
            return
        import zarr  # lazy: zarr

        with writing(self.state_dir):
            self.finish_switch()
            meta = json.loads((self.path / "zarr.json").read_bytes())
            merged = {**(meta.get("attributes") or {}), **json.loads(json.dumps(attrs, default=str))}
            merged = with_internal(merged, layout_id=uuid.uuid4().hex)
            meta = {**meta, "attributes": merged}
            manifest = self._manifest(self.path, meta)
            write_manifest(self.state_dir, manifest, NEXT)
            interrupt.stall_point(self.state_dir, "attrs", 1)  # test hook: the next manifest written
            with switching(self.state_dir):
                write_atomic(self.path / "zarr.json", json.dumps(meta, indent=2).encode())
                interrupt.stall_point(self.state_dir, "attrs", 2)  # and the root, not the manifest yet
                self._promote_next()
        self.group = zarr.open_group(zarr_store(self.path), mode="r+", use_consolidated=False)

    def _promote_next(self) -> None:
        """The next manifest becomes the store's: renamed on a disk; on object storage (no rename) put
        under the store's name, then removed (a reader between the two finds either one bound to the
        root it read)."""
        nxt = self.state_dir / NEXT
        if isinstance(self.state_dir, Remote):
            write_atomic(self.state_dir / MANIFEST, nxt.read_bytes())
            nxt.unlink(missing_ok=True)
        else:
            os.replace(nxt, self.state_dir / MANIFEST)

    def append_history(self, line: str) -> None:
        """Add a line to the root's ``history`` (CF/ACDD: one line per command that changed the store)."""
        old = self.group.attrs.get("history", "")
        self.set_attrs(history=f"{old}\n{line}" if old else line)

    def set_internal(self, **entries: Any) -> None:
        """Add entries to the root's runner attribute."""
        self.set_attrs(**with_internal(dict(self.group.attrs), **entries))

    def consolidate(self) -> None:
        """Refresh consolidated metadata so a plain ``xr.open_zarr(path)`` sees current attrs (a copy of
        the arrays' metadata in the root's ``zarr.json``, written whole: the arrays' own do not change)."""
        with writing(self.root), switching(self.state_dir):
            import zarr  # lazy: zarr

            zarr.consolidate_metadata(zarr_store(self.root))


def _write_coords(g: zarr.Group, layout: Layout, existing: set[str]) -> None:
    """Write each coordinate whose values changed (or that is new); a changed one is made again."""
    for c in layout.coords.values():
        values = c.values
        if c.name in existing:
            old = g[c.name]
            if old.shape == values.shape and np.array_equal(old[...], values):
                if dict(old.attrs) != c.attrs:
                    old.attrs.update(c.attrs)  # e.g. the units of a store written before they were UDUNITS units
                continue
            del g[c.name]
        dtype = str if values.dtype == object else values.dtype
        arr = g.create_array(c.name, shape=values.shape, dtype=dtype, chunks=values.shape or None,
                             dimension_names=list(c.dims), attributes=c.attrs,
                             fill_value="" if dtype is str else None, **chunk_codecs())
        arr[...] = values


def _make_vars(g: zarr.Group, layout: Layout, reshape: Reshape, existing: set[str], carried: dict) -> list[str]:
    """Create, grow or remake each variable's array for ``layout``; the names of those (re)created."""
    recreated = []
    for v in layout.vars.values():
        attrs = with_internal(v.attrs, layout=v.signature(layout.coords), measure=v.measure)
        if v.name in reshape.grow and v.name in existing:
            g[v.name].resize(reshape.grow[v.name])  # a longer run: new chunks come, old ones stay as they are
        if v.name in existing and v.name not in reshape.remake:
            if dict(g[v.name].attrs) != attrs:
                g[v.name].attrs.update(attrs)  # e.g. a new threshold; the data is rewritten by its task
            continue
        if v.name in carried:
            carried[v.name](attrs)
        else:
            if v.name in existing:
                del g[v.name]
            g.create_array(v.name, shape=v.shape, chunks=v.chunks, dtype=v.dtype, fill_value=v.fill,
                           dimension_names=list(v.dims), attributes=attrs, **chunk_codecs())
        recreated.append(v.name)
    return recreated


@dataclass
class Reshape:
    """The arrays a new layout remakes, and whose values survive it (see :func:`plan_reshape`)."""

    remake: dict[str, set[str]] = field(default_factory=dict)
    """Variable -> labels of the networks whose values are carried into the remade array."""
    grow: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Variable -> its new shape, for an array that only grows along axes whose old values are the
    first of the new, with the same chunks and networks: resized in place (its chunks untouched)."""
    orphans: list[str] = field(default_factory=list)
    """Arrays no variable of the layout declares any more whose dimensions no longer fit: deleted."""
    measures: dict[str, str] = field(default_factory=dict)
    """Array -> the measure that writes it (``*``: every task of a pass), for the arrays above."""

    def lost(self, records: dict[str, dict]) -> list[str]:
        """Ids of the finished results whose values would not survive: their records go."""
        out = []
        for tid, rec in records.items():
            label, measure = rec.get("network_label"), rec.get("measure")
            for name, keep in self.remake.items():
                if self.measures.get(name) in (measure, "*") and label not in keep:
                    out.append(tid)
                    break
            else:
                if any(self.measures.get(name) in (measure, "*") for name in self.orphans):
                    out.append(tid)
        return out


def plan_reshape(g: zarr.Group, layout: Layout) -> Reshape:
    """Compare a store's arrays with ``layout``. A variable whose signature changed is remade; the
    values of a network present before and after are carried over when nothing but the ``network``
    coordinate and the chunks changed (same dimensions, dtype, sizes and coordinate values), or a
    dimension grew with its old coordinate values the first of the new (a longer run: they keep
    their places)."""
    out = Reshape()
    arrays = {name: g[name] for name in g.array_keys()}
    old_labels = [str(x) for x in arrays["network"][...]] if "network" in arrays else []
    new_labels = [str(x) for x in layout.coords["network"].values] if "network" in layout.coords else []
    sizes = {c.name: c.size for c in layout.coords.values() if c.dims == (c.name,)}
    same_coord, grown = {}, {}
    for name, c in layout.coords.items():
        old = arrays.get(name)
        values = old[...] if old is not None else None
        same_coord[name] = old is not None and old.shape == c.values.shape and np.array_equal(values, c.values)
        grown[name] = (old is not None and not same_coord[name] and c.dims == (name,) and len(old.shape) == 1
                       and old.shape[0] < c.values.shape[0] and np.array_equal(values, c.values[:old.shape[0]]))
    for v in layout.vars.values():
        old = arrays.get(v.name)
        if old is None:
            continue
        if internal(old.attrs).get("layout") == v.signature(layout.coords):
            continue
        out.measures[v.name] = v.measure
        same_dims = tuple(old.metadata.dimension_names or ()) == v.dims  # also: shapes of one length below
        same_type = same_dims and (np.dtype(old.dtype).kind in "OTU" if v.dtype is str
                                   else np.dtype(old.dtype) == np.dtype(v.dtype))
        fits = same_type and v.dtype is not str
        grows = [same_dims and old.shape[i] < v.shape[i] and grown.get(d, False) for i, d in enumerate(v.dims)]
        if same_type and any(grows) and tuple(old.chunks) == tuple(v.chunks) and all(
                g or (old.shape[i] == v.shape[i] and same_coord.get(d, True))
                for i, (d, g) in enumerate(zip(v.dims, grows, strict=True))):
            out.grow[v.name] = tuple(v.shape)  # the networks in their places too (same_coord)
            continue
        fits = fits and all(d == "network" or (old.shape[i] == v.shape[i] and same_coord.get(d, True))
                            or g for i, (d, g) in enumerate(zip(v.dims, grows, strict=True)))
        out.remake[v.name] = (set(old_labels) & set(new_labels)) if fits and "network" in v.dims else set()
    for name, arr in arrays.items():
        if name in layout.vars or name in layout.coords:
            continue
        dims = tuple(arr.metadata.dimension_names or ())
        if any(d in sizes and arr.shape[i] != sizes[d] for i, d in enumerate(dims)) or \
                ("network" in dims and not same_coord.get("network", True)):
            out.orphans.append(name)
            out.measures[name] = internal(arr.attrs).get("measure", "?")
    return out


CARRY = "_carry_"
STAGE = "next.zarr"
"""The next version of a store, built in its runner folder (:meth:`Store.transaction`)."""
HELD = "next.json"
"""Beside the store while the next version holds a run's values: its ``layout_id``."""
STAGED = "staged"
"""In a completion record: the ``layout_id`` of the next version its values were written into."""
STAGES = "stages"
"""In the root's runner attribute: the held next versions switched in (their records are the store's)."""


def _carried_values(g: zarr.Group, name: str, layout: Layout, labels: set[str]):
    """A function that remakes array ``name`` for ``layout`` with the values of the networks
    ``labels`` copied over. The copy goes to a new array first, which replaces the old one only once
    complete (a kill in between leaves the old one, or a complete copy that the next open puts in
    place: :func:`_finish_carries`)."""
    v = layout.vars[name]
    old = g[name]
    old_index = {str(x): i for i, x in enumerate(g["network"][...])}
    new_index = {str(x): i for i, x in enumerate(layout.coords["network"].values)}
    axis = v.dims.index("network")

    def remake(attrs: dict) -> None:
        tmp = CARRY + name
        if g.get(tmp) is not None:
            del g[tmp]
        # a copy: zarr keeps the dict it is given as the array's attributes, and updates it in place
        arr = g.create_array(tmp, shape=v.shape, chunks=v.chunks, dtype=v.dtype, fill_value=v.fill,
                             dimension_names=list(v.dims), attributes=dict(attrs), **chunk_codecs())
        for label in sorted(labels, key=new_index.get):
            src = (slice(None),) * axis + (old_index[label],)
            dst = tuple(slice(0, n) for n in old.shape[:axis]) + (new_index[label],) + tuple(
                slice(0, n) for n in old.shape[axis + 1:])  # a grown dimension: the old values first
            arr[dst] = old[src]
        arr.attrs.update(with_internal(attrs, carried=True))
        del g[name]
        _move(g, tmp, name, attrs)

    return remake


def _move(g: zarr.Group, src: str, dst: str, attrs: dict) -> None:
    if isinstance(g.store, KeyMapStore):  # a version on object storage: a copy and a delete (no rename)
        base = g.store.root / g.path if g.path else g.store.root
        move_tree(base / src, base / dst)
    else:
        root = Path(str(g.store.root))
        os.replace(root / g.path / src, root / g.path / dst)
    g[dst].attrs.update({**attrs})  # without the "carried" mark: the copy is in place


def _finish_carries(g: zarr.Group) -> None:
    """After a kill during :func:`_carried_values`: put a complete copy in place, drop an incomplete one."""
    names = set(g.array_keys())
    for name in [n for n in names if n.startswith(CARRY)]:
        arr, target = g[name], name[len(CARRY):]
        if internal(arr.attrs).get("carried") and target not in names:
            attrs = dict(arr.attrs)
            _move(g, name, target, {**attrs, INTERNAL: json.dumps({k: v for k, v in internal(attrs).items()
                                                                    if k != "carried"})})
        else:
            del g[name]


def read_tasks_checked(path: Location) -> tuple[dict[str, dict], dict[str, str]]:
    """(the completion records of a store, record files that do not read: file name -> why)."""
    return read_tasks(path), unreadable_records(runner_dir(location(path)))


def read_tasks(path: Location, working: bool = False) -> dict[str, dict]:
    """Completion records of a store, read without the lock or zarr ({} when there is no store).
    ``working``: with those of the next version an apply holds and has not switched in yet (what
    the next apply continues), not only the store's own."""
    own, staged = read_tasks_staged(path, held=working)
    return {**own, **staged}


def read_tasks_staged(path: Location, held: bool = True) -> tuple[dict[str, dict], dict[str, dict]]:
    """(the store's completion records, those of the next version an apply holds, not switched in yet),
    from one read of the records (``held=False``: the second is not looked for)."""
    path = location(path)
    attrs = root_attrs(path) or {}
    records = read_records(runner_dir(path), internal(attrs).get("store_id"))
    own = live_records(records, attrs)
    stage = held_stage(path) if held else None
    return own, {tid: rec for tid, rec in records.items() if stage is not None and rec.get(STAGED) == stage}


def live_records(records: dict[str, dict], attrs, held: str | None = None) -> dict[str, dict]:
    """Of ``records``, those of the version whose root attributes are ``attrs``: every record but those
    written into a next version (``staged``) that was never switched in, and, with ``held``, those
    of the next version ``held`` too."""
    switched = set(internal(dict(attrs)).get(STAGES) or ())
    return {tid: rec for tid, rec in records.items()
            if rec.get(STAGED) is None or rec[STAGED] in switched or rec[STAGED] == held}


def held_stage(path: Location) -> str | None:
    """The ``layout_id`` of the next version an apply holds for its run's values (``transaction(hold=True)``)
    and has not switched in yet; None when there is none (or the switch happened)."""
    path = location(path)
    held = _held_id(runner_dir(path), ready=True)
    if held is None or internal(root_attrs(path.fresh()) or {}).get("layout_id") == held:
        return None
    stage = path.stage_at(runner_dir(path) / STAGE, held)
    return held if internal(root_attrs(stage) or {}).get("layout_id") == held else None


def held_version(path: Location) -> str | None:
    """The id of the next version a stopped apply left for the store at ``path`` (``next.json``), or None."""
    return _held_id(runner_dir(location(path)))


def _held_id(state_dir: Location, ready: bool = False) -> str | None:
    """The ``layout_id`` ``next.json`` names, or None; with ``ready``, only once its layout is complete
    (a version killed while it was laid out is begun again, never continued)."""
    try:
        held = json.loads((state_dir / HELD).read_bytes())
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(held, dict) or (ready and held.get("ready") is False):
        return None
    return held.get("layout_id")


def records_lost(path: Path) -> bool:
    """A store of this runner whose records folder is gone (its ``.runner`` folder deleted, or the
    store copied without it): which of its results are finished is unknown."""
    return is_runner_store(path) and not records_exist(runner_dir(location(path)))
