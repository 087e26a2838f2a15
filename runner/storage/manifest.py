"""The manifest: every byte of a finished store bound to its place (issue 36).

A chunk's crc32c (:func:`runner.storage.store.chunk_codecs`) proves its bytes are intact, not that
they are the right chunk: two chunks of one array swapped both pass it. So the runner also keeps,
beside the store, what each place must hold:

- a finished task's record lists, per chunk it wrote, the chunk's key and the BLAKE2b digest of
  the chunk file's bytes (``chunks[array]["blake2b"]``: key -> digest, :func:`chunk_digests`), taken
  when the task is recorded; and the record carries the digest of its own content (``digest``,
  :func:`record_digest`), so an edited record is found too;
- ``<store>.runner/manifest.json`` (:func:`seal`, written by the one writer, ``apply``, whenever it
  writes metadata or arrays of its own): the content of every array's ``zarr.json`` (shape, data
  type, chunk grid, fill value, codecs, dimension names, attributes), the root's attributes, and
  the digest of every chunk of the arrays ``apply`` writes itself (coordinates, inputs).

:mod:`runner.storage.verify` compares the store with both and names what differs (the chunk key,
or the metadata key: ``fill_value is 0.0, the manifest says NaN``); ``apply`` writes an altered
``zarr.json`` back from the manifest and recomputes only the tasks whose chunks differ. A kept
version (:mod:`runner.storage.history`) carries the records and this manifest, so it is checked the
same way. A store without a manifest (made before it) is read as "not covered": verify says so.
"""

from __future__ import annotations

import json
from typing import Any

from runner.core.layout import internal
from runner.storage.digest import bytes_digests, digest
from runner.storage.location import Location, location, write_atomic

MANIFEST = "manifest.json"
NEXT = "manifest.next.json"
"""The manifest of the version being switched in (:meth:`runner.storage.store.Store.transaction`)."""
FORMAT = 1
ALGORITHM = "blake2b"
ROOT = ""
"""The manifest's name of the root group."""

ARRAY_KEYS = ("node_type", "shape", "data_type", "chunk_grid", "chunk_key_encoding", "fill_value", "codecs",
              "dimension_names", "attributes", "storage_transformers", "zarr_format")
"""The entries of an array's ``zarr.json`` a reader depends on: all of them."""


class ManifestCorrupt(ValueError):
    """The manifest file is there but does not read (not JSON, or its digest does not match)."""


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()


def record_digest(rec: dict) -> str:
    """The digest of a record's or a manifest's content (everything but the digest itself)."""
    return digest(_canonical({k: v for k, v in rec.items() if k != "digest"}))


def chunk_digests(folder: Location, keys: list[str], recorded: dict[str, str] | None = None) -> dict[str, str | None]:
    """Chunk key -> the digest of its file under the array folder ``folder`` (None: no such file), as
    the folder's kind of storage gives it (:meth:`~runner.storage.location.StoreLocation.digests`:
    BLAKE2b of the bytes on a disk, the object's ETag from one listing on object storage). Where a
    ``recorded`` digest is of the other form (a store copied from a disk to a bucket), the file is
    read and digested as it was."""
    folder = location(folder)
    found = folder.digests(keys)
    other = [k for k in keys if found.get(k) and (recorded or {}).get(k)
             and is_etag(found[k]) != is_etag(recorded[k])]
    return {**found, **bytes_digests(folder, other)} if other else found


ETAG = "etag:"
"""The form of a digest taken from an object store's listing (``etag:<ETag>``), not from the bytes."""


def is_etag(value: str) -> bool:
    return value.startswith(ETAG)


def chunk_keys(folder: Location) -> list[str]:
    """The keys of every chunk file of the array at ``folder`` (``c/0/3``; ``c`` for a 0-d array); one listing."""
    return sorted(k for k in location(folder).files()
                  if (k == "c" or k.startswith("c/")) and not k.rsplit("/", 1)[-1].startswith("."))


def normalized(meta: Any, root: bool = False) -> dict:
    """What of a ``zarr.json`` the manifest binds: an array's every entry a reader depends on; the
    root's attributes (its consolidated metadata is a copy, checked against the arrays' entries)."""
    if not isinstance(meta, dict):
        return {}
    if root:
        return {"attributes": meta.get("attributes") or {}}
    return {k: meta[k] for k in ARRAY_KEYS if k in meta}


def differences(found: dict, recorded: dict, prefix: str = "") -> list[str]:
    """The keys in which ``found`` differs from ``recorded`` (both :func:`normalized`), each named with
    both values, as ``fill_value is 0.0, the manifest says NaN``."""
    out = []
    for key in sorted(set(found) | set(recorded), key=str):
        a, b = found.get(key, _ABSENT), recorded.get(key, _ABSENT)
        if _canonical(a) == _canonical(b):
            continue
        name = f"{prefix}{key}"
        if isinstance(a, dict) and isinstance(b, dict):
            out += differences(a, b, name + ".")
        elif a is _ABSENT:
            out.append(f"{name} is missing, the manifest says {_short(b)}")
        elif b is _ABSENT:
            out.append(f"{name} is {_short(a)}, which the manifest does not have")
        else:
            out.append(f"{name} is {_short(a)}, the manifest says {_short(b)}")
    return out


_ABSENT = object()


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def array_nodes(path: Location, prefix: str = ""):
    """(name, zarr.json, its parsed content or None) of every array under the group at ``path``; stops
    at nested stores (sweep points)."""
    entries = location(path).entries()
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
                yield from array_nodes(folder, prefix + folder.name + "/")
        else:
            yield prefix + folder.name, meta, node


def read_manifest(state_dir: Location, store_id: str | None, layout_id: str | None = None,
                  name: str = MANIFEST) -> dict | None:
    """The manifest of the store ``store_id`` (None when there is none, or it is another store's:
    not covered); :class:`ManifestCorrupt` when it is there but does not read. ``layout_id``: the
    store's (its root's runner attribute); when the manifest is of another version and the next
    manifest (:data:`NEXT`) is of this one, a switch was under way or cut short by a kill: the next
    one is the store's."""
    path = location(state_dir) / name
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        found = None
    else:
        found = check_manifest(data, store_id)
    if name == MANIFEST and layout_id is not None and (found is None or found.get("layout_id") != layout_id):
        try:
            nxt = read_manifest(state_dir, store_id, name=NEXT)
        except ManifestCorrupt:
            nxt = None
        if nxt is not None and nxt.get("layout_id") == layout_id:
            return nxt
        if (found is None or nxt is None) and path.exists():  # the next one renamed into place meanwhile:
            return read_manifest(state_dir, store_id, name=MANIFEST)  # it is the store's now
    return found


def read_any_manifest(state_dir: Location) -> dict | None:
    """The manifest in ``state_dir`` whose digest holds, whichever store it names (None: none, or corrupt):
    what a corrupt root is repaired from, and how a runner folder copied from another store is told."""
    try:
        return check_manifest((location(state_dir) / MANIFEST).read_bytes(), None, any_store=True)
    except (OSError, ManifestCorrupt):
        return None


def check_manifest(data: bytes | dict, store_id: str | None, any_store: bool = False) -> dict | None:
    """A manifest as read (bytes, or a dict a version keeps), checked: see :func:`read_manifest`
    (``any_store``: whichever store it names)."""
    try:
        found = json.loads(data) if isinstance(data, bytes | bytearray) else data
    except ValueError as err:
        raise ManifestCorrupt(f"not JSON: {type(err).__name__}") from None
    if not isinstance(found, dict) or not isinstance(found.get("metadata"), dict) or \
            not isinstance(found.get("chunks"), dict):
        raise ManifestCorrupt("not a manifest")
    if found.get("digest") != record_digest(found):
        raise ManifestCorrupt("its digest does not match its content")
    return found if any_store or found.get("store_id") == store_id else None


def build(store_id: str, metadata: dict[str, dict], chunks: dict[str, dict[str, str]],
          records: dict[str, dict] | None = None, layout_id: str | None = None) -> dict:
    """A manifest: ``metadata`` (array name, or ``""`` for the root -> its ``zarr.json`` as parsed),
    ``chunks`` (array -> chunk key -> digest, for the arrays ``apply`` writes itself), ``records``
    (the finished tasks' ids -> their record's digest, network and label: a record listed here and
    gone is damage, not a task still to run) and the ``layout_id`` of the version it describes."""
    out = {"format": FORMAT, "algorithm": ALGORITHM, "store_id": store_id, "metadata": metadata, "chunks": chunks,
           **({"records": records} if records is not None else {}),
           **({"layout_id": layout_id} if layout_id is not None else {})}
    return {**out, "digest": record_digest(out)}


def write_manifest(state_dir: Location, manifest: dict, name: str = MANIFEST) -> None:
    write_atomic(location(state_dir) / name, json.dumps(manifest, sort_keys=True, default=str).encode())


def unlist(state_dir: Location, name: str, task_ids: list[str]) -> None:
    """Take ``task_ids`` off the list of finished tasks of the manifest file ``name`` (before their
    records go: a record forgotten by ``apply`` is not damage)."""
    path = location(state_dir) / name
    try:
        found = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return
    listed = found.get("records") if isinstance(found, dict) else None
    if not isinstance(listed, dict) or not set(task_ids) & set(listed) or found.get("digest") != record_digest(found):
        return
    kept = {k: v for k, v in found.items() if k != "digest"}
    kept["records"] = {tid: d for tid, d in listed.items() if tid not in set(task_ids)}
    write_manifest(state_dir, {**kept, "digest": record_digest(kept)}, name)
