"""Is a store whole? ``runner verify`` (as ``git fsck``), and ``status``, ``show``, ``figures`` and
``apply`` before they trust a store.

Two checks, both without listing the store's files:

1. metadata: the root's ``zarr.json`` parses and names a store this runner wrote (its store id),
   and so does the ``zarr.json`` of each array;
2. chunks: every chunk a finished task recorded (:mod:`runner.storage.records`) exists and reads back
   through zarr, which decompresses it and checks its CRC-32C (``crc32c`` codec,
   :func:`runner.storage.store.chunk_codecs`). A missing chunk file is damage, never the fill value: the
   runner writes every chunk, empty or not. Arrays no task records (coordinates and inputs, which
   ``apply`` writes itself) are read whole.

A damaged result is named by its task; ``apply`` forgets those tasks' records, so the normal resume
path recomputes exactly them (:func:`repair`). Stores made before chunks were recorded (or before
checksums) are checked as far as their records allow: their tasks are counted as unchecked.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from runner.core.commandline import program
from runner.core.errors import StorageError, Unavailable
from runner.core.layout import internal
from runner.storage.events import read_events
from runner.storage import kept
from runner.storage.history import version_at
from runner.storage.location import Location, location, remove_tree, zarr_store
from runner.storage.manifest import (ALGORITHM, array_nodes, MANIFEST, ROOT, ManifestCorrupt, check_manifest, chunk_digests,
                                     differences, normalized, read_any_manifest, read_manifest, record_digest)
from runner.storage.readers import guarded
from runner.storage.records import as_bound, chunk_coords, decode_key, drop_records, encode_key
from runner.storage.store import (atomic_write_bytes, manifest_root, read_tasks_checked, root_attrs, runner_dir,
                                  store_id)

KEPT = "(kept state)"
"""The array name of a kept file's problem."""

WHOLE_READ_BYTES = 256 * 2**20
"""An array whose recorded chunks cover it and that is smaller than this is read in one call
(chunk by chunk only when that read fails, to name the chunk)."""


class StoreUnreadable(Unavailable):
    """Not a store of this project, or one whose metadata cannot be read (exit 66)."""


class StoreDamaged(StorageError):
    """Finished results whose chunks are missing, truncated or corrupt; ``runner apply`` recomputes
    them (exit 74)."""


@dataclass
class Damage:
    """What :func:`verify` found in one store."""

    path: Path
    problems: list[tuple[str, str, str]] = field(default_factory=list)
    """(array, chunk key or ``zarr.json``, what is wrong) for each damaged chunk or array."""
    tasks: dict[str, list[str]] = field(default_factory=dict)
    """Task id -> the damaged chunks of its results (``array c/0/3: missing``)."""
    records: dict[str, dict] = field(default_factory=dict)
    unowned: list[str] = field(default_factory=list)
    """Damaged arrays no task wrote (coordinates, inputs): ``apply`` remakes them."""
    broken: list[str] = field(default_factory=list)
    """Arrays whose metadata is corrupt: ``apply`` removes and remakes them (their tasks run again)."""
    unchecked: list[str] = field(default_factory=list)
    """Tasks whose records list no chunks (recorded by an older runner): not checked."""
    altered: dict[str, dict] = field(default_factory=dict)
    """Array (``""``: the root) -> its metadata as the manifest keeps it, for each whose ``zarr.json``
    differs from it or is corrupt: ``apply`` writes it back (its chunks are checked by their digests)."""
    redo: list[str] = field(default_factory=list)
    """The damaged tasks ``apply`` recomputes: those whose chunks or record are damaged (not those whose
    array's metadata only is altered, which ``apply`` writes back)."""
    bad_records: list[str] = field(default_factory=list)
    """Record files that do not read (``<task id>.json``): ``apply`` removes them (their tasks run again)."""
    manifest_bad: bool = False
    kept: list[Location] = field(default_factory=list)
    """Kept files (checkpoints, resume and final states) that are not what was written: never used by a
    later run; ``apply`` removes them (what needs them is computed again)."""
    version: str | None = None
    """The name of the kept version checked (never written: ``apply`` repairs only the store)."""
    covered: bool = False
    """The store has a manifest (metadata and the arrays apply writes are bound to it)."""
    chunks: int = 0
    bytes: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def results_ok(self) -> bool:
        """Every result is whole (kept state for later runs may not be: it is never read as a result)."""
        return all(a == KEPT for a, _, _ in self.problems)

    @property
    def variables(self) -> list[str]:
        return sorted({a for a, _, _ in self.problems})

    def task_names(self) -> list[str]:
        """``network measure@checkpoint (id)`` of each damaged task."""
        out = []
        for tid in sorted(self.tasks, key=lambda t: (self.records[t].get("network") or 0, t)):
            rec = self.records[tid]
            out.append(f"{rec.get('network_label', '?')} {rec.get('label') or rec.get('measure', '?')} ({tid})")
        return out

    def lines(self, limit: int = 8) -> list[str]:
        out = [f"  {a} {k}: {what}" for a, k, what in self.problems[:limit]]
        if len(self.problems) > limit:
            out.append(f"  ... and {len(self.problems) - limit} more")
        return out

    def summary(self, spec: str | None = None) -> str:
        """One paragraph: what is damaged, whose results, and what to run."""
        names = self.task_names()
        shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        chunks = [(a, k) for a, k, _ in self.problems if k != "zarr.json" and not a.startswith("(")]
        parts = [f"{len(chunks)} chunk(s) of {', '.join(sorted({a for a, _ in chunks}))} are missing, truncated, "
                 "corrupt or not the chunk written there"] if chunks else []
        parts += [f"the metadata (zarr.json) of {', '.join(self.broken)} is corrupt"] if self.broken else []
        altered = [a or "(root)" for a in self.altered if a not in self.broken]
        parts += [f"the metadata (zarr.json) of {', '.join(altered)} differs from the manifest "
                  f"({self._first_metadata_problem()})"] if altered else []
        records = [k for a, k, _ in self.problems if a == "(records)"]
        parts += [f"{len(records)} completion record(s) are corrupt or altered ({', '.join(records[:3])})"] \
            if records else []
        parts += [f"its manifest ({MANIFEST}) is corrupt, missing or not the store's"] if self.manifest_bad else []
        parts += [f"{len(self.kept)} kept file(s) for later runs are not what was written "
                  f"({', '.join(k for a, k, _ in self.problems if a == KEPT)[:200]})"] if self.kept else []
        text = f"{self.path} is damaged: " + " and ".join(parts)
        if names:
            text += f"; they belong to {len(names)} finished task(s): {shown}"
        if self.unowned:
            text += f"; arrays apply writes itself: {', '.join(self.unowned)}"
        return text + f". Run `{program()} apply {spec or 'SPEC'}` to recompute them (`{program()} verify` lists the chunks)"

    def _first_metadata_problem(self) -> str:
        return next((f"{a} {what}" for a, k, what in self.problems if k == "zarr.json" and a not in self.broken), "")


def metadata_problem(path: Path) -> str | None:
    """Why ``path`` is not a store of this project whose metadata reads (one line), or None (a corrupt
    root that the store's manifest binds is damage :func:`verify` names, not this)."""
    path = location(path)
    root = path / "zarr.json"
    if not root.is_file():
        return f"{path} is not a zarr store (no zarr.json)"
    problem = _json_problem(root)
    if problem and manifest_root(path) is None:
        return f"{path}: its metadata {root} is corrupt ({problem}); the runner cannot read this store"
    if store_id(path) is None:
        return (f"{path} is a zarr store this project did not write (it has no runner attributes); "
                "open it with xarray (xr.open_zarr)")
    return None


def array_metadata_problems(path: Path) -> dict[str, str]:
    """Array name -> why its ``zarr.json`` does not read (arrays of the root group and its sub-groups)."""
    out = {}
    for name, meta, _node in array_nodes(location(path)):
        problem = _json_problem(meta)
        if problem:
            out[name] = f"metadata {meta} is corrupt ({problem})"
    return out


def _json_problem(path: Path) -> str | None:
    try:
        node = json.loads(path.read_bytes())
    except OSError as err:
        return err.strerror or str(err)
    except ValueError as err:  # UnicodeDecodeError included
        return f"not JSON: {type(err).__name__}"
    return None if isinstance(node, dict) else "not a JSON object"


def verify(path: Path, quick: bool = False, version=None) -> Damage:
    """Check one store (not a sweep's root): raises :class:`StoreUnreadable` for a store this project
    did not write or whose root metadata is corrupt; otherwise returns what is damaged. ``quick``:
    only that each recorded chunk file is there and not empty, and the metadata against the
    manifest (no chunk read: what ``plan`` checks). ``version``: a kept version
    (:class:`runner.storage.history.Version`) at ``path``, checked against the records and the
    manifest it carries; a corrupt root the manifest binds is damage named here.

    Small checkers, each adding its findings to the :class:`Damage`: the records and the manifest
    (:func:`_check_manifest`, :func:`_check_records`), the metadata (:func:`_check_metadata`), the
    chunks the records and the manifest list and the arrays neither lists (:func:`_check_chunks`),
    then :func:`_assign` gives each finding to the tasks that wrote it, and the kept files are read
    back (:func:`_check_kept`)."""
    path = location(path)
    problem = metadata_problem(path)
    if problem:
        raise StoreUnreadable(problem)
    version = version if version is not None else version_at(path)  # a kept version's store: what it carries
    confirm = not guarded(runner_dir(path))  # no readers' lock: damage is said once a second read finds it too
    before = None
    for _ in range(RETRIES):
        path = path if version is not None else path.fresh()  # on object storage: the version the head names now
        layout_id = internal(root_attrs(path) or {}).get("layout_id")
        damage = _verify(path, quick, version)
        if damage.ok or version is not None:
            return damage
        moved = internal(root_attrs(path.fresh()) or {}).get("layout_id") != layout_id
        if not moved and (not confirm or damage.problems == before):
            return damage
        before = damage.problems
    return damage  # a writer switches versions faster than this reads: what the last read found


#: Checks of a store whose version changed while they read it (an apply on object storage updating
#: the root with its next manifest), or, where readers hold no lock (object storage), whose damage
#: a second read did not find again (a writer's step between two of its reads), before the last is taken.
RETRIES = 3


def _verify(path: Location, quick: bool, version) -> Damage:
    t0 = time.monotonic()
    damage, manifest = _check_manifest(path, version)
    seen = _check_records(damage, manifest, internal(root_attrs(path) or {}).get("layout_id"))
    _check_metadata(path, damage, manifest, seen)
    _check_chunks(path, damage, manifest, seen, quick)
    _assign(damage, seen)
    if not quick and version is None:
        _check_kept(path, damage)
    damage.seconds = time.monotonic() - t0
    return damage


@dataclass
class _Seen:
    """What the checkers found so far, for the next ones and for :func:`_assign`."""

    owners: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    """Array -> chunk key -> the ids of the tasks whose records list it."""
    expect: dict[str, dict[str, str]] = field(default_factory=dict)
    """Array -> chunk key -> the digest recorded for it."""
    grids: dict[str, list[int]] = field(default_factory=dict)
    chunk_tids: set[str] = field(default_factory=set)
    """Tasks whose values are damaged: computed again."""
    nodes: dict[str, dict | None] = field(default_factory=dict)
    bad_meta: dict[str, str] = field(default_factory=dict)
    driver: dict[str, dict] = field(default_factory=dict)
    """The arrays apply writes itself (coordinates, inputs): name -> chunk key -> digest, from the manifest."""
    by_measure: dict[str, set[str]] = field(default_factory=dict)
    """Measure -> the ids of its finished tasks (the owners of an array no record lists chunks of)."""


def _check_manifest(path: Location, version) -> tuple[Damage, dict | None]:
    """The records and the manifest to check against (the store's, or those a kept version carries),
    the corrupt root the manifest binds, and a manifest that is corrupt or not this version's."""
    sid = store_id(path)
    layout_id = internal(root_attrs(path) or {}).get("layout_id")
    if version is None:
        records, unreadable = read_tasks_checked(path)
        manifest_source = lambda: read_manifest(runner_dir(path), sid, layout_id)  # noqa: E731
    else:
        records = {tid: rec for tid, rec in (version.manifest.get("records") or {}).items() if isinstance(rec, dict)}
        unreadable = {}
        contents = version.manifest.get("contents")
        manifest_source = lambda: check_manifest(contents, sid) if contents is not None else None  # noqa: E731
    damage = Damage(path, records=records, version=version.name if version is not None else None)
    corrupt_root = _json_problem(path / "zarr.json")
    if corrupt_root:  # bound by the manifest (else metadata_problem refused): written back by apply
        damage.problems.append(("(root)", "zarr.json", f"corrupt ({corrupt_root}); the manifest keeps it"))
        damage.altered[ROOT] = {"attributes": root_attrs(path)}  # the manifest's, as root_attrs reads them
    try:
        manifest = manifest_source()
    except ManifestCorrupt as err:
        manifest = None
        damage.manifest_bad = True
        damage.problems.append(("(manifest)", MANIFEST, f"corrupt ({err})"))
    if version is None and not damage.manifest_bad and layout_id is not None and runner_dir(path).is_dir():
        what = _unbound_manifest(manifest, layout_id, _foreign_store(path, sid) if manifest is None else None)
        if what:  # not the store's: never trusted, never repaired towards; apply writes the store's again
            manifest = None
            damage.manifest_bad = True
            damage.problems.append(("(manifest)", MANIFEST, what))
    damage.covered = manifest is not None
    for name, what in sorted(unreadable.items()):
        damage.problems.append(("(records)", name, what))
        damage.bad_records.append(name)
    return damage, manifest


def _check_records(damage: Damage, manifest: dict | None, layout_id: str | None) -> _Seen:
    """Records the manifest lists that are gone, records altered, and the chunks (with their digests)
    each intact record lists."""
    seen = _Seen()
    for tid in sorted(set((manifest or {}).get("records") or {}) - set(damage.records)):
        if f"{tid}.json" in damage.bad_records:
            continue
        damage.problems.append(("(records)", f"{tid}.json", "missing (the manifest lists the task as finished)"))
        listed = manifest["records"][tid]
        damage.records[tid] = {k: listed.get(k) for k in ("network_label", "label")} if isinstance(listed, dict) else {}
        damage.tasks.setdefault(tid, []).append("its record is missing")
        seen.chunk_tids.add(tid)
    for tid, rec in sorted(damage.records.items()):
        if tid in seen.chunk_tids:
            continue
        if "digest" in rec and rec["digest"] != record_digest(rec):
            damage.problems.append(("(records)", f"{tid}.json", "altered (its digest does not match its content)"))
            damage.tasks.setdefault(tid, []).append("its record is altered")
            seen.chunk_tids.add(tid)
            continue
        if "chunks" not in rec:
            damage.unchecked.append(tid)
            continue
        for name, entry in (as_bound(rec, layout_id).get("chunks") or {}).items():
            seen.grids.setdefault(name, entry["grid"])
            digests = (entry.get(ALGORITHM) or {}) if entry["grid"] == seen.grids[name] else {}
            for key in _keys(entry, seen.grids[name]):
                seen.owners.setdefault(name, {}).setdefault(key, set()).add(tid)
                if key in digests:
                    seen.expect.setdefault(name, {}).setdefault(key, digests[key])
    return seen


def _check_metadata(path: Location, damage: Damage, manifest: dict | None, seen: _Seen) -> None:
    """Each array's metadata: corrupt, gone while its folder stays, disputed, or not what the manifest
    binds (written back by apply)."""
    seen.nodes = {name: node for name, _, node in array_nodes(path)}
    bad_meta = array_metadata_problems(path)
    listed = set(seen.owners) | set(((manifest or {}).get("metadata") or {})) | set(((manifest or {}).get("chunks") or {}))
    for name in sorted(listed - set(seen.nodes) - {ROOT}):
        if (path / name).is_dir():  # its folder is there, its metadata gone: xarray would drop it silently
            bad_meta[name] = f"metadata {path / name / 'zarr.json'} is missing (its folder is there)"
    recorded_meta = (manifest or {}).get("metadata") or {}
    disputed = _disputed(path, seen.nodes, recorded_meta)
    bad_meta.update(disputed)
    damage.broken = sorted(bad_meta)
    for name, what in bad_meta.items():
        damage.problems.append((name, "zarr.json", what))
        if name in recorded_meta and name not in disputed:
            damage.altered[name] = recorded_meta[name]
    for name, recorded in sorted(recorded_meta.items()):
        if name == ROOT:
            what = _root_differences(path, recorded, recorded_meta)
        elif name in bad_meta or name not in seen.nodes:
            continue  # corrupt: said above; gone: its chunks are missing (below)
        else:
            what = differences(normalized(seen.nodes[name]), recorded)
        if what:
            damage.problems.append((name or "(root)", "zarr.json", "; ".join(what)))
            damage.altered[name] = recorded
    seen.bad_meta = bad_meta


def _check_chunks(path: Location, damage: Damage, manifest: dict | None, seen: _Seen, quick: bool) -> None:
    """The chunks the records list, those the manifest lists (apply's own arrays), and the arrays
    neither lists: coordinates and inputs of a store made before the manifest, or results of records
    made before chunks were listed (those records' tasks own them); small, read whole."""
    group = _Arrays(path)
    for tid, rec in damage.records.items():
        seen.by_measure.setdefault(str(rec.get("measure")), set()).add(tid)
    for name in sorted(seen.owners):
        grid = _grid_of(damage.altered.get(name) or seen.nodes.get(name)) or seen.grids[name]
        for key, what, tids in _check_array(path, group, name, seen.owners[name], seen.grids[name], grid,
                                            seen.expect.get(name, {}), damage, quick):
            damage.problems.append((name, key, what))
            seen.chunk_tids |= tids
            for tid in tids:
                damage.tasks.setdefault(tid, []).append(f"{name} {key}: {what}")
    seen.driver = (manifest or {}).get("chunks") or {}
    for name in sorted(seen.driver):
        for key, what in _check_driver(path, name, seen.driver[name], seen.nodes, damage, quick):
            damage.problems.append((name, key, what))
            if name not in damage.unowned:
                damage.unowned.append(name)
    unlisted = set(seen.nodes) - set(seen.owners) - set(seen.bad_meta) - set(seen.driver) - set(damage.altered)
    for name in [] if quick else sorted(unlisted):
        what = _read(lambda n=name: group[n][...])
        if what:
            damage.problems.append((name, "(array)", what))
            tids = _measure_tasks(seen, name)
            seen.chunk_tids |= tids
            if not tids:
                damage.unowned.append(name)


def _measure_tasks(seen: _Seen, name: str) -> set[str]:
    """The finished tasks of the measure whose array ``name`` is (every task's for a ``*`` array)."""
    measure = internal((seen.nodes.get(name) or {}).get("attributes")).get("measure")
    return set().union(*seen.by_measure.values()) if measure == "*" else seen.by_measure.get(str(measure), set())


def _assign(damage: Damage, seen: _Seen) -> None:
    """Each finding given to the tasks that wrote what it concerns, and the tasks apply computes again."""
    meta_tids: set[str] = set()
    for name in set(seen.bad_meta) | set(damage.altered) - {ROOT}:
        meta_tids |= _owners_of(damage.records, name) | (set(damage.unchecked) if name not in damage.altered else set())
    for name, key, what in damage.problems:
        tids: set[str] = set()
        if key == "zarr.json" and not name.startswith("("):
            tids = meta_tids & (_owners_of(damage.records, name) | set(damage.unchecked))
        elif key == "(array)" and name not in seen.driver:
            tids = _measure_tasks(seen, name)
        for tid in tids:
            damage.tasks.setdefault(tid, []).append(f"{name} {key}: {what}")
    for name in seen.bad_meta:
        if name not in damage.altered and not _owners_of(damage.records, name) and name not in damage.unowned:
            damage.unowned.append(name)
    altered_owners = {t for n in damage.altered for t in _owners_of(damage.records, n)}
    damage.redo = sorted(seen.chunk_tids | (meta_tids - altered_owners))


def _check_kept(path: Location, damage: Damage) -> None:
    """Each kept file (:mod:`runner.storage.kept`) read back against the digest it recorded."""
    state = runner_dir(path)
    for file, what in kept.damaged(state):
        damage.kept.append(file)
        damage.problems.append((KEPT, str(file)[len(str(state)) + 1:], what))


def _foreign_store(path: Location, sid: str | None) -> str | None:
    """What to say of a manifest in the store's runner folder that names another store, or None."""
    other = (read_any_manifest(runner_dir(path)) or {}).get("store_id")
    if other is None or other == sid:
        return None
    return (f"another store's (store id {other[:12]}): the runner folder {runner_dir(path)} was copied from "
            "another store; its records and manifest are not this store's")


def _unbound_manifest(manifest: dict | None, layout_id: str, foreign: str | None = None) -> str | None:
    """Why the manifest read is not the one of the store's version (named by the root's ``layout_id``,
    which is written with a manifest): deleted, rolled back, or another store's copied in. (A store
    without its runner folder, a copy made with xarray, is not covered, as before the manifest.)"""
    if manifest is None and foreign is not None:
        return foreign
    if manifest is None:
        return f"missing (the store's version {layout_id[:12]} was written with one; deleted, or another store's)"
    if manifest.get("layout_id") != layout_id:
        return (f"of another version ({str(manifest.get('layout_id'))[:12]}, the store is {layout_id[:12]}): "
                "an older manifest put back, or copied in")
    return None


class _Arrays:
    """The store's arrays by name, each opened on its own (no root group: a corrupt root is damage to
    name, not a read that fails)."""

    def __init__(self, path: Location):
        self.store = zarr_store(path, read_only=True)

    def __getitem__(self, name: str):
        import zarr  # lazy: zarr

        return zarr.open_array(self.store, path=name, mode="r")


def _grid_of(meta: dict | None) -> list[int] | None:
    try:
        return list(meta["chunk_grid"]["configuration"]["chunk_shape"])
    except (KeyError, TypeError):
        return None


def _disputed(path: Path, nodes: dict, recorded_meta: dict) -> dict[str, str]:
    """Arrays whose ``zarr.json`` and manifest agree while the root's consolidated copy of it differs
    (both edited alike, the manifest's digest made again): which was written cannot be told, so neither
    is written back; ``apply`` remakes the array from the spec's layout and recomputes its tasks."""
    try:
        root = json.loads((location(path) / "zarr.json").read_bytes())
    except (OSError, ValueError):
        return {}
    copies = ((root.get("consolidated_metadata") or {}).get("metadata") or {}) if isinstance(root, dict) else {}
    out = {}
    for name, copy in sorted(copies.items()):
        node, recorded = nodes.get(name), recorded_meta.get(name)
        if name == ROOT or not isinstance(copy, dict) or copy.get("node_type") != "array" or node is None \
                or recorded is None or differences(normalized(node), recorded):
            continue
        what = differences(normalized(copy), recorded, "consolidated copy's ")
        if what:
            out[name] = (f"{'; '.join(what)} (its zarr.json and the manifest agree with each other, not with the "
                         "root's copy; neither is trusted: apply remakes the array and recomputes its tasks)")
    return out


def _root_differences(path: Path, recorded: dict, recorded_meta: dict) -> list[str]:
    """How the root's ``zarr.json`` differs from the manifest: its attributes, and each array's copy
    in its consolidated metadata (what ``xr.open_zarr`` reads by default)."""
    try:
        root = json.loads((location(path) / "zarr.json").read_bytes())
    except (OSError, ValueError):
        return []  # said by metadata_problem
    out = differences(normalized(root, root=True), recorded)
    copies = ((root.get("consolidated_metadata") or {}).get("metadata") or {}) if isinstance(root, dict) else {}
    for name, meta in sorted(copies.items()):
        if name in recorded_meta and name != ROOT and isinstance(meta, dict) and meta.get("node_type") == "array":
            out += differences(normalized(meta), recorded_meta[name], f"consolidated_metadata.{name}.")
    return out


def _check_driver(path: Path, name: str, keys: dict[str, str], nodes: dict, damage: Damage, quick: bool):
    """(key, what) of each chunk of an array ``apply`` writes itself that differs from the manifest."""
    if name not in nodes and not (location(path) / name / "zarr.json").is_file():
        return [("(array)", "missing (the whole array is gone)")]
    folder = location(path) / name
    present, found = _present(folder, keys, damage)
    if quick:
        return found
    actual = chunk_digests(folder, present, keys)
    by_digest = {d: k for k, d in keys.items()}
    for key in present:
        if actual[key] != keys[key]:
            found.append((key, _mismatch(actual[key], by_digest, key)))
    return found


def _present(folder, keys, damage: Damage) -> tuple[list[str], list[tuple[str, str]]]:
    """The chunks of ``keys`` whose files are there and not empty, and (key, what) of the others;
    counted in ``damage``."""
    sizes = _chunk_sizes(folder)
    present, found = [], []
    for key in sorted(keys):
        try:
            size = sizes(key)
        except FileNotFoundError:
            found.append((key, "missing (its chunk file is gone)"))
            continue
        if size == 0:
            found.append((key, "truncated to 0 bytes"))
            continue
        damage.bytes += size
        present.append(key)
    damage.chunks += len(keys)
    return present, found


def _mismatch(actual: str | None, by_digest: dict[str, str], key: str, decodes: bool | None = None) -> str:
    other = by_digest.get(actual) if actual else None
    if actual is None:
        return "missing (its chunk file is gone)"
    if other and other != key:
        return f"holds the chunk recorded for {other} (chunks swapped or moved; its checksum is valid)"
    if decodes:
        return "holds other bytes than its task wrote, a valid chunk (replaced or stale; its crc32c checksum passes)"
    if decodes is False:
        return "corrupt (its bytes differ from the manifest and do not decode)"
    return "differs from the manifest (replaced, stale or corrupt)"


def _owners_of(records: dict[str, dict], name: str) -> set[str]:
    return {tid for tid, rec in records.items() if name in rec.get("chunks", {})}


def _keys(entry: dict, grid: list[int]) -> list[str]:
    """The keys of a record's entry, on ``grid`` (the grid of the first record read for the array)."""
    return list(entry["keys"]) if entry["grid"] == grid else _regrid(entry["keys"], entry["grid"], grid, None)


def _regrid(keys: list[str], old: list[int], new: list[int], shape: tuple[int, ...] | None) -> list[str]:
    """Keys on grid ``old`` as the keys of the chunks of grid ``new`` that cover the same elements."""
    out: set[str] = set()
    for key in keys:
        k = decode_key(key)
        region = tuple(slice(i * g, (i + 1) * g) for i, g in zip(k, old, strict=True))
        bound = shape or tuple((i + 1) * g for i, g in zip(k, old, strict=True))
        region = tuple(slice(r.start, min(r.stop, n)) for r, n in zip(region, bound, strict=True))
        out.update(encode_key(c) for c in chunk_coords(bound, tuple(new), region))
    return sorted(out)


def _check_array(path: Path, group, name: str, keys: dict[str, set[str]], grid: list[int], now: list[int],
                 expect: dict[str, str], damage: Damage, quick: bool = False):
    """(key, what) of each recorded chunk of array ``name`` that is missing, or whose bytes differ
    from the digest its record keeps, or (recorded without one) does not read. ``grid``: the grid
    the records list keys on; ``now``: the array's grid (from its metadata, or the manifest's when
    that is altered)."""
    if list(now) != list(grid):  # remade with another chunking since: the same elements, new keys (no digests)
        shape = None
        try:
            shape = group[name].shape
        except Exception:  # noqa: BLE001 - an array that does not open is checked by its files
            pass
        keys = {new: tids for key, tids in keys.items() for new in _regrid([key], grid, list(now), shape)}
        expect = {}
    if not (location(path) / name).is_dir():
        damage.chunks += len(keys)
        return [(key, "missing (the whole array is gone)", keys[key]) for key in sorted(keys)]
    folder = location(path) / name
    present, found = _present(folder, keys, damage)
    if not present or quick:
        return [(k, what, keys[k]) for k, what in found]
    hashed = [k for k in present if k in expect]
    actual = chunk_digests(folder, hashed, expect)
    by_digest = {d: k for k, d in expect.items()}
    arr = None
    for key in hashed:
        if actual[key] == expect[key]:
            continue
        if arr is None:
            arr = _open(group, name)
        decodes = None if isinstance(arr, str) else \
            _read(lambda k=key: arr.get_block_selection(decode_key(k))) is None
        found.append((key, _mismatch(actual[key], by_digest, key, decodes)))
    rest = [k for k in present if k not in expect]
    arr = _open(group, name) if rest and arr is None else arr
    if not rest:
        pass
    elif isinstance(arr, str):
        found += [(key, arr) for key in rest]
    elif not (len(rest) == arr.nchunks and arr.nbytes <= WHOLE_READ_BYTES and _read(lambda: arr[...]) is None):
        for key in rest:
            what = _read(lambda k=key: arr.get_block_selection(decode_key(k)))
            if what:
                found.append((key, what))
    return [(k, what, keys[k]) for k, what in found]


def _open(group, name: str):
    """The zarr array ``name``, or what keeps it from opening."""
    try:
        return group[name]
    except KeyError:
        return "missing (the whole array is gone)"
    except Exception as err:  # noqa: BLE001 - any failure to open it is damage to report
        return f"array does not open ({type(err).__name__}: {err})"


def _chunk_sizes(folder: Location):
    """A function: chunk key -> its size in bytes (FileNotFoundError when missing), from one listing of
    the array's files rather than a request per chunk."""
    sizes = location(folder).files()

    def size(key: str) -> int:
        if key not in sizes:
            raise FileNotFoundError(key)
        return sizes[key]
    return size


def _read(read) -> str | None:
    """None when ``read()`` succeeds, else what went wrong (a checksum, a decompression error)."""
    try:
        read()
    except Exception as err:  # noqa: BLE001 - every decoding failure of a chunk is damage
        text = str(err).splitlines()[0] if str(err) else ""
        if "checksum" in text.lower():
            return "corrupt (its crc32c checksum does not match)"
        return f"does not read ({type(err).__name__}{': ' + text[:120] if text else ''})"
    return None


def repair(path: Path, damage: Damage, store) -> list[str]:
    """Make a damaged store resumable (under ``apply``'s lock): write back from the manifest the
    metadata that differs from it, forget the records of the tasks whose chunks or record are
    damaged, remove record files that do not read and a corrupt manifest, and remove arrays whose
    metadata is corrupt and not in the manifest or that no task writes (the layout and the inputs
    are written again by ``apply``). ``path``: the store's files to repair (``store.root``: the next
    version when apply holds one). Returns the task ids forgotten."""
    root = location(path)
    unowned = set(damage.unowned)
    for name, meta in damage.altered.items():
        if name in unowned:
            continue
        if name == ROOT:
            try:
                current = json.loads((root / "zarr.json").read_bytes())
            except ValueError:  # corrupt: the manifest keeps what a reader depends on
                current = {"zarr_format": 3, "node_type": "group"}
            current = current if isinstance(current, dict) else {"zarr_format": 3, "node_type": "group"}
            current.pop("consolidated_metadata", None)  # apply consolidates again
            atomic_write_bytes(root / "zarr.json", json.dumps({**current, **meta}, indent=2).encode())
        else:
            atomic_write_bytes(root / name / "zarr.json", json.dumps(meta, indent=2).encode())
    for name in sorted((set(damage.broken) - set(damage.altered)) | unowned):
        remove_tree(root / name)
    if damage.manifest_bad:
        (store.state_dir / MANIFEST).unlink(missing_ok=True)
    drop_records(store.state_dir, [name[:-5] for name in damage.bad_records])
    for file in damage.kept:  # the runner's own, unusable: a later run computes what it held again
        file.unlink(missing_ok=True)
    store.forget(sorted(damage.redo))
    return sorted(damage.redo)


def rebind(path: Path, chunks: dict[str, dict], arrays: set[str]) -> dict[str, dict]:
    """A record's ``chunks`` with those of ``arrays`` (remade by ``apply``, which carried their values
    over) bound to the arrays as they are now: keys on the new chunk grid, digests of the new files."""
    import zarr  # lazy: zarr

    group = zarr.open_group(zarr_store(location(path), read_only=True), mode="r", use_consolidated=False)
    out = dict(chunks)
    for name in sorted(arrays & set(chunks)):
        entry = chunks[name]
        arr = _open(group, name)
        if isinstance(arr, str):
            continue
        grid = list(arr.chunks)
        keys = entry["keys"] if entry["grid"] == grid else _regrid(entry["keys"], entry["grid"], grid, arr.shape)
        digests = chunk_digests(location(path) / name, list(keys))
        out[name] = {"grid": grid, "keys": sorted(keys), ALGORITHM: {k: d for k, d in digests.items() if d}}
    return out


def spec_of(path: Path, target: Path | None = None) -> str:
    """The spec to name in advice: the one given, else the one the store's last run applied."""
    if target is not None and location(target).suffix == ".toml":
        return str(target)

    runs = [e for e in read_events(runner_dir(location(path)) / "events.jsonl") if e.get("event") == "run_started"]
    return str(runs[-1].get("spec", "SPEC")) if runs else "SPEC"


def trusted(path: Path, target: Path | None = None) -> Damage:
    """Refuse a store whose results must not be presented (``show``, ``figures``): raises
    :class:`StoreUnreadable` or :class:`StoreDamaged` with one message; else what was checked."""
    damage = verify(path)
    if not damage.results_ok:
        raise StoreDamaged(damage.summary(spec_of(path, target)) + "; nothing is shown from a damaged store")
    return damage


def mark_damaged(status: dict, damage: Damage, spec: str) -> dict:
    """``status`` (:func:`runner.read.status.load_status`) with the damaged tasks' state ``damaged``: never done."""
    for t in status["tasks"]:
        if t["id"] in damage.tasks:
            t.update(state="damaged", error="; ".join(damage.tasks[t["id"]][:2]))
    if not damage.ok:
        status.update(state="damaged", message=damage.summary(spec))
    return status


def render(damage: Damage) -> str:
    """What ``runner verify`` prints for one store."""
    checked = (f"{damage.chunks} recorded chunk(s) ({damage.bytes / 1e6:.1f} MB) of {len(damage.records)} finished "
               f"task(s) read back in {damage.seconds:.2f} s")
    lines = [f"store {damage.path}: {'ok' if damage.ok else 'damaged'}", checked]
    if not damage.covered and not damage.manifest_bad:
        lines.append(f"no manifest ({MANIFEST}, made before issue 36): its metadata, coordinates and inputs are not "
                     "covered (read only); the next apply that runs anything writes one")
    if damage.unchecked:
        lines.append(f"{len(damage.unchecked)} task(s) recorded by an older runner list no chunks: not checked")
    undigested = sum(1 for rec in damage.records.values() for e in (rec.get("chunks") or {}).values()
                     if ALGORITHM not in e)
    if undigested:
        lines.append(f"{undigested} recorded array(s) have no chunk digests (recorded before issue 36): their chunks "
                     "are checked by crc32c only")
    if not damage.ok:
        lines.append(f"{len(damage.problems)} problem(s):")
        lines += damage.lines(limit=50)
        if damage.version is not None:
            lines.append(f"damaged task(s) of this kept version ({len(damage.tasks)}; a version is never written, "
                         f"`{program()} apply` repairs only the store; `{program()} history --remove` removes it):")
            lines += [f"  {name}" for name in damage.task_names()]
            return "\n".join(lines)
        if damage.tasks:
            lines.append(f"damaged task(s) ({len(damage.tasks)}), {len(damage.redo)} recomputed by `runner apply`:")
            lines += [f"  {name}" for name in damage.task_names()]
        if damage.altered:
            lines.append("metadata written back from the manifest by `runner apply`: "
                         + ", ".join(a or "(root)" for a in damage.altered))
        if damage.unowned:
            lines.append(f"arrays apply writes itself, made again by `runner apply`: {', '.join(damage.unowned)}")
    return "\n".join(lines)


def to_json(damage: Damage) -> dict:
    return {"store": str(damage.path), "ok": damage.ok, "chunks_read": damage.chunks, "bytes_read": damage.bytes,
            "seconds": round(damage.seconds, 3), "unchecked_tasks": damage.unchecked, "covered": damage.covered,
            "damaged": [{"array": a, "chunk": k, "problem": what} for a, k, what in damage.problems],
            "damaged_tasks": {tid: damage.tasks[tid] for tid in sorted(damage.tasks)}, "recomputed_tasks": damage.redo,
            "remade_arrays": damage.unowned, "restored_metadata": sorted(a or "(root)" for a in damage.altered)}
