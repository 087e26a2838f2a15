"""Completion records: one JSON file per finished task, in the runner's folder beside the store.

``<store>.runner/records/<task id>.json`` says that a task finished and what it was: its measure,
label, network, checkpoint, the resolved values its id hashes (``key``, for ``plan`` to name what
changed), seconds, device and time, and the chunks it wrote (``chunks``: per array, its chunk
grid and the zarr keys of the chunks, ``c/0/3``, that :mod:`runner.storage.verify` reads back). Each file is written whole or not at all, and writing one
costs the same however many exist. A record belongs to one store (``store_id``): records of a
store that was removed and made again are not taken for the new one's. A finished task is known
only from its record, never inferred from the data.

On object storage (:mod:`runner.storage.location`) a record is one small object, written by one PUT, and
a journal line is its own object too (objects cannot be appended to). A GET per record would make
reading them all cost a request per task, so when an apply ends the records are *folded* into one
object, ``<store>.runner/records.folded.json``, and the objects folded are deleted: reading all
records is then one GET of the fold, one LIST per 1,000 records written since (each also fetched),
and nothing per folded record. The fold is written before the objects go, so a kill in between
leaves both, alike. Forgetting a record removes it from the fold and keeps the ETag of its object
there (``dropped``) until that object is gone: a record object whose ETag is dropped is not read,
whatever order a kill leaves things in; a task recorded again writes an object with another ETag.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from runner.storage.location import Location, append_line, location, write_atomic
from runner.storage.objects import Remote
from runner.storage.manifest import ALGORITHM, record_digest
from runner.storage.store_errors import writing

RECORDS = "records"
WRITTEN = "written"


FOLDED = "records.folded.json"


def records_dir(state_dir: Location) -> Location:
    return location(state_dir) / RECORDS


def make_records_dir(state_dir: Location) -> None:
    records_dir(state_dir).mark_folder()


def records_exist(state_dir: Location) -> bool:
    return records_dir(state_dir).folder_marked()


def read_records(state_dir: Location, store_id: str | None) -> dict[str, dict]:
    """The records of the store ``store_id`` (none when the store has no id: it does not exist)."""
    folder = records_dir(state_dir)
    if store_id is None:
        return {}
    if isinstance(folder, Remote):
        return _read_remote(location(state_dir), store_id)[0]
    if folder.is_dir():
        contents = []
        for entry in os.scandir(folder):
            if not entry.name.endswith(".json") or entry.name.startswith("."):
                continue
            try:
                contents.append((entry.name, Path(entry.path).read_bytes()))
            except OSError:  # removed meanwhile
                continue
    else:
        return {}
    return {name[:-5]: rec for name, data in contents if (rec := _record(data, store_id)) is not None}


def unreadable_records(state_dir: Location) -> dict[str, str]:
    """Record files (``<task id>.json``) that do not read as a record of any store, with why (on a
    disk; on object storage a record is one PUT, written whole)."""
    folder = records_dir(state_dir)
    if isinstance(folder, Remote) or not folder.is_dir():
        return {}
    out = {}
    for entry in os.scandir(folder):
        if not entry.name.endswith(".json") or entry.name.startswith("."):
            continue
        try:
            rec = json.loads(Path(entry.path).read_bytes())
        except OSError:
            continue
        except ValueError as err:
            out[entry.name] = f"corrupt (not JSON: {type(err).__name__})"
            continue
        if not isinstance(rec, dict) or "store_id" not in rec:
            out[entry.name] = "corrupt (not a completion record)"
    return out


def _record(data: bytes, store_id: str) -> dict | None:
    """The record in ``data`` if it is one of the store ``store_id`` (a record is written whole:
    anything else is not ours)."""
    try:
        rec = json.loads(data)
    except ValueError:
        return None
    return rec if _ours(rec, store_id) else None


def _ours(rec: Any, store_id: str) -> bool:
    return isinstance(rec, dict) and rec.get("store_id") == store_id


def _listed(folder: Remote) -> dict[str, str]:
    """Record objects under ``folder``: task id -> ETag."""
    try:
        found = folder.fs.ls(folder.key, detail=True)
    except FileNotFoundError:
        return {}
    out = {}
    for entry in found:
        name = entry["name"].rsplit("/", 1)[-1]
        if entry.get("type") != "directory" and name.endswith(".json") and not name.startswith("."):
            out[name[:-5]] = str(entry.get("ETag") or entry.get("etag") or "")
    return out


def _read_fold(state_dir: Remote) -> dict:
    try:
        fold = json.loads((state_dir / FOLDED).read_bytes())
    except (FileNotFoundError, ValueError):
        return {"records": {}, "dropped": {}}
    return fold if isinstance(fold, dict) else {"records": {}, "dropped": {}}


def _read_remote(state_dir: Remote, store_id: str, known: dict[str, dict] | None = None
                 ) -> tuple[dict[str, dict], dict[str, str], dict]:
    """(records, listed objects: task id -> ETag, the fold). Listed first, then the fold: a fold
    written meanwhile holds every record whose object the listing saw and a later delete removed.
    ``known``: records this process wrote (under the lock), not fetched again."""
    folder = records_dir(state_dir)
    listed = _listed(folder)
    fold = _read_fold(state_dir)
    dropped = fold.get("dropped") or {}
    known = known or {}
    live = [tid for tid, etag in listed.items() if dropped.get(tid) != etag]
    wanted = [folder / f"{tid}.json" for tid in live if tid not in known]
    out = {tid: rec for tid, rec in (fold.get("records") or {}).items() if _ours(rec, store_id)}
    out.update({tid: known[tid] for tid in live if tid in known})
    for path, data in folder.read_many(wanted).items():
        if (rec := _record(data, store_id)) is not None:
            out[path.name[:-5]] = rec
    return out, listed, fold


def fold_records(state_dir: Location, store_id: str, known: dict[str, dict] | None = None) -> None:
    """On object storage: fold the records into one object and delete the objects folded (under the
    lock, when an apply ends; ``known``: the records this apply wrote, as written, so that only
    objects it did not write are fetched); nothing on a disk."""
    state_dir = location(state_dir)
    if not isinstance(state_dir, Remote):
        return
    records, listed, fold = _read_remote(state_dir, store_id, known)
    if not listed:
        return
    dropped = {tid: etag for tid, etag in (fold.get("dropped") or {}).items() if listed.get(tid) == etag}
    _write_fold(state_dir, records, dropped)
    folder = records_dir(state_dir)
    gone = [f"{folder.key}/{tid}.json" for tid in listed if tid not in dropped]
    if gone:
        folder.fs.rm(gone)
    if dropped:  # their objects after the fold that keeps them dropped: then the tombstones can go
        folder.fs.rm([f"{folder.key}/{tid}.json" for tid in dropped])
        _write_fold(state_dir, records, {})


def _write_fold(state_dir: Remote, records: dict[str, dict], dropped: dict[str, str]) -> None:
    """The fold: every record, and the ETags of record objects it drops (not yet deleted)."""
    (state_dir / FOLDED).write_bytes(json.dumps({"records": records, "dropped": dropped}, sort_keys=True,
                                                default=str).encode())


def write_records(state_dir: Location, store_id: str, records: dict[str, dict]) -> dict[str, dict]:
    """Write each record (one file or object per task); returns them as written (as JSON reads them back)."""
    out = {}
    for task_id, rec in records.items():
        rec = json.loads(json.dumps({**rec, "store_id": store_id}, default=str))  # as JSON reads it back
        data = json.dumps({**rec, "digest": record_digest(rec)}, sort_keys=True)
        write_atomic(records_dir(state_dir) / f"{task_id}.json", data.encode())
        out[task_id] = json.loads(data)
    return out


def drop_records(state_dir: Location, task_ids: list[str]) -> None:
    folder = records_dir(state_dir)
    with writing(folder):
        if isinstance(folder, Remote) and task_ids:
            state = location(state_dir)
            fold, listed = _read_fold(state), _listed(folder)
            forgotten = set(task_ids)
            if forgotten & (set(fold.get("records") or {}) | set(listed)):
                # the fold first, with the ETags of the objects to go: read_records skips those objects
                dropped = {**(fold.get("dropped") or {}), **{t: listed[t] for t in forgotten if t in listed}}
                kept = {t: r for t, r in (fold.get("records") or {}).items() if t not in forgotten}
                _write_fold(state, kept, dropped)
        for task_id in task_ids:
            (folder / f"{task_id}.json").unlink(missing_ok=True)


# --- which chunks a task wrote
#
# While a group of tasks runs, every region it writes is turned into the keys of the chunks it
# touches (from the region and the array's chunk grid) and appended to a journal file beside the
# store, ``<store>.runner/written/<group>-<pid>.jsonl``. A group that was stopped and resumed
# keeps the chunks its first run wrote. When the group finishes, its journal goes into the records
# of its tasks (:func:`attribute`) and is removed.


def group_key(task_ids: Iterable[str]) -> str:
    return hashlib.sha256("/".join(sorted(task_ids)).encode()).hexdigest()[:16]


def journal_file(state_dir: Location, task_ids: Iterable[str]) -> Location:
    """This process's journal of the chunks the group ``task_ids`` writes."""
    return location(state_dir) / WRITTEN / f"{group_key(task_ids)}-{os.getpid()}.jsonl"


def chunk_coords(shape: tuple[int, ...], chunks: tuple[int, ...], region: Any) -> list[tuple[int, ...]]:
    """Grid coordinates of every chunk that writing ``array[region]`` touches (ints, slices and
    integer arrays per axis; missing trailing axes and ``...`` mean whole axes)."""
    region = region if isinstance(region, tuple) else (region,)
    if any(r is Ellipsis for r in region):
        i = next(i for i, r in enumerate(region) if r is Ellipsis)
        region = region[:i] + (slice(None),) * (len(shape) - len(region) + 1) + region[i + 1:]
    per_axis = []
    for axis, (n, c) in enumerate(zip(shape, chunks, strict=True)):
        sel = region[axis] if axis < len(region) else slice(None)
        if isinstance(sel, slice):
            indices: Iterable[int] = range(*sel.indices(n))
            start, stop, step = sel.indices(n)
            if step == 1:  # the common case, without walking every index
                per_axis.append(range(start // c, (stop - 1) // c + 1) if stop > start else range(0))
                continue
        else:
            indices = [int(i) for i in (sel.ravel() if hasattr(sel, "ravel") else [sel])]
        per_axis.append(sorted({(i + n if i < 0 else i) // c for i in indices}))
    return list(itertools.product(*per_axis))


def encode_key(coords: tuple[int, ...]) -> str:
    """zarr v3's default chunk key (``c/0/3``; ``c`` for a 0-d array), the file under the array's folder."""
    return "/".join(["c", *map(str, coords)])


def decode_key(key: str) -> tuple[int, ...]:
    return tuple(int(x) for x in key.split("/")[1:])


def note_written(journal: Location, name: str, array, region: Any) -> None:
    """Append the chunks ``array[region]`` touched (``array``: the zarr array ``name``) to ``journal``
    (on object storage: a new object beside it, :func:`runner.storage.location.append_line`)."""
    keys = [encode_key(c) for c in chunk_coords(array.shape, array.chunks, region)]
    append_line(journal, (json.dumps({"array": name, "grid": list(array.chunks), "keys": keys}) + "\n").encode())


def _journals(state_dir: Location, task_ids: Iterable[str]) -> list:
    folder = location(state_dir) / WRITTEN
    return sorted(folder.glob(f"{group_key(task_ids)}-*.jsonl"), key=str)


def read_written(state_dir: Location, task_ids: Iterable[str]) -> dict[str, dict]:
    """The chunks the group ``task_ids`` wrote, from every journal of it: array -> grid and keys."""
    out: dict[str, dict] = {}
    paths = _journals(state_dir, task_ids)
    texts = location(state_dir).read_many(paths)
    for path in paths:
        text = texts.get(path, b"").decode()
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:  # a line cut short by a kill: its write is redone on resume
                continue
            seen = out.setdefault(entry["array"], {"grid": entry["grid"], "keys": set()})
            if seen["grid"] != entry["grid"]:  # the array was remade meanwhile: only its new chunks count
                seen.update(grid=entry["grid"], keys=set())
            seen["keys"].update(entry["keys"])
    return out


def forget_written(state_dir: Location, task_ids: Iterable[str]) -> None:
    for path in _journals(state_dir, task_ids):
        path.unlink(missing_ok=True)


def attribute(tasks: list, written: dict[str, dict], measure_of: dict[str, str]) -> dict[str, dict]:
    """The chunks of ``written`` that each task of a group wrote: those of the arrays of its
    measure (``measure_of``: array -> the measure whose tasks write it), of the arrays every task
    of a pass writes (``*``), and of arrays no task of the group is named for (each task, to be safe)."""
    measures = {t.measure for t in tasks}
    out = {}
    for t in tasks:
        out[t.id] = {name: {"grid": w["grid"], "keys": sorted(w["keys"])} for name, w in sorted(written.items())
                     if measure_of.get(name) in (t.measure, "*") or measure_of.get(name) not in measures}
    return out


def as_bound(rec: dict, layout_id: str | None) -> dict:
    """A completion record as it binds the store version ``layout_id``: as written, or, while the
    store is still the version before a switch (under way, or cut short by a kill), with the network
    and chunks of its ``previous`` binding (what :func:`runner.storage.verify.rebind` moved them from)."""
    before = rec.get("previous")
    if isinstance(before, dict) and rec.get("layout_id") != layout_id and before.get("layout_id") == layout_id:
        return {**{k: v for k, v in rec.items() if k not in ("previous", "layout_id")},
                "network": before.get("network"), "chunks": before.get("chunks") or {}}
    return rec


def renumber_chunks(chunks: dict[str, dict], dims_of: dict[str, tuple[str, ...]], old: int, new: int) -> dict:
    """``chunks`` of a record whose network moved from index ``old`` to ``new`` (one network per
    chunk: its chunk index along ``network`` is the network's index)."""
    out = {}
    for name, entry in chunks.items():
        dims = tuple(dims_of.get(name, ()))
        if "network" not in dims:
            out[name] = entry
            continue
        axis = dims.index("network")
        keys = [decode_key(k) for k in entry["keys"]]
        moved = {encode_key(k): encode_key(k[:axis] + ((new if k[axis] == old else k[axis]),) + k[axis + 1:])
                 for k in keys}
        out[name] = {**entry, "keys": sorted(moved.values())}
        if ALGORITHM in entry:  # the same bytes at the new place (taken again from the files by apply)
            out[name][ALGORITHM] = {moved.get(k, k): d for k, d in entry[ALGORITHM].items()}
    return out
