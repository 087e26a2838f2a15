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
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from runner.core.errors import StorageError, Unavailable
from runner.core.layout import internal
from runner.storage.events import read_events
from runner.storage.location import Location, Remote, location, remove_tree, zarr_store
from runner.storage.records import chunk_coords, decode_key, encode_key
from runner.storage.store import read_tasks, runner_dir, store_id

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
    chunks: int = 0
    bytes: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

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
        chunks = [(a, k) for a, k, _ in self.problems if k != "zarr.json"]
        parts = [f"{len(chunks)} chunk(s) of {', '.join(sorted({a for a, _ in chunks}))} are missing, truncated or "
                 "corrupt"] if chunks else []
        parts += [f"the metadata (zarr.json) of {', '.join(self.broken)} is corrupt"] if self.broken else []
        text = f"{self.path} is damaged: " + " and ".join(parts)
        if names:
            text += f"; they belong to {len(names)} finished task(s): {shown}"
        if self.unowned:
            text += f"; arrays apply writes itself: {', '.join(self.unowned)}"
        return text + f". Run `runner apply {spec or 'SPEC'}` to recompute them (`runner verify` lists the chunks)"


def metadata_problem(path: Path) -> str | None:
    """Why ``path`` is not a store of this project whose metadata reads (one line), or None."""
    path = location(path)
    root = path / "zarr.json"
    if not root.is_file():
        return f"{path} is not a zarr store (no zarr.json)"
    problem = _json_problem(root)
    if problem:
        return f"{path}: its metadata {root} is corrupt ({problem}); the runner cannot read this store"
    if store_id(path) is None:
        return (f"{path} is a zarr store this project did not write (it has no runner attributes); "
                "open it with xarray (xr.open_zarr)")
    return None


def array_metadata_problems(path: Path) -> dict[str, str]:
    """Array name -> why its ``zarr.json`` does not read (arrays of the root group and its sub-groups)."""
    out = {}
    for name, meta, _node in _nodes(location(path)):
        problem = _json_problem(meta)
        if problem:
            out[name] = f"metadata {meta} is corrupt ({problem})"
    return out


def _nodes(path: Path, prefix: str = ""):
    """(name, zarr.json, its parsed content or None) of every array under the group at ``path``; stops
    at nested stores (sweep points)."""
    if isinstance(path, Remote):
        try:
            listed = path.fs.ls(path.key, detail=True)
        except OSError:
            return
        entries = sorted(((path / e["name"].rstrip("/").rsplit("/", 1)[-1], e["type"] == "directory") for e in listed),
                         key=lambda e: e[0].name)
    else:
        try:
            entries = sorted(((Path(e.path), e.is_dir()) for e in os.scandir(path)), key=lambda e: e[0].name)
        except OSError:
            return
    for folder, is_dir in entries:
        meta = folder / "zarr.json"
        if not is_dir or not meta.is_file():
            continue
        try:
            node = json.loads(meta.read_bytes())
        except ValueError:
            yield prefix + folder.name, meta, None
            continue
        if isinstance(node, dict) and node.get("node_type") == "group":
            if internal(node.get("attributes") or {}).get("store_id") is None:  # a sub-group, not a point's store
                yield from _nodes(folder, prefix + folder.name + "/")
        else:
            yield prefix + folder.name, meta, node


def _json_problem(path: Path) -> str | None:
    try:
        node = json.loads(path.read_bytes())
    except OSError as err:
        return err.strerror or str(err)
    except ValueError as err:  # UnicodeDecodeError included
        return f"not JSON: {type(err).__name__}"
    return None if isinstance(node, dict) else "not a JSON object"


def verify(path: Path, quick: bool = False) -> Damage:
    """Check one store (not a sweep's root): raises :class:`StoreUnreadable` for a store this project
    did not write or whose root metadata is corrupt; otherwise returns what is damaged. ``quick``:
    only that each recorded chunk file is there and not empty (no read: what ``plan`` checks)."""
    import zarr  # lazy: zarr

    path = location(path)
    problem = metadata_problem(path)
    if problem:
        raise StoreUnreadable(problem)
    t0 = time.monotonic()
    damage = Damage(path, records=read_tasks(path))
    owners: dict[str, dict[str, set[str]]] = {}  # array -> chunk key -> task ids
    grids: dict[str, list[int]] = {}
    for tid, rec in damage.records.items():
        if "chunks" not in rec:
            damage.unchecked.append(tid)
            continue
        for name, entry in rec["chunks"].items():
            grids.setdefault(name, entry["grid"])
            for key in _keys(entry, grids[name]):
                owners.setdefault(name, {}).setdefault(key, set()).add(tid)
    nodes = {name: node for name, _, node in _nodes(path)}
    bad_meta = array_metadata_problems(path)
    damage.broken = sorted(bad_meta)
    group = zarr.open_group(zarr_store(path, read_only=True), mode="r", use_consolidated=False)
    for name, what in bad_meta.items():
        damage.problems.append((name, "zarr.json", what))
    for name in sorted(set(owners) - set(bad_meta)):
        for key, what in _check_array(path, group, name, owners[name], grids[name], damage, quick):
            damage.problems.append((name, key, what))
    # arrays no record lists: coordinates and inputs (apply writes them), or results of records made
    # before chunks were listed (those records' tasks own them); small, read whole
    by_measure: dict[str, set[str]] = {}
    for tid, rec in damage.records.items():
        by_measure.setdefault(str(rec.get("measure")), set()).add(tid)
    for name in [] if quick else sorted(set(nodes) - set(owners) - set(bad_meta)):
        what = _read(lambda n=name: group[n][...])
        if what:
            damage.problems.append((name, "(array)", what))
    for name, key, what in damage.problems:
        if name in bad_meta:  # its measure is unknown: records that list no chunks may own it too
            tids = _owners_of(damage.records, name) | set(damage.unchecked)
        elif key == "(array)":
            measure = internal((nodes.get(name) or {}).get("attributes")).get("measure")
            tids = set().union(*by_measure.values()) if measure == "*" else by_measure.get(str(measure), set())
        else:
            tids = owners[name][key]
        for tid in tids:
            damage.tasks.setdefault(tid, []).append(f"{name} {key}: {what}")
        if not tids and name not in damage.unowned:
            damage.unowned.append(name)
    damage.seconds = time.monotonic() - t0
    return damage


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


def _check_array(path: Path, group, name: str, keys: dict[str, set[str]], grid: list[int], damage: Damage,
                 quick: bool = False):
    """(key, what) of each recorded chunk of array ``name`` that is missing or does not read."""
    try:
        arr = group[name]
    except KeyError:
        return [(key, "missing (the whole array is gone)") for key in sorted(keys)]
    except Exception as err:  # noqa: BLE001 - any failure to open it is damage to report
        return [(key, f"array does not open ({type(err).__name__}: {err})") for key in sorted(keys)]
    if list(arr.chunks) != list(grid):  # remade with another chunking since: the same elements, new keys
        keys = {new: tids for key, tids in keys.items() for new in _regrid([key], grid, list(arr.chunks), arr.shape)}
    folder = path / name
    sizes = _chunk_sizes(folder)
    found, present = [], []
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
    if not present or quick:
        return found
    if len(present) == arr.nchunks and arr.nbytes <= WHOLE_READ_BYTES and _read(lambda: arr[...]) is None:
        return found
    for key in present:
        what = _read(lambda k=key: arr.get_block_selection(decode_key(k)))
        if what:
            found.append((key, what))
    return found


def _chunk_sizes(folder: Location):
    """A function: chunk key -> its size in bytes (FileNotFoundError when missing); on object storage
    one listing of the array's chunks rather than a request per chunk."""
    if isinstance(folder, Remote):
        try:
            found = folder.fs.find(f"{folder.key}/c", detail=True)
        except FileNotFoundError:
            found = {}
        sizes = {k[len(folder.key) + 1:]: int(v.get("size") or 0) for k, v in found.items()}

        def remote(key: str) -> int:
            if key not in sizes:
                raise FileNotFoundError(key)
            return sizes[key]
        return remote
    return lambda key: os.stat(folder / key).st_size


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
    """Make a damaged store resumable (under ``apply``'s lock): forget the records of the tasks whose
    chunks are damaged, and remove arrays whose metadata is corrupt or that no task writes (the
    layout and the inputs are written again by ``apply``). Returns the task ids forgotten."""
    for name in sorted(set(damage.broken) | set(damage.unowned)):
        remove_tree(location(path) / name)
    store.forget(sorted(damage.tasks))
    return sorted(damage.tasks)


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
    if not damage.ok:
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
    if damage.unchecked:
        lines.append(f"{len(damage.unchecked)} task(s) recorded by an older runner list no chunks: not checked")
    if not damage.ok:
        lines.append(f"{len(damage.problems)} damaged chunk(s):")
        lines += damage.lines(limit=50)
        lines.append(f"damaged task(s) ({len(damage.tasks)}), recomputed by `runner apply`:")
        lines += [f"  {name}" for name in damage.task_names()]
        if damage.unowned:
            lines.append(f"arrays apply writes itself, made again by `runner apply`: {', '.join(damage.unowned)}")
    return "\n".join(lines)


def to_json(damage: Damage) -> dict:
    return {"store": str(damage.path), "ok": damage.ok, "chunks_read": damage.chunks, "bytes_read": damage.bytes,
            "seconds": round(damage.seconds, 3), "unchecked_tasks": damage.unchecked,
            "damaged": [{"array": a, "chunk": k, "problem": what} for a, k, what in damage.problems],
            "damaged_tasks": {tid: damage.tasks[tid] for tid in sorted(damage.tasks)}, "remade_arrays": damage.unowned}
