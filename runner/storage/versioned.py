"""A store on object storage as versions that share what did not change (issue 51): a versioned
pointer object names the store's version, and a version is a map from each zarr key to the
immutable object that holds it.

S3 has no rename, so a version cannot be switched in by exchanging folders as on a disk. Under the
store's URL ``s3://bucket/path/name.zarr``:

- ``.head.json`` names the store's version (``{"version": ID}``). Switching versions is one
  conditional PUT of it (``If-Match`` the ETag it had when the next version was begun; the first
  with ``If-None-Match: *``), atomic on S3: a reader that reads the head sees the old version or
  the new one, and a writer whose lease was taken over cannot switch.
- ``.versions/<ID>.json`` is a version's record: the version it was begun from and, frozen then,
  every key it inherits with the version whose object holds it.
- ``.objects/<ID>/<key>`` are the objects written in version ID; ``.deleted/<ID>/<key>`` (empty)
  marks a key it inherited and deleted. A version's map is its inherited keys, less those deleted,
  with its own objects over them (one listing of its prefix); a key written in place in the head's
  version (a task's chunk while a run adds to a store) is a new object of that version's own.
- ``.kept/<ID>`` marks a version the store's history keeps (``runner history``).

So a next version (a replace, a drop, an extension, a repair) costs one record and the objects it
writes; every other chunk stays where it is and is shared. A kill anywhere leaves the head naming a
whole version; the next apply continues the held version or collects it (:func:`collect`: every
object no live version maps, once no version names it). A reader opens the head's version and reads
only its objects (:class:`KeyMapStore`). The version before the head's is kept until the next
switch, so that a reader that opened it just before a switch reads it whole; one collected since
(two switches later, and not kept) raises :class:`runner.storage.pinned.VersionSwitched`, never a
fill value. The readers' rule on
object storage is therefore: open through the runner (``runner.api.open(URL)``, or ``xr.open_zarr(
runner.storage.location.zarr_store(URL, read_only=True))``); a plain ``xr.open_zarr(URL)`` finds no
group there. A store written in place by an earlier runner (its ``zarr.json`` at the URL itself, no
head) is read as the version ``""`` whose objects are the URL's own keys, and its next version
shares them.
"""

from __future__ import annotations

import fnmatch
import json
import uuid
from collections.abc import AsyncIterator, Iterable
from typing import Any

from runner.storage.objects import Remote, storage_options

HEAD = ".head.json"
RECORDS = ".versions"
OBJECTS = ".objects"
DELETED = ".deleted"
KEPT = ".kept"
RESERVED = (HEAD, RECORDS, OBJECTS, DELETED, KEPT)
LEGACY = ""
"""The version of a store written in place by an earlier runner: its objects are the URL's own keys."""


class VersionMap:
    """The map of one version of the store whose key is ``store``: zarr key -> the version holding its object."""

    def __init__(self, store: str, version: str, inherited: dict[str, str], own: dict[str, int],
                 deleted: set[str], parent: str | None = None):
        self.store, self.version, self.parent = store, version, parent
        self.inherited, self.own, self.deleted = inherited, own, deleted

    def owner(self, key: str) -> str | None:
        if key in self.own:
            return self.version
        if key in self.deleted:
            return None
        return self.inherited.get(key)

    def keys(self) -> dict[str, str]:
        """Every key of the version -> the version whose object holds it."""
        out = {k: v for k, v in self.inherited.items() if k not in self.deleted}
        out.update(dict.fromkeys(self.own, self.version))
        return out

    def object_key(self, key: str, owner: str | None = None) -> str:
        """The object (its full key) holding ``key`` for ``owner`` (this version's own by default)."""
        owner = self.version if owner is None else owner
        return f"{self.store}/{key}" if owner == LEGACY else f"{self.store}/{OBJECTS}/{owner}/{key}"


def _listing(fs, prefix: str) -> dict[str, dict]:
    """Key under ``prefix`` -> its listing entry: one LIST (asked of the parent with the name as its
    prefix, so that an empty one is not followed by a request asking whether ``prefix`` is a file).
    A folder marker (a key ending in ``/``, as a console makes) is no object of a store."""
    parent, _, name = prefix.rpartition("/")
    try:
        found = fs.find(parent, prefix=f"{name}/", detail=True)
    except FileNotFoundError:
        return {}
    return {k[len(prefix) + 1:]: v for k, v in found.items() if k.startswith(prefix + "/") and not k.endswith("/")}


def read_head(fs, store: str, etag: bool = False) -> tuple[str | None, str | None]:
    """(the version the head names, with ``etag`` its ETag: one more request, asked by a switch only);
    (``""``, None) for a store written in place by an earlier runner; (None, None) where there is no store."""
    try:
        tag = str(fs.info(f"{store}/{HEAD}").get("ETag") or "") if etag else None
        return str(json.loads(fs.cat_file(f"{store}/{HEAD}"))["version"]), tag
    except FileNotFoundError:
        return (LEGACY, None) if fs.exists(f"{store}/zarr.json") else (None, None)


def load(fs, store: str, version: str) -> VersionMap:
    """The map of ``version`` (its record, a listing of its objects and one of its deletions)."""
    if version == LEGACY:
        own = {k: int(v.get("size") or 0) for k, v in _listing(fs, store).items()
               if k.split("/", 1)[0] not in RESERVED}
        return VersionMap(store, LEGACY, {}, own, set())
    try:
        record = json.loads(fs.cat_file(f"{store}/{RECORDS}/{version}.json"))
    except FileNotFoundError:
        record = {}
    own = {k: int(v.get("size") or 0) for k, v in _listing(fs, f"{store}/{OBJECTS}/{version}").items()}
    deleted = set(_listing(fs, f"{store}/{DELETED}/{version}"))
    return VersionMap(store, version, dict(record.get("inherited") or {}), own, deleted, record.get("parent"))


def begin(fs, store: str, version: str, parent: VersionMap | None) -> VersionMap:
    """Write the record of a new version begun from ``parent`` (None: an empty store's first)."""
    inherited = parent.keys() if parent is not None else {}
    record = {"parent": parent.version if parent is not None else None, "inherited": inherited}
    fs.pipe_file(f"{store}/{RECORDS}/{version}.json", json.dumps(record).encode())
    return VersionMap(store, version, inherited, {}, set(), record["parent"])


def switch(fs, store: str, version: str, expected_etag: str | None) -> None:
    """Make ``version`` the store's: one conditional PUT of the head (``If-Match`` the ETag the head had,
    or ``If-None-Match: *`` where there was none). An ``OSError`` when another writer moved it since."""
    bucket, key = f"{store}/{HEAD}".split("/", 1)
    condition = {"IfMatch": expected_etag} if expected_etag else {"IfNoneMatch": "*"}
    fs.call_s3("put_object", Bucket=bucket, Key=key, Body=json.dumps({"version": version}).encode(), **condition)


def versions(fs, store: str) -> list[str]:
    """The versions that have a record (a store written in place by an earlier runner has none)."""
    return [k.removesuffix(".json") for k in _listing(fs, f"{store}/{RECORDS}") if "/" not in k]


def kept(fs, store: str) -> set[str]:
    return {k for k in _listing(fs, f"{store}/{KEPT}") if "/" not in k}


def keep(fs, store: str, version: str, on: bool = True) -> None:
    """Mark ``version`` as kept by the store's history (or no longer)."""
    if on:
        fs.pipe_file(f"{store}/{KEPT}/{version}", b"")
    else:
        try:
            fs.rm_file(f"{store}/{KEPT}/{version}")
        except FileNotFoundError:
            pass


def collect(fs, store: str, live: Iterable[str | None]) -> int:
    """Remove every version not in ``live`` (a held one), not the head's and not kept, and every
    object of theirs no remaining version maps; the bytes freed. Run by the store's writer (under its
    lock); a kill part way leaves objects the next collection removes."""
    head, _ = read_head(fs, store)
    alive = {v for v in live if v is not None} | kept(fs, store) | ({head} if head is not None else set())
    used = {m.object_key(k, o) for m in (load(fs, store, v) for v in alive) for k, o in m.keys().items()}
    doomed, freed = [], 0
    for version in set(versions(fs, store)) - alive:
        doomed.append(f"{store}/{RECORDS}/{version}.json")
        doomed += [f"{store}/{DELETED}/{version}/{k}" for k in _listing(fs, f"{store}/{DELETED}/{version}")]
    objects = {f"{store}/{OBJECTS}/{k}": v for k, v in _listing(fs, f"{store}/{OBJECTS}").items()
               if k.split("/", 1)[0] not in alive}
    if LEGACY not in alive:
        objects.update({f"{store}/{k}": v for k, v in _listing(fs, store).items() if k.split("/", 1)[0] not in RESERVED})
    for key, info in objects.items():
        if key not in used:
            doomed.append(key)
            freed += int(info.get("size") or 0)
    if doomed:
        fs.rm(doomed)
    return freed


def own_bytes(fs, store: str, version: str) -> int:
    """Bytes of the objects only ``version`` holds: its own that no other live or kept version maps."""
    return sum(own_objects(fs, store, version).values())


def own_objects(fs, store: str, version: str) -> dict[str, int]:
    """Key -> size of the objects only ``version`` holds (its own that no other version maps)."""
    mine = load(fs, store, version)
    others = set(versions(fs, store)) - {version}
    used = {m.object_key(k, o) for m in (load(fs, store, v) for v in others) for k, o in m.keys().items()}
    return {key: size for key, size in mine.own.items() if mine.object_key(key) not in used}


class Versioned(Remote):
    """A path in one version of a store on object storage: the store itself, or a file or folder of
    its zarr hierarchy. File operations go through the version's map; a write is an object of the
    version's own. ``version`` None follows the head (resolved on first use, then held:
    :meth:`fresh` resolves it again)."""

    keeps_versions = True
    described = "a store on object storage"

    def __init__(self, url: str, store_key: str | None = None, version: str | None = None,
                 view: dict | None = None):
        super().__init__(url)
        self.store_key = store_key or self.key
        self._view = view if view is not None else {"version": version, "pinned": version, "map": None}

    # --- paths
    def _sub(self, key: str) -> Versioned:
        return Versioned(f"{self.protocol}://{key}", self.store_key, view=self._view)

    def __truediv__(self, other) -> Versioned:
        return self._sub(f"{self.key}/{str(other).strip('/')}")

    def _at(self, key: str) -> Remote:
        inside = key == self.store_key or key.startswith(self.store_key + "/")
        return self._sub(key) if inside else Remote(f"{self.protocol}://{key}")

    @property
    def parent(self) -> Remote:
        up = self.key.rsplit("/", 1)[0]
        return self._sub(up) if up.startswith(self.store_key) and self.key != self.store_key else Remote(
            f"{self.protocol}://{up}")

    @property
    def rel(self) -> str:
        return self.key[len(self.store_key) + 1:]

    @property
    def store_root(self) -> Versioned:
        return self._sub(self.store_key)

    # --- the version
    def map(self) -> VersionMap | None:
        """The version's map (None where there is no store yet)."""
        if self._view["map"] is None:
            fs, version = self.fs, self._view["version"]
            if version is None:
                version, _ = read_head(fs, self.store_key)
            if version is None:
                return None
            self._view["map"] = load(fs, self.store_key, version)
        return self._view["map"]

    @property
    def pinned_version(self) -> str | None:
        """The version this path was pinned to (None: it follows the head)."""
        return self._view.get("pinned")

    @property
    def version(self) -> str | None:
        found = self.map()
        return found.version if found is not None else None

    def pinned(self, version: str) -> Versioned:
        """The store root in ``version``."""
        return Versioned(f"{self.protocol}://{self.store_key}", self.store_key, version=version)

    def fresh(self) -> Versioned:
        """This path in the version the head names now."""
        return Versioned(str(self), self.store_key)

    def _writable_map(self) -> VersionMap:
        """The map writes go to; the store's first version is begun (and named by the head) on its first write."""
        found = self.map()
        if found is None:
            version = uuid.uuid4().hex
            found = begin(self.fs, self.store_key, version, None)
            switch(self.fs, self.store_key, version, None)
            self._view.update(version=version, map=found)
        return found

    def _under(self) -> dict[str, str]:
        """Keys of the version under this path -> owner (this path itself as ``""`` when it is a file)."""
        found = self.map()
        if found is None:
            return {}
        if self.key == self.store_key:
            return found.keys()
        rel = self.rel
        return {("" if k == rel else k[len(rel) + 1:]): o for k, o in found.keys().items()
                if k == rel or k.startswith(rel + "/")}

    # --- the filesystem, through the map
    def _bare(self) -> bool:
        """The store's URL holding no store (yet): read as the plain prefix it is."""
        return self.key == self.store_key and self.map() is None

    def exists(self) -> bool:
        if self._bare():
            return super().exists()
        return self.key == self.store_key or bool(self._under()) or self.is_file()

    def is_dir(self) -> bool:
        if self._bare():
            return super().is_dir()
        return self.key == self.store_key or any(k for k in self._under())

    def is_file(self) -> bool:
        found = self.map()
        if found is None or self.key == self.store_key:
            return False
        if found.owner(self.rel) is not None:
            return True
        return self.rel not in found.deleted and self.fs.exists(found.object_key(self.rel))

    def _object(self) -> str:
        found = self.map()
        if found is None:
            raise FileNotFoundError(str(self))
        owner = found.owner(self.rel)
        if owner is None and self.rel in found.deleted:
            raise FileNotFoundError(str(self))
        return found.object_key(self.rel, owner)

    def read_bytes(self) -> bytes:
        return self.fs.cat_file(self._object())

    def read_range(self, start: int, end: int) -> bytes:
        return self.fs.cat_file(self._object(), start=start, end=end)

    def write_bytes(self, data: bytes | memoryview) -> None:
        found = self._writable_map()
        self.fs.pipe_file(found.object_key(self.rel), bytes(data))
        found.own[self.rel] = len(data)

    def unlink(self, missing_ok: bool = False) -> None:
        found = self.map()
        if found is None or found.owner(self.rel) is None:
            if not missing_ok:
                raise FileNotFoundError(str(self))
            return
        _delete(self.fs, found, [self.rel])

    def iterdir(self) -> list[Remote]:
        if self._bare():
            return super().iterdir()
        return [p for p, _ in self.entries()]

    def entries(self) -> list[tuple[Remote, bool]]:
        if self._bare():
            return super().entries()
        names: dict[str, bool] = {}
        for key in self._under():
            if key:
                head, sep, _ = key.partition("/")
                names[head] = names.get(head, False) or bool(sep)
        return [(self / n, d) for n, d in sorted(names.items())]

    def glob(self, pattern: str) -> list[Versioned]:
        return sorted((self / k for k in self._under() if k and fnmatch.fnmatch(k, pattern)), key=str)

    def files(self) -> dict[str, int]:
        return {k: int(entry.get("size") or 0) for k, entry in self._current().items()}

    def _full(self, key: str) -> str:
        return key if self.key == self.store_key else f"{self.rel}/{key}"

    def _listed(self, owners: Iterable[str]) -> dict[str, dict]:
        """The objects under this path that ``owners`` (versions) hold, full key -> listing entry. The
        version's own (written in place while it is the head's): one LIST of its prefix here, each
        time. Another version's objects never change once this one maps them: one LIST of all of
        them, once per opening (an opening is short: ``verify`` opens the head's version afresh on
        each read, so an object collected or overwritten from outside is seen by the next). Never a
        LIST of every version's objects, but for a store written in place by an earlier runner,
        whose objects are the URL's own keys (listed once, the reserved ones left out)."""
        found, out = self.map(), {}
        for owner in sorted(set(owners)):
            prefix = found.object_key(self._full(""), owner)
            if owner == found.version:
                out.update(self._list(prefix.rstrip("/"), owner))
                continue
            cache = self._view.setdefault("listed", {})
            if owner not in cache:
                cache[owner] = self._list(found.object_key("", owner).rstrip("/"), owner)
            out.update({k: v for k, v in cache[owner].items() if k.startswith(prefix)})
        return out

    def _list(self, prefix: str, owner: str) -> dict[str, dict]:
        legacy = owner == LEGACY and prefix == self.store_key  # the URL's own keys, not the versions'
        return {f"{prefix}/{k}": v for k, v in _listing(self.fs, prefix).items()
                if not (legacy and k.split("/", 1)[0] in RESERVED)}

    def read_many(self, paths: list[Versioned]) -> dict[Versioned, bytes]:
        if not paths:
            return {}
        wanted = {}
        for p in paths:
            try:
                wanted[p._object()] = p
            except FileNotFoundError:
                continue
        got = self.fs.cat(list(wanted), on_error="return")
        for value in got.values():
            if isinstance(value, BaseException) and not isinstance(value, FileNotFoundError):
                raise value
        return {wanted[k]: v for k, v in got.items() if isinstance(v, bytes)}

    def digests(self, keys: list[str]) -> dict[str, str | None]:
        """Key -> ``etag:<ETag>`` of the object holding ``key`` under this path (:meth:`_current`)."""
        current = self._current()
        tags = {k: str((current.get(k) or {}).get("ETag") or "").strip('"') for k in keys}
        return {k: f"etag:{tag}" if tag else None for k, tag in tags.items()}

    def _current(self) -> dict[str, dict]:
        """Key under this path -> the listing entry of the object holding it now (``{}`` for one the map
        names and the listing does not find). The version's own objects the listing finds win over the
        map: a run adding to the head's version writes its chunks in place, then their records, so a
        reader whose map is older than a record still finds the chunk it names (new, or written again
        over an inherited one)."""
        found = self.map()
        if found is None:
            return {}
        under = self._under()
        listed = self._listed({*under.values(), found.version})
        out = {k: listed.get(found.object_key(self._full(k), o)) or {} for k, o in under.items() if k}
        mine = found.object_key(self._full(""))
        out.update({key[len(mine):]: entry for key, entry in listed.items() if key.startswith(mine)})
        return out

    def mark_folder(self) -> None:
        """A store's folder exists with its version (nothing to mark)."""

    def folder_marked(self) -> bool:
        return self.exists()

    def remove_tree(self) -> None:
        found = self.map()
        if found is None:
            return
        _delete(self.fs, found, [self._full(k) for k in self._under() if k] + ([self.rel] if self.is_file() else []))

    def move_tree(self, dst: Versioned) -> None:
        """Each object copied under the destination's key (a server-side copy), then the originals deleted."""
        found, fs = self._writable_map(), self.fs
        for key in [k for k in self._under() if k]:
            src, target = self._full(key), f"{dst.rel}/{key}"
            fs.copy(found.object_key(src, found.owner(src)), found.object_key(target))
            found.own[target] = 0
        self.remove_tree()

    # --- versions (runner.storage.store.Store.transaction)
    def stage_at(self, beside: Any, version: str) -> Versioned:
        """The next version ``version`` of this store (``beside``, a folder on a disk, is not used)."""
        return self.store_root.pinned(version)

    def begin_stage(self, stage: Versioned) -> None:
        """Begin the next version: its record, inheriting every key of the head's version (after the
        versions no one holds are collected)."""
        fs, head = self.fs, self.fresh().map()
        collect(fs, self.store_key, (head.parent,) if head is not None else ())
        stage._view["map"] = begin(fs, self.store_key, stage._view["version"], head)

    def switch_stage(self, stage: Versioned) -> None:
        """Make the next version the store's: one conditional PUT of the head, refused when the head no
        longer names the version the next one was begun from."""
        fs = self.fs
        head, etag = read_head(fs, self.store_key, etag=True)
        if head != stage.map().parent:
            raise FileExistsError(f"{self.store_root}: its head names version {head}, not {stage.map().parent}, "
                                  "which the next version was begun from: another apply switched it")
        switch(fs, self.store_key, stage._view["version"], etag)

    def end_stage(self, stage: Versioned | None, live: tuple = ()) -> None:
        """After a switch (or an error before it): :meth:`collect`."""
        self.collect(live)

    def collect(self, live: tuple = ()) -> int:
        """Every version no one holds collected (:func:`collect`), but ``live`` and the version the
        head's was begun from (a reader that opened it before the switch reads it whole); bytes freed."""
        head = self.fresh().map()
        return collect(self.fs, self.store_key, (*live, head.parent if head is not None else None))

    def finish_switch(self) -> None:
        """Nothing half done to finish: the head is one object."""

    def zarr_store(self, read_only: bool = False):
        return KeyMapStore(self.store_root, read_only=read_only)

    def open_lines(self) -> str:
        """Python lines that open the store here as a dataset ``ds``: through the runner, which reads the
        version the head names (a plain ``xr.open_zarr(URL)`` finds no group here)."""
        return f"from runner import api\nds = api.open({str(self)!r})"

    def reader_store(self, what: str = "store"):
        """The version the head names now, read only from its objects (see the module docstring)."""
        return KeyMapStore(self.store_root.pinned(self.store_root.version or LEGACY), read_only=True, what=what)


def _delete(fs, found: VersionMap, keys: list[str]) -> None:
    """Delete ``keys`` from the version: its own objects removed, an inherited key marked deleted."""
    own = [found.object_key(k) for k in keys if k in found.own]
    if own:
        fs.rm(own)
    for key in keys:
        found.own.pop(key, None)
        if key in found.inherited and key not in found.deleted and found.version != LEGACY:
            fs.pipe_file(f"{found.store}/{DELETED}/{found.version}/{key}", b"")
            found.deleted.add(key)


def _store_class():
    from zarr.abc.store import Store  # lazy: zarr

    return Store


class KeyMapStore(_store_class()):
    """A zarr store of one version of a store on object storage: every key read from the object the
    version maps it to, every write an object of the version's own (through zarr's ``FsspecStore``)."""

    supports_writes = True
    supports_deletes = True
    supports_listing = True
    supports_partial_writes = False

    def __init__(self, root: Versioned, read_only: bool = False, what: str = "store"):
        super().__init__(read_only=read_only)
        from zarr.storage import FsspecStore  # lazy: zarr

        self.root, self.what = root, what
        self.base = FsspecStore.from_url(f"{root.protocol}://{root.store_key}",
                                         storage_options=storage_options(root.protocol), read_only=read_only)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyMapStore) and str(self.root) == str(other.root) and \
            self.root._view is other.root._view

    def with_read_only(self, read_only: bool = False) -> KeyMapStore:
        return KeyMapStore(self.root, read_only, self.what)

    async def _open(self) -> None:
        await self.base._open()
        self._is_open = True

    def _rel(self, key: str, owner: str | None) -> str:
        found = self.root.map()
        return found.object_key(key, owner)[len(self.root.store_key) + 1:]

    async def get(self, key: str, prototype, byte_range=None):
        found = self.root.map()
        if found is None:
            return None
        owner = found.owner(key)
        if owner is None:
            if key in found.deleted:
                return None
            return await self.base.get(self._rel(key, found.version), prototype, byte_range)
        out = await self.base.get(self._rel(key, owner), prototype, byte_range)
        if out is None:
            from runner.storage.pinned import VersionSwitched  # lazy: zarr

            raise VersionSwitched(f"{self.root}: the {self.what} this dataset was opened on (version {found.version}) "
                                  "was switched out and its objects removed since; nothing was read from the new one. "
                                  "Open it again (runner.api.open) to read what it holds now")
        return out

    async def get_partial_values(self, prototype, key_ranges):
        return [await self.get(key, prototype, byte_range) for key, byte_range in key_ranges]

    async def exists(self, key: str) -> bool:
        found = self.root.map()
        return found is not None and found.owner(key) is not None

    async def set(self, key: str, value) -> None:
        self._check_writable()
        found = self.root._writable_map()
        await self.base.set(self._rel(key, found.version), value)
        found.own[key] = len(value)

    async def delete(self, key: str) -> None:
        self._check_writable()
        found = self.root.map()
        if found is not None and found.owner(key) is not None:
            _delete(self.root.fs, found, [key])

    async def list(self) -> AsyncIterator[str]:
        for key in self._keys():
            yield key

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        for key in self._keys():
            if key.startswith(prefix):
                yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        prefix = prefix.rstrip("/")
        seen = set()
        for key in self._keys():
            if prefix and not key.startswith(prefix + "/"):
                continue
            head = (key[len(prefix) + 1:] if prefix else key).split("/", 1)[0]
            if head not in seen:
                seen.add(head)
                yield head

    def _keys(self) -> list[str]:
        found = self.root.map()
        return sorted(found.keys()) if found is not None else []

    def __repr__(self) -> str:
        return f"KeyMapStore({str(self.root)!r}, version={self.root._view['version']!r})"


def store_versions(root: Versioned) -> dict[str, Any]:
    """What is under a store's URL, for messages and tests: its head, versions, kept ones."""
    fs = root.fs
    head, _ = read_head(fs, root.store_key)
    return {"head": head, "versions": sorted(versions(fs, root.store_key)), "kept": sorted(kept(fs, root.store_key))}
