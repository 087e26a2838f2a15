"""Earlier versions of a store: what ``apply --replace`` keeps before it replaces finished results
(and ``apply`` before it extends them: a longer run).

``store/<name>.history/<UTC time>/`` holds ``<name>.zarr``, the store as it was (``xr.open_zarr``
opens it), and ``manifest.json``: when, why, the spec it was made with, the finished results that
were replaced, extended or dropped (with the values that changed), every completion record it held (with
the digests of their chunks) and the store's manifest (``contents``: its metadata and the digests
of the arrays apply writes, :mod:`runner.storage.manifest`), so that ``runner verify STORE --version
VERSION`` checks a version as it checks the store. A version is made whole or not at all (built
under a temporary name, then renamed), and removed only by ``runner history STORE --remove VERSION``.
A version identical to the newest one (an apply killed right after the copy, then resumed) is not
made twice.

The copy costs no data: its files are hard links to the store's. That is safe because nothing
writes a store's files in place: zarr's local store writes every chunk and metadata file to a
temporary file that replaces the old one (zarr >= 3.1.3), so later writes to the store leave the
version's links on the old bytes. Where links are not possible (another filesystem), files are copied.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from rich.filesize import decimal

from runner.core.layout import counted, internal
from runner.storage.local import link_or_copy
from runner.storage.location import Location, location
from runner.storage.manifest import MANIFEST as STORE_MANIFEST
from runner.storage.manifest import array_nodes
from runner.storage import versioned
from runner.storage.store import atomic_write_bytes, held_version, runner_dir
from runner.storage.versioned import Versioned
from runner.storage.store_errors import writing
from runner.core.errors import StorageError
from runner.storage.store_errors import StoreWriteError, first_failure

MANIFEST = "manifest.json"
PARTIAL = ".partial-"
BESIDE = ("provenance.json",)
"""Files of the store's runner folder a version keeps beside its store (the full provenance, which
the store's root attribute summarises and binds by its code hash)."""


def history_dir(path: Location) -> Location:
    """``x.zarr`` -> ``x.history``; for a point of a sweep (``x.zarr/p``) ``x.history/p``."""
    path = location(path)
    if path.parent.suffix == ".zarr":
        return history_dir(path.parent) / path.name
    return path.with_suffix(".history")


@dataclass(frozen=True)
class Version:
    name: str
    store: Path
    """The zarr store of this version (``xr.open_zarr(version.store)``)."""
    manifest: dict

    def own_by_kind(self) -> dict[str, int]:
        """:meth:`own_bytes` split: ``chunks``, ``metadata`` (``zarr.json``) and ``description`` (the
        history's own files: manifest, records, provenance)."""
        out = {"chunks": 0, "metadata": 0, "description": 0}
        if isinstance(self.store, Versioned):
            for key, size in versioned.own_objects(self.store.fs, self.store.store_key, self.store.version).items():
                out["metadata" if key.rsplit("/", 1)[-1] == "zarr.json" else "chunks"] += size
            out["description"] = sum(self.folder.files().values())
            return out
        for d, _, files in os.walk(self.folder):
            for f in files:
                st = os.stat(os.path.join(d, f))
                if st.st_nlink == 1:
                    inside = Path(d).is_relative_to(self.store)
                    out["description" if not inside else "metadata" if f == "zarr.json" else "chunks"] += st.st_size
        return out

    @property
    def folder(self):
        """The version's folder in the history (its store and description; on object storage its description)."""
        return history_dir(self.store) / self.name if isinstance(self.store, Versioned) else self.store.parent

    @property
    def where(self) -> str:
        """Where this version is, in words: its store's folder, or on object storage its version of the store."""
        if isinstance(self.store, Versioned):
            return f"{self.folder} (version {self.store.pinned_version} of {self.store})"
        return str(self.store)

    @property
    def created(self) -> str:
        return str(self.manifest.get("created_utc", "?"))

    def own_bytes(self) -> int:
        """Bytes only this version holds: its files not hard-linked to the store's or another version's
        (on object storage: its objects no other version maps), what removing it frees."""
        if isinstance(self.store, Versioned):
            return versioned.own_bytes(self.store.fs, self.store.store_key, self.store.version)
        return own_bytes(self.store.parent)

    def describe(self) -> str:
        m = self.manifest
        parts = [f"{len(m.get('replaced', []))} replaced"] if m.get("replaced") else []
        parts += [f"{len(m.get('extended', []))} extended"] if m.get("extended") else []
        parts += [f"{len(m.get('dropped', []))} dropped"] if m.get("dropped") else []
        why = ", ".join(parts) or m.get("reason", "kept")
        return (f"{self.name}  {why}; spec sha256 {str(m.get('spec_sha256', '?'))[:12]}; {self.where} "
                f"({decimal(self.own_bytes())} of its own)")


def snapshot(path: Path, manifest: dict) -> Version:
    """Keep the store at ``path`` as it is now, as a new version (see the module docstring)."""
    path = location(path)
    folder = history_dir(path)
    try:
        manifest = {**manifest, "contents": json.loads((runner_dir(path) / STORE_MANIFEST).read_bytes())}
    except (OSError, ValueError):
        pass  # a store made before its manifest (or whose manifest is corrupt): the version is not covered
    if isinstance(path, Versioned):
        manifest = {**manifest, "version": path.fresh().version}
    kept = versions(path)
    if kept and _same(kept[-1].manifest, manifest):  # a kill right after the copy, and a resume
        return kept[-1]
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H-%M-%SZ")
    name, n = stamp, 1
    while (folder / name).exists():
        n += 1
        name = f"{stamp}-{n}"
    if isinstance(path, Versioned):
        return _keep_remote(path, folder / name, {"name": name, "store": path.name, **manifest})
    path = Path(path)
    tmp = folder / f"{PARTIAL}{name}"
    with writing(folder):
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob(f"{PARTIAL}*"):  # a copy a kill cut short: never a version
            shutil.rmtree(stale, ignore_errors=True)
        try:
            shutil.copytree(path, tmp / path.name, copy_function=link_or_copy)
            for beside in BESIDE:
                if (runner_dir(path) / beside).is_file():
                    (tmp / runner_dir(path).name).mkdir(parents=True, exist_ok=True)
                    link_or_copy(str(runner_dir(path) / beside), str(tmp / runner_dir(path).name / beside))
            atomic_write_bytes(tmp / MANIFEST, json.dumps({"name": name, "store": path.name, **manifest}, indent=1,
                                                          sort_keys=True, default=str).encode())
        except (OSError, StoreWriteError) as err:  # one line, naming the bytes a copy needs (not shutil's list)
            shutil.rmtree(tmp, ignore_errors=True)
            cause = first_failure(err) if isinstance(err, shutil.Error) else \
                err if isinstance(err, OSError) else OSError(err.errno, os.strerror(err.errno or 0))
            raise StoreWriteError(folder, cause, f" (keeping the store as it was there needs up to "
                                  f"{decimal(_bytes(path))} where its files cannot be hard-linked)") from None
        os.replace(tmp, folder / name)
    return Version(name, folder / name / path.name, manifest)


def _keep_remote(path: Versioned, folder, manifest: dict) -> Version:
    """On object storage a version keeps no copy: the head's version is marked kept (so that no
    collection removes its objects) before its description names it; a kill between the two leaves
    a kept version no description names, never a description of a version collected."""
    head = path.fresh()
    version = manifest["version"]
    with writing(folder):
        versioned.keep(head.fs, head.store_key, version)
        for beside in BESIDE:
            if (runner_dir(path) / beside).is_file():
                (folder / runner_dir(path).name / beside).write_bytes((runner_dir(path) / beside).read_bytes())
        atomic_write_bytes(folder / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True, default=str).encode())
    return Version(manifest["name"], head.pinned(version), manifest)


def own_bytes(folder: Path) -> int:
    """Bytes of the files under ``folder`` that no other path links to."""
    total = 0
    for d, _, files in os.walk(folder):
        for f in files:
            try:
                st = os.stat(os.path.join(d, f))
            except FileNotFoundError:
                continue
            total += st.st_size if st.st_nlink == 1 else 0
    return total


def bytes_kept(path: Location, rewritten: Iterable[tuple[int, str, bool]]) -> int:
    """About the bytes a version of the store at ``path`` made now keeps of its own once a run
    rewrites ``rewritten`` (network index, measure, whether it extends a finished result): its
    description (the store's manifest and records), every metadata file (a run rewrites them), and
    the chunk files the run replaces: of each (network, measure), the chunks of the measure's arrays
    for that network, from the last stored point on along a time axis when it extends; and the time
    axes themselves, which a longer run rewrites. Every other
    file the version shares with the store (hard links). Nothing is read but metadata and a listing."""
    path = location(path)
    runs: dict[str, dict[int, bool]] = {}
    for network, measure, extends in rewritten:
        nets = runs.setdefault(measure, {})
        nets[network] = nets.get(network, True) and extends
    nodes = list(array_nodes(path))
    axes = {name for name, _, meta in nodes if meta and counted(meta.get("attributes")) in ("steps", "epochs")}
    files = path.files()
    state = runner_dir(path).files()  # none when there is no runner folder
    total = sum(size for key, size in files.items() if key.rsplit("/", 1)[-1] == "zarr.json")
    total += sum(size for key, size in state.items()
                 if key == STORE_MANIFEST or key.startswith("records/") or key in BESIDE)
    total += sum(size for key, size in files.items() if key.split("/", 1)[0] in axes and "/c" in key)  # axes grow
    for name, _, meta in nodes:
        nets = runs.get(internal((meta or {}).get("attributes")).get("measure"))
        if not nets:
            continue
        dims = list(meta.get("dimension_names") or [])
        shape = meta.get("shape") or []
        chunks = ((meta.get("chunk_grid") or {}).get("configuration") or {}).get("chunk_shape") or shape
        for key, size in files.items():
            if not key.startswith(f"{name}/c/"):
                continue
            index = [int(i) for i in key[len(name) + 3:].split("/")]
            net = index[dims.index("network")] if "network" in dims and len(index) == len(dims) else None
            if net is not None and net not in nets:
                continue
            extends = nets[net] if net is not None else all(nets.values())
            if extends and len(index) == len(dims) and any(
                    d in axes and i < (shape[k] - 1) // max(1, chunks[k]) for k, (d, i) in enumerate(zip(dims, index))):
                continue  # before the last stored point: an extension leaves it as it is
            total += size
    return total


def _bytes(path: Path) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


class HistoryLinked(StorageError):
    """A store's ``.history`` that is a link to somewhere else: never listed, removed from or read (74)."""


def _same(old: dict, new: dict) -> bool:
    """The same version: everything but when and its name."""
    def strip(m: dict) -> str:
        return json.dumps({k: v for k, v in m.items() if k not in ("created_utc", "name", "store")}, sort_keys=True,
                          default=str)
    return strip(old) == strip(new)


def version_at(path: Path) -> Version | None:
    """The kept version whose store is ``path`` (``x.history/<version>/x.zarr``; on object storage the
    store pinned to a kept version), or None."""
    if not location(path).keeps_versions:
        return None
    if isinstance(location(path), Versioned):
        pinned = location(path).pinned_version
        return next((v for v in versions(path) if pinned is not None and v.manifest.get("version") == pinned), None)
    path = Path(os.path.abspath(path))
    folder = path.parent
    if folder.parent.suffix != ".history" or not (folder / MANIFEST).is_file():
        return None
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return Version(folder.name, path, manifest) if manifest.get("store", path.name) == path.name else None


def versions(path: Path) -> list[Version]:
    """The versions kept for the store at ``path``, oldest first (on object storage: the versions the
    history's descriptions name, :func:`_remote_versions`)."""
    if not location(path).keeps_versions:
        return []
    if isinstance(location(path), Versioned):
        return _remote_versions(location(path))
    folder = history_dir(path)
    if folder.is_symlink():
        raise HistoryLinked(f"{folder} is a link (to {os.path.realpath(folder)}), not the store's own history: the "
                            "runner keeps a store's versions in a folder of its own; remove the link")
    if not folder.is_dir():
        return []
    out = []
    for entry in sorted(folder.iterdir()):
        if not entry.is_dir() or entry.name.startswith(PARTIAL):
            continue
        try:
            manifest = json.loads((entry / MANIFEST).read_text())
        except (OSError, ValueError) as err:
            if not (entry / Path(path).name).is_dir():
                continue  # not a version of ours (a sweep point's folder, or something a user put there)
            why = "is missing" if isinstance(err, FileNotFoundError) else f"does not read ({type(err).__name__})"
            manifest = {"unreadable": f"its description {entry / MANIFEST} {why}: what it replaced and its records "
                                      "are unknown, its store is not checked"}
        if not isinstance(manifest, dict):
            manifest = {"unreadable": f"its description {entry / MANIFEST} is not a JSON object"}
        out.append(Version(entry.name, entry / str(manifest.get("store", Path(path).name)), manifest))
    return out


def _remote_versions(path: Versioned) -> list[Version]:
    out = []
    for entry, is_dir in history_dir(path).entries():
        if not is_dir or not (entry / MANIFEST).is_file():
            continue
        try:
            manifest = json.loads((entry / MANIFEST).read_bytes())
        except ValueError:
            continue
        if isinstance(manifest, dict) and manifest.get("version") is not None:
            out.append(Version(entry.name, path.store_root.pinned(str(manifest["version"])), manifest))
    return out


def holding(path: Location, task_ids: Iterable[str]) -> Version | None:
    """The newest kept version that holds a finished result for every one of ``task_ids`` (a shorter
    or earlier run the spec asks for again), or None."""
    wanted = set(task_ids)
    for version in reversed(versions(path)):
        if wanted and wanted <= set(version.manifest.get("records") or {}):
            return version
    return None


def served_note(path: Location, task_ids: Iterable[str]) -> str | None:
    """One line naming the kept version that already holds this spec's results, or None."""
    version = holding(path, task_ids)
    if version is None:
        return None
    return (f"the history already holds this spec's results: version {version.name}; open it "
            f"with {_opening(version)}, or let apply --replace compute them again here")


def _opening(version: Version) -> str:
    if isinstance(version.store, Versioned):
        return f"runner.api.open({str(version.store)!r}, history=True)['history/{version.name}']"
    return f"xr.open_zarr({str(version.store)!r})"


def remove(path: Path, name: str) -> Version:
    """Delete one version (``runner history STORE --remove NAME``); KeyError naming the versions."""
    found = {v.name: v for v in versions(path)}
    if name not in found:
        raise KeyError(f"{history_dir(path)} has no version {name!r}; versions: {', '.join(found) or 'none'}")
    with writing(history_dir(path)):
        store = location(path)
        if isinstance(store, Versioned):  # its description, then its mark; the writer collects its objects
            (history_dir(path) / name).remove_tree()
            versioned.keep(store.fs, store.store_key, str(found[name].manifest.get("version")), on=False)
            store.collect((held_version(store),))  # what no version holds any more, as after a switch
        else:
            shutil.rmtree(history_dir(path) / name)
    return found[name]
