"""The storage substrate on evidence (issue 51, item 4): the runner's current store layer against an
Icechunk repository, on the same trials, on a local disk and on S3 (moto's server, as the tests).

The data are the quickstart's (``specs/quickstart.toml``): ``v1`` is the finished store (300 steps),
``v2`` the store extended to 400 steps (the next apply of the spec edited), ``v3`` a replace of ``v1``
(``--set experiment.seed=1 --replace``: every array rewritten). The current layer makes them with
``runner apply`` in a subprocess; Icechunk gets the same datasets as commits on ``main``: ``v1``
written with xarray's ``to_zarr`` onto a session's store, ``v2`` as the next commit writing only
what changed (arrays whose chunk grid changed whole, otherwise the chunks whose bytes differ, and the
metadata), ``v3`` as a commit that rewrites every array. Trials, each on both substrates:

- ``bytes``: the bytes an old version keeps beyond the new one (the current layer: the files of
  ``<store>.history/`` that are not hard links to the store's, plus its manifest; Icechunk: what
  ``garbage_collect`` frees once the old snapshot is expired);
- ``kills``: the writer (``runner apply``, or a process making the Icechunk commit) killed with
  SIGKILL at a seeded random time; then: does the store read, is it the old version, the new one,
  a new layout still being filled ("in progress", whose old version is in the history) or a mix;
  and is it the new version after the next apply (or the writer run again);
- ``readers``: a reader process opening the store in a loop (``xr.open_zarr`` and loading every
  variable; ``api.open`` as well for the current layer) while the writer writes the next version;
  each read classified as above, its root attribute marker (the spec's sha256, or Icechunk's
  ``version``) checked against the data's version;
- ``damage``: bytes flipped in one chunk file; is it found (``runner verify``; Icechunk: reading it)
  and what repairs it;
- ``cost``: wall time of the extension, of a full read and of ``runner verify``;
- ``s3``: the same kills on S3 (fewer seeds), Icechunk's S3 storage at a custom endpoint with
  path-style addressing, and its conditional writes (two sessions committing on one base).

    python benchmarks/storage_substrate.py                       # 10 seeds local, 3 on S3
    python benchmarks/storage_substrate.py --seeds 2 --no-s3     # quick
    python benchmarks/storage_substrate.py --json out.json
    python benchmarks/storage_substrate.py --only runner --seeds 5 --no-s3  # the current layer's
                                                      # readers and kills only (no Icechunk)

Icechunk is not a dependency of the project: ``pip install icechunk==1.1.21`` first (not for
``--only runner``).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import xarray as xr

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}
NAME = "quickstart"
REPLACE = ["--set", "experiment.seed=1", "--replace"]


# ---------------------------------------------------------------- the current layer (runner apply)

def runner(*args: str, cwd: Path, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "runner.cli", *args], cwd=cwd, env=env or ENV,
                         capture_output=True, text=True)
    if check and out.returncode != 0:
        raise RuntimeError(f"runner {' '.join(args)}: exit {out.returncode}\n{out.stderr[-3000:]}")
    return out


def spec_at(folder: Path, steps: int, store: str | None = None) -> Path:
    text = (ROOT / "specs/quickstart.toml").read_text().replace("steps = 300", f"steps = {steps}")
    if store:
        text = text.replace('name = "quickstart"', f'name = "quickstart"\nstore = "{store}"', 1)
    path = folder / "quickstart.toml"
    path.write_text(text)
    return path


def build_versions(work: Path) -> dict:
    """v1, v2 (extension) and v3 (replace) of the quickstart as the runner makes them, each a folder
    holding the spec and ``store/``; with the wall times of the extension and the replace."""
    v1 = work / "v1"
    v1.mkdir()
    spec_at(v1, 300)
    t = time.perf_counter()
    runner("apply", "quickstart.toml", "-q", cwd=v1)
    times = {"first_apply_s": time.perf_counter() - t}
    for name, steps, extra in (("v2", 400, []), ("v3", 300, REPLACE)):
        shutil.copytree(v1, work / name, symlinks=True)
        spec_at(work / name, steps)
        t = time.perf_counter()
        runner("apply", "quickstart.toml", "-q", *extra, cwd=work / name)
        times[f"{name}_apply_s"] = time.perf_counter() - t
    return times


def store_of(folder: Path) -> Path:
    return folder / "store" / f"{NAME}.zarr"


# ---------------------------------------------------------------- versions compared

def load(ds: xr.Dataset) -> dict:
    """Every variable and coordinate of ``ds`` as numpy, and the version marker of its root attributes."""
    ds = ds.load()
    attrs = dict(ds.attrs)
    marker = attrs.get("version")
    if marker is None and "runner" in attrs:
        marker = json.loads(attrs["runner"]).get("spec_sha256")
    return {"vars": {k: np.asarray(v.values) for k, v in ds.variables.items()}, "marker": marker}


def open_local(path: Path) -> xr.Dataset:
    return xr.open_zarr(path, consolidated=False)


def _equal(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape:
        return False
    try:
        return bool(np.array_equal(a, b, equal_nan=True))
    except TypeError:
        return bool(np.array_equal(a, b))


def _partial(a: np.ndarray, b: np.ndarray) -> bool:
    """``a`` is ``b`` with some values not written yet (NaN)."""
    if a.shape != b.shape or a.dtype.kind != "f":
        return False
    return bool(np.all((a == b) | np.isnan(a) | (np.isnan(a) & np.isnan(b))))


def _padded(a: np.ndarray, shape: tuple) -> np.ndarray | None:
    """``a`` (an old version's values) in a longer layout, NaN beyond its own extent."""
    if a.dtype.kind != "f" or len(shape) != a.ndim or any(n < m for n, m in zip(shape, a.shape)):
        return None
    out = np.full(shape, np.nan)
    out[tuple(slice(0, m) for m in a.shape)] = a
    return out


def _var_state(a: np.ndarray, old: np.ndarray | None, new: np.ndarray | None) -> str:
    if new is not None and _equal(a, new):
        return "new"
    if old is not None and _equal(a, old):
        return "old"
    if new is None or a.shape != new.shape or a.dtype.kind != "f":
        return "other"
    was = old if old is not None and old.shape == a.shape else (_padded(old, a.shape) if old is not None else None)
    isnew, unwritten = (a == new) | (np.isnan(a) & np.isnan(new)), np.isnan(a)
    isold = np.zeros(a.shape, bool) if was is None else (a == was)
    if np.all(isnew | unwritten):
        return "new+unwritten"
    if np.all(isnew | unwritten | isold):
        return "old+new"
    return "other"


def classify(got: dict, refs: dict) -> str:
    """``old``, ``new``, ``in progress`` (the new layout; each value new or not written yet, or, with
    ``old values kept``, still the old version's) or ``mixed`` (a value of neither);
    `` (marker differs)`` appended where the root's version marker disagrees with the data."""
    old, new = refs["old"], refs["new"]
    names = set(got["vars"])
    if names == set(old["vars"]) and all(_equal(got["vars"][k], old["vars"][k]) for k in names):
        verdict = "old"
    elif names == set(new["vars"]) and all(_equal(got["vars"][k], new["vars"][k]) for k in names):
        verdict = "new"
    else:
        states = {k: _var_state(got["vars"][k], old["vars"].get(k), new["vars"].get(k)) for k in names}
        kinds = set(states.values())
        if names != set(new["vars"]) or "other" in kinds:
            verdict = "mixed"
        elif "old+new" in kinds or ("old" in kinds and "new" in kinds):
            verdict = "in progress, old values kept"
        else:
            verdict = "in progress"
    marker = refs["new" if verdict.startswith("in progress") or verdict == "mixed" else verdict]["marker"]
    if verdict != "mixed" and got["marker"] != marker:
        verdict += " (marker differs)"
    return verdict


def try_classify(opener, refs: dict) -> str:
    try:
        return classify(load(opener()), refs)
    except Exception as err:  # noqa: BLE001 - what a reader meets is the measurement
        return f"error: {type(err).__name__}: {str(err).splitlines()[0][:120] if str(err) else ''}"


# ---------------------------------------------------------------- bytes kept

def tree_bytes(*roots: Path) -> tuple[int, set]:
    """Bytes of the files under ``roots``, each inode counted once, and the inodes."""
    seen, total = set(), 0
    for root in roots:
        for path in root.rglob("*"):
            if path.is_file() and not path.is_symlink():
                st = path.stat()
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_size
    return total, seen


def history_kept(folder: Path) -> dict:
    """Bytes of the store, and bytes its history keeps that the store does not (hard links once)."""
    store = store_of(folder)
    history = store.with_suffix(".history")
    size, inodes = tree_bytes(store)
    kept = 0
    for path in history.rglob("*"):
        if path.is_file():
            st = path.stat()
            if (st.st_dev, st.st_ino) not in inodes:
                inodes.add((st.st_dev, st.st_ino))
                kept += st.st_size
    return {"store_bytes": size, "history_apparent_bytes": sum(p.stat().st_size for p in history.rglob("*") if p.is_file()),
            "kept_bytes": kept}


# ---------------------------------------------------------------- Icechunk

def ic_storage(where: dict):
    import icechunk  # lazy: icechunk

    if where["kind"] == "local":
        return icechunk.local_filesystem_storage(where["path"])
    return icechunk.s3_storage(bucket=where["bucket"], prefix=where["prefix"], endpoint_url=where["endpoint"],
                               allow_http=True, force_path_style=True, region="us-east-1",
                               access_key_id="testing", secret_access_key="testing")


def ic_repo(where: dict, create: bool = False):
    import icechunk  # lazy: icechunk

    storage = ic_storage(where)
    return icechunk.Repository.create(storage) if create else icechunk.Repository.open(storage)


def ic_open(where: dict) -> xr.Dataset:
    """How a user opens the branch's newest version in xarray (see the docs' one line)."""
    return xr.open_zarr(ic_repo(where).readonly_session("main").store, consolidated=False)


def ic_write_dataset(where: dict, source: Path, version: int, message: str) -> str:
    """Commit the dataset of the runner store ``source`` with xarray's ``to_zarr``, every array written."""
    import zarr  # lazy: zarr

    zarr.config.set({"array.write_empty_chunks": True})
    ds = open_local(source).load()
    ds.attrs["version"] = version
    session = ic_repo(where).writable_session("main")
    ds.to_zarr(session.store, mode="w", consolidated=False, zarr_format=3)
    return session.commit(message)


def _chunk_files(array_dir: Path) -> dict[str, Path]:
    base = array_dir / "c"
    return {str(p.relative_to(array_dir)): p for p in base.rglob("*") if p.is_file()} if base.is_dir() else {}


def ic_write_changes(where: dict, old: Path, new: Path, version: int, message: str, ready=None) -> dict:
    """Commit ``new`` on top of the commit of ``old``, writing only what changed: an array whose chunk
    grid, type or codecs changed whole, otherwise the chunks whose bytes differ between the two runner
    stores (and new ones), the resized shapes and the attributes. Returns what it wrote."""
    import zarr  # lazy: zarr

    zarr.config.set({"array.write_empty_chunks": True})
    session = ic_repo(where).writable_session("main")
    if ready:
        ready()
    src = zarr.open_group(new, mode="r", use_consolidated=False)
    dst = zarr.open_group(session.store, mode="r+", use_consolidated=False)
    had = set(dst.array_keys())
    wrote = {"arrays_whole": 0, "chunks": 0}
    for name in had - set(src.array_keys()):
        del dst[name]
    for name in sorted(src.array_keys()):
        a = src[name]
        meta_new = json.loads((new / name / "zarr.json").read_text())
        old_meta = old / name / "zarr.json"
        meta_old = json.loads(old_meta.read_text()) if old_meta.is_file() else None
        same = meta_old is not None and name in had and all(
            meta_old.get(k) == meta_new.get(k) for k in ("chunk_grid", "data_type", "codecs", "fill_value"))
        if not same:
            if name in had:
                del dst[name]
            zarr.from_array(dst.store, name=name, data=a, chunks="keep", zarr_format=3)
            wrote["arrays_whole"] += 1
            continue
        b = dst[name]
        if b.shape != a.shape:
            b.resize(a.shape)
        if dict(b.attrs) != dict(a.attrs):
            b.attrs.put(dict(a.attrs))
        before = _chunk_files(old / name)
        for key, path in _chunk_files(new / name).items():
            if key in before and before[key].read_bytes() == path.read_bytes():
                continue
            index = [int(i) for i in key.split("/")[1:]]
            region = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(index, a.chunks, a.shape))
            b[region] = a[region]
            wrote["chunks"] += 1
    attrs = dict(src.attrs)
    attrs["version"] = version
    dst.attrs.put(attrs)
    wrote["snapshot"] = session.commit(message)
    return wrote


def ic_kept(where: dict) -> dict:
    """Bytes the older snapshots keep beyond the branch's tip: what garbage collection frees once
    they are expired (on a copy of a local repository)."""
    repo = ic_repo(where)
    total, _ = tree_bytes(Path(where["path"]))
    later = datetime.now(timezone.utc) + timedelta(seconds=1)
    time.sleep(1.1)
    expired = repo.expire_snapshots(older_than=later)
    summary = repo.garbage_collect(later)
    after, _ = tree_bytes(Path(where["path"]))
    return {"repo_bytes": total, "kept_bytes": total - after, "gc_bytes_deleted": summary.bytes_deleted,
            "gc_chunks_deleted": summary.chunks_deleted, "snapshots_expired": len(expired)}


def ic_orphans(where: dict) -> int:
    """Bytes of objects no snapshot references (what a killed writer left), by a garbage collection's dry run."""
    later = datetime.now(timezone.utc) + timedelta(seconds=1)
    time.sleep(1.1)
    return ic_repo(where).garbage_collect(later, dry_run=True).bytes_deleted


# ---------------------------------------------------------------- subprocesses: a writer, a reader

def child_write(args: list[str]) -> None:
    """``_write WHERE.json OLD NEW VERSION MODE``: the Icechunk writer the kill and reader trials run."""
    where = json.loads(Path(args[0]).read_text())
    old, new, version, mode = Path(args[1]), Path(args[2]), int(args[3]), args[4]

    def ready():
        print("ready", flush=True)

    if mode == "changes":
        ic_write_changes(where, old, new, version, f"v{version}", ready=ready)
    else:
        ready()
        ic_write_dataset(where, new, version, f"v{version}")
    print("done", flush=True)


def child_read(args: list[str]) -> None:
    """``_read KIND TARGET REFS.pkl STOP OUT.json``: open and read the store until STOP exists."""
    kind, target, refs_file, stop, out = args[0], args[1], Path(args[2]), Path(args[3]), Path(args[4])
    refs = pickle.loads(refs_file.read_bytes())
    if kind == "icechunk":
        where = json.loads(Path(target).read_text())
        opener = lambda: ic_open(where)  # noqa: E731
    elif kind == "api":
        from runner import api

        opener = lambda: api.open(target)  # noqa: E731
    else:
        opener = lambda: open_local(Path(target))  # noqa: E731
    counts: dict[str, int] = {}
    Path(str(out) + ".ready").write_text("1")
    while not stop.exists():
        verdict = try_classify(opener, refs)
        counts[verdict] = counts.get(verdict, 0) + 1
    for _ in range(3):  # and after the writer ended
        verdict = try_classify(opener, refs)
        counts[verdict] = counts.get(verdict, 0) + 1
    out.write_text(json.dumps(counts))


def spawn(*args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, *args], env=env or ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


# ---------------------------------------------------------------- trials

def runner_kills(work: Path, base: Path, refs: dict, op: str, seeds: list[int], span_s: float,
                 env: dict | None = None, prepare=None, target=None) -> list[dict]:
    """Kill ``runner apply`` (the extension or the replace of ``base``) at a seeded random time in
    [0, span_s], then read the store, run apply again and read it again."""
    rows = []
    for seed in seeds:
        folder = work / f"kill-{op}-{seed}"
        shutil.copytree(base, folder, symlinks=True)
        store = prepare(folder) if prepare else None
        spec_at(folder, 400 if op == "extension" else 300, store)
        extra = REPLACE if op == "replace" else []
        at = random.Random(seed).uniform(0, span_s)
        proc = subprocess.Popen([sys.executable, "-m", "runner.cli", "apply", "quickstart.toml", "-q", *extra], cwd=folder,
                                env=env or ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            proc.wait(timeout=at)
            finished = True
        except subprocess.TimeoutExpired:
            finished = False
            kill(proc)
        opener = target(folder) if target else (lambda: open_local(store_of(folder)))
        after = try_classify(opener, refs)
        staged = None if store else (store_of(folder).with_suffix(".runner") / "next.zarr").is_dir()
        verify = runner("verify", store or f"store/{NAME}.zarr", cwd=folder, env=env, check=False).returncode
        history = store_of(folder).with_suffix(".history")
        kept = None
        if not store and history.is_dir():
            kept = [try_classify(lambda v=v: open_local(v / f"{NAME}.zarr"), refs) for v in sorted(history.iterdir())]
        t = time.perf_counter()
        resume = runner("apply", "quickstart.toml", "-q", *extra, cwd=folder, env=env, check=False)
        resume_s = time.perf_counter() - t
        rows.append({"seed": seed, "killed_at_s": round(at, 2), "finished_first": finished, "after_kill": after,
                     "staged_left": staged, "verify_exit": verify, "history": kept, "resume_exit": resume.returncode,
                     "resume_s": round(resume_s, 1), "after_resume": try_classify(opener, refs),
                     "resume_error": resume.stderr.strip().splitlines()[-1][:200] if resume.returncode else ""})
        print(json.dumps({f"runner_kill_{op}": rows[-1]}), flush=True)
        if not store:
            shutil.rmtree(folder)
    return rows


def ic_kills(where_of, base_commit, refs: dict, op: str, seeds: list[int], span_s: float, old: Path, new: Path,
             version: int) -> list[dict]:
    """Kill the Icechunk writer at a seeded random time in [0, span_s] after it opened its session."""
    rows = []
    mode = "changes" if op == "extension" else "whole"
    for seed in seeds:
        where = where_of(seed)
        base_commit(where)
        wfile = Path(tempfile.mkstemp(suffix=".json")[1])
        wfile.write_text(json.dumps(where))
        at = random.Random(seed).uniform(0, span_s)
        proc = spawn("_write", str(wfile), str(old), str(new), str(version), mode)
        proc.stdout.readline()  # ready: imports done, the session open
        try:
            proc.wait(timeout=at)
            finished = True
        except subprocess.TimeoutExpired:
            finished = False
            kill(proc)
        after = try_classify(lambda: ic_open(where), refs)
        orphans = ic_orphans(where) if where["kind"] == "local" else None
        rerun = spawn("_write", str(wfile), str(old), str(new), str(version), mode)
        out, err = rerun.communicate()
        rows.append({"seed": seed, "killed_at_s": round(at, 3), "finished_first": finished, "after_kill": after,
                     "orphan_bytes": orphans, "rerun_exit": rerun.returncode,
                     "after_rerun": try_classify(lambda: ic_open(where), refs)})
        print(json.dumps({f"icechunk_kill_{op}": rows[-1]}), flush=True)
        wfile.unlink()
    return rows


def readers_trial(kind: str, target: str, refs: dict, start_writer, work: Path) -> dict:
    refs_file = work / "refs.pkl"
    refs_file.write_bytes(pickle.dumps(refs))
    stop, out = work / f"stop-{kind}", work / f"reads-{kind}.json"
    stop.unlink(missing_ok=True)
    reader = spawn("_read", kind, target, str(refs_file), str(stop), str(out))
    while not Path(str(out) + ".ready").exists():
        time.sleep(0.05)
    time.sleep(1.0)
    t = time.perf_counter()
    code = start_writer()
    wall = time.perf_counter() - t
    stop.write_text("1")
    _, err = reader.communicate(timeout=300)
    counts = json.loads(out.read_text()) if out.exists() else {"reader failed": err[-500:]}
    return {"writer_exit": code, "writer_s": round(wall, 2), "reads": counts}


def runner_readers(work: Path, op: str, refs: dict) -> dict:
    """Readers (``xr.open_zarr``, and ``api.open`` during the extension) while ``runner apply`` makes
    the extension or the replace of ``v1``."""
    extra, steps = (REPLACE, 300) if op == "replace" else ([], 400)
    out = {}
    for kind in (("xarray", "api") if op == "extension" else ("xarray",)):
        folder = work / f"read-{op}-{kind}"
        shutil.copytree(work / "v1", folder, symlinks=True)
        spec_at(folder, steps)
        out[f"runner_{op}_{kind}"] = readers_trial(
            kind, str(store_of(folder)), refs,
            lambda: runner("apply", "quickstart.toml", "-q", *extra, cwd=folder, check=False).returncode, work)
        print(json.dumps({f"runner_{op}_{kind}": out[f"runner_{op}_{kind}"]}), flush=True)
    return out


def flip(path: Path, offset: int = 40) -> None:
    data = bytearray(path.read_bytes())
    offset = min(offset, len(data) - 1)
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def damage_runner(folder: Path, refs: dict) -> dict:
    """Flip a byte in one chunk file of a finished store (no history: the file is its own), then
    ``runner verify``, ``runner apply`` (the repair) and ``runner verify`` again."""
    chunk = max((p for p in (store_of(folder) / "lyapunov").rglob("*") if p.is_file() and p.name != "zarr.json"),
                key=lambda p: p.stat().st_size)
    flip(chunk)
    found = runner("verify", f"store/{NAME}.zarr", cwd=folder, check=False)
    read = try_classify(lambda: open_local(store_of(folder)), refs)
    t = time.perf_counter()
    repair = runner("apply", "quickstart.toml", "-q", cwd=folder, check=False)
    repair_s = time.perf_counter() - t
    again = runner("verify", f"store/{NAME}.zarr", cwd=folder, check=False)
    return {"chunk": str(chunk.relative_to(folder)), "verify_exit": found.returncode,
            "verify_says": (found.stdout + found.stderr).strip().splitlines()[:3], "plain_read": read,
            "repair_exit": repair.returncode, "repair_s": round(repair_s, 1), "verify_after_exit": again.returncode,
            "after_repair": try_classify(lambda: open_local(store_of(folder)), refs)}


def damage_icechunk(where: dict, source: Path, refs: dict) -> dict:
    """Flip a byte in the largest chunk object of the repository, read every variable, and repair by
    a commit that rewrites the variables that failed; then the same flip in a chunk stored without
    compression or checksum, to see whether Icechunk itself notices."""
    import zarr  # lazy: zarr

    repo_dir = Path(where["path"])
    chunk = max((repo_dir / "chunks").iterdir(), key=lambda p: p.stat().st_size)
    flip(chunk)
    failed = []
    ds = ic_open(where)
    for name in ds.variables:
        try:
            ds[name].load()
        except Exception as err:  # noqa: BLE001
            failed.append(f"{name}: {type(err).__name__}: {str(err).splitlines()[0][:100] if str(err) else ''}")
    read = try_classify(lambda: ic_open(where), refs)
    session = ic_repo(where).writable_session("main")
    src = zarr.open_group(source, mode="r", use_consolidated=False)
    dst = zarr.open_group(session.store, mode="r+", use_consolidated=False)
    for entry in failed:
        name = entry.split(":")[0]
        dst[name][...] = src[name][...]
    session.commit("repair") if failed else None
    after = try_classify(lambda: ic_open(where), refs)
    # Icechunk's own check: a raw chunk (no codec that could fail), one byte flipped
    raw = {"kind": "local", "path": str(repo_dir) + "-raw"}
    session = ic_repo(raw, create=True).writable_session("main")
    arr = zarr.create_array(session.store, name="x", shape=(1024,), chunks=(1024,), dtype="float64",
                            compressors=None, fill_value=0.0)
    arr[...] = np.arange(1024.0)
    session.commit("raw")
    flip(max((Path(raw["path"]) / "chunks").iterdir(), key=lambda p: p.stat().st_size), offset=8 * 100 + 3)
    try:
        got = zarr.open_array(ic_repo(raw).readonly_session("main").store, path="x", mode="r")[...]
        raw_read = "read without error, values " + ("unchanged" if np.array_equal(got, np.arange(1024.0))
                                                    else f"altered (x[100] = {got[100]!r})")
    except Exception as err:  # noqa: BLE001
        raw_read = f"error: {type(err).__name__}"
    return {"chunk_object_bytes": chunk.stat().st_size, "failed_variables": failed, "plain_read": read,
            "after_repair_commit": after, "raw_chunk_flip": raw_read}


def icechunk_base(where: dict, v1: Path) -> None:
    if where["kind"] == "local":
        shutil.rmtree(where["path"], ignore_errors=True)
    ic_repo(where, create=True)
    ic_write_dataset(where, v1, 1, "v1")


def with_marker(ref: dict, marker) -> dict:
    return {**ref, "marker": marker}


def run(work: Path, args) -> dict:
    import zarr  # lazy: zarr

    res: dict = {}
    t0 = time.perf_counter()
    res["runner_times"] = build_versions(work)
    print(json.dumps({"built": res["runner_times"]}), flush=True)
    v1, v2, v3 = (store_of(work / n) for n in ("v1", "v2", "v3"))
    ref = {n: load(open_local(store_of(work / n))) for n in ("v1", "v2", "v3")}
    ext, rep = {"old": ref["v1"], "new": ref["v2"]}, {"old": ref["v1"], "new": ref["v3"]}
    ic = {n: with_marker(ref[n], i + 1) for i, n in enumerate(("v1", "v2", "v3"))}
    ic_ext, ic_rep = {"old": ic["v1"], "new": ic["v2"]}, {"old": ic["v1"], "new": ic["v3"]}

    # bytes kept per version
    res["bytes"] = {"runner_extension": history_kept(work / "v2"), "runner_replace": history_kept(work / "v3"),
                    "v1_store_bytes": tree_bytes(v1)[0], "v1_files": sum(1 for p in v1.rglob("*") if p.is_file())}
    costs = {}
    for op, old, new, version in (("extension", v1, v2, 2), ("replace", v1, v3, 3)):
        where = {"kind": "local", "path": str(work / f"ic-bytes-{op}")}
        t = time.perf_counter()
        icechunk_base(where, v1)
        costs["icechunk_first_write_s"] = time.perf_counter() - t
        t = time.perf_counter()
        wrote = ic_write_changes(where, old, new, version, op) if op == "extension" else ic_write_dataset(where, new, version, op)
        costs[f"icechunk_{op}_s"] = time.perf_counter() - t
        assert classify(load(ic_open(where)), ic_ext if op == "extension" else ic_rep) == "new"
        res["bytes"][f"icechunk_{op}"] = {**ic_kept(where), **({"wrote": {k: v for k, v in wrote.items() if k != "snapshot"}}
                                                               if op == "extension" else {})}
    print(json.dumps({"bytes": res["bytes"]}), flush=True)

    # cost: reads and verify
    def timed(fn, repeat=3):
        best = float("inf")
        for _ in range(repeat):
            t = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t)
        return best

    where = {"kind": "local", "path": str(work / "ic-bytes-extension-read")}
    icechunk_base(where, v1)
    ic_write_changes(where, v1, v2, 2, "v2")
    costs["runner_extension_s"] = res["runner_times"]["v2_apply_s"]
    costs["runner_replace_s"] = res["runner_times"]["v3_apply_s"]
    costs["runner_full_read_s"] = timed(lambda: open_local(v2).load())
    costs["icechunk_full_read_s"] = timed(lambda: ic_open(where).load())
    costs["runner_verify_cli_s"] = timed(lambda: runner("verify", str(v2), cwd=work), repeat=2)
    costs["python_startup_s"] = timed(lambda: subprocess.run([sys.executable, "-c", "import runner.cli"], env=ENV), repeat=2)
    res["cost"] = {k: round(v, 3) for k, v in costs.items()}
    print(json.dumps({"cost": res["cost"]}), flush=True)

    # damage
    shutil.copytree(work / "v1", work / "damage", symlinks=True)
    res["damage"] = {"runner": damage_runner(work / "damage", {"old": ref["v1"], "new": ref["v1"]})}
    where = {"kind": "local", "path": str(work / "ic-damage")}
    icechunk_base(where, v1)
    res["damage"]["icechunk"] = damage_icechunk(where, v1, {"old": ic["v1"], "new": ic["v1"]})
    print(json.dumps({"damage": res["damage"]}), flush=True)

    # readers during a switch
    res["readers"] = {}
    for op, refs in (("extension", ext), ("replace", rep)):
        res["readers"].update(runner_readers(work, op, refs))
        where = {"kind": "local", "path": str(work / f"ic-read-{op}")}
        icechunk_base(where, v1)
        wfile = work / f"ic-read-{op}.json"
        wfile.write_text(json.dumps(where))
        new, version, mode = (v2, 2, "changes") if op == "extension" else (v3, 3, "whole")
        res["readers"][f"icechunk_{op}"] = readers_trial(
            "icechunk", str(wfile), ic_ext if op == "extension" else ic_rep,
            lambda: spawn("_write", str(wfile), str(v1), str(new), str(version), mode).wait(), work)
        print(json.dumps({f"icechunk_{op}": res["readers"][f"icechunk_{op}"]}), flush=True)

    # kills, local
    seeds = list(range(args.seeds))
    res["kills"] = {}
    for op, refs, icrefs, new, version in (("extension", ext, ic_ext, v2, 2), ("replace", rep, ic_rep, v3, 3)):
        span = res["runner_times"][f"{'v2' if op == 'extension' else 'v3'}_apply_s"]
        res["kills"][f"runner_{op}"] = runner_kills(work, work / "v1", refs, op, seeds, span)
        span = 1.5 * costs[f"icechunk_{op}_s"]
        res["kills"][f"icechunk_{op}"] = ic_kills(
            lambda s, op=op: {"kind": "local", "path": str(work / f"ic-kill-{op}-{s}")},
            lambda w: icechunk_base(w, v1), icrefs, op, seeds, span, v1, new, version)
    if not args.no_s3:
        try:
            res["s3"] = run_s3(work, args, v1, v2, v3, ext, rep, ic_ext, ic_rep, costs)
        except Exception as err:  # noqa: BLE001 - the local results stand; say what failed on S3
            res["s3"] = {"error": f"{type(err).__name__}: {err}"}
    res["total_s"] = round(time.perf_counter() - t0, 1)
    res["versions"] = {"icechunk": __import__("icechunk").__version__, "zarr": zarr.__version__,
                       "xarray": xr.__version__}
    print(json.dumps({"summary": summary(res)}, indent=1), flush=True)
    return res


def run_runner(work: Path, args) -> dict:
    """The current layer's trials alone: readers during the extension and the replace, and kills of
    both (local disk)."""
    t0 = time.perf_counter()
    res: dict = {"runner_times": build_versions(work)}
    print(json.dumps({"built": res["runner_times"]}), flush=True)
    ref = {n: load(open_local(store_of(work / n))) for n in ("v1", "v2", "v3")}
    refs = {"extension": {"old": ref["v1"], "new": ref["v2"]}, "replace": {"old": ref["v1"], "new": ref["v3"]}}
    res["readers"] = {}
    for op in ("extension", "replace"):
        res["readers"].update(runner_readers(work, op, refs[op]))
    seeds = list(range(args.seeds))
    res["kills"] = {}
    for op, built in (("extension", "v2"), ("replace", "v3")):
        span = res["runner_times"][f"{built}_apply_s"]
        res["kills"][f"runner_{op}"] = runner_kills(work, work / "v1", refs[op], op, seeds, span)
    res["total_s"] = round(time.perf_counter() - t0, 1)
    print(json.dumps({"summary": summary(res)}, indent=1), flush=True)
    return res


def run_s3(work: Path, args, v1, v2, v3, ext, rep, ic_ext, ic_rep, costs) -> dict:
    from tests.runner import s3_server

    server = s3_server.start(work / "moto.log")
    out: dict = {}
    try:
        env = {**ENV, **server.env}
        os.environ.update(server.env)
        client = server.client()
        # Icechunk at a custom endpoint, path-style, plain http
        bucket = server.bucket()
        where = {"kind": "s3", "bucket": bucket, "prefix": "repo", "endpoint": server.url}
        try:
            icechunk_base(where, v1)
            out["icechunk_works"] = classify(load(ic_open(where)), {"old": with_marker(ext["old"], 1), "new": ic_ext["new"]})
        except Exception as err:  # noqa: BLE001
            out["icechunk_works"] = f"error: {type(err).__name__}: {err}"
            return out
        # conditional writes: two sessions on one base, both commit
        repo = ic_repo(where)
        a, b = repo.writable_session("main"), repo.writable_session("main")
        import zarr  # lazy: zarr

        zarr.open_group(a.store, mode="r+").attrs["who"] = "a"
        zarr.open_group(b.store, mode="r+").attrs["who"] = "b"
        a.commit("a")
        try:
            b.commit("b")
            out["icechunk_second_commit"] = "accepted (conditional write not enforced)"
        except Exception as err:  # noqa: BLE001
            out["icechunk_second_commit"] = f"refused: {type(err).__name__}"
        seeds = list(range(args.s3_seeds))
        for op, icrefs, new, version in (("extension", ic_ext, v2, 2), ("replace", ic_rep, v3, 3)):
            out[f"icechunk_kill_{op}"] = ic_kills(
                lambda s: {"kind": "s3", "bucket": bucket, "prefix": f"kill-{op}-{s}", "endpoint": server.url},
                lambda w: icechunk_base(w, v1), icrefs, op, seeds, 3 * costs[f"icechunk_{op}_s"], v1, new, version)
        # the current layer on S3: a finished v1 in a bucket, copied to a new bucket per seed
        base = work / "s3-v1"
        base.mkdir()
        base_bucket = server.bucket()
        spec_at(base, 300, f"s3://{base_bucket}/{NAME}.zarr")
        t = time.perf_counter()
        runner("apply", "quickstart.toml", "-q", cwd=base, env=env)
        out["runner_first_apply_s"] = round(time.perf_counter() - t, 1)
        keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=base_bucket)
                for o in page.get("Contents", [])]
        out["runner_objects"] = len(keys)
        from runner.storage.location import location, zarr_store

        def prepare(folder: Path) -> str:
            target = server.bucket()
            for key in keys:
                client.copy_object(Bucket=target, Key=key, CopySource={"Bucket": base_bucket, "Key": key})
            (folder / "bucket").write_text(target)
            return f"s3://{target}/{NAME}.zarr"

        def target(folder: Path):
            url = f"s3://{(folder / 'bucket').read_text()}/{NAME}.zarr"
            return lambda: xr.open_zarr(zarr_store(location(url), read_only=True), consolidated=False)

        for op, refs in (("extension", ext), ("replace", rep)):
            t = time.perf_counter()
            out[f"runner_kill_{op}"] = runner_kills(work / "s3", base, refs, op, seeds, 1.0 * out["runner_first_apply_s"],
                                                    env=env, prepare=prepare, target=target)
    finally:
        s3_server.stop(server)
    return out


def summary(res: dict) -> dict:
    """Counts of each outcome per trial."""
    def tally(rows, key):
        counts: dict[str, int] = {}
        for row in rows:
            counts[str(row[key])] = counts.get(str(row[key]), 0) + 1
        return counts

    out = {}
    for name, trial in res.get("readers", {}).items():
        out[f"local readers {name}"] = trial["reads"]
    for where, kills in (("local", res.get("kills", {})), ("s3", res.get("s3", {}))):
        for name, rows in kills.items():
            if isinstance(rows, list):
                name = name.replace("kill_", "")
                out[f"{where} kill {name}"] = {"after kill": tally(rows, "after_kill"),
                                               "after resume": tally(rows, "after_resume" if "after_resume" in rows[0] else "after_rerun")}
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in ("_write", "_read"):
        (child_write if sys.argv[1] == "_write" else child_read)(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=10, help="kill seeds per operation and substrate, local")
    ap.add_argument("--s3-seeds", type=int, default=3, help="kill seeds per operation and substrate, on S3")
    ap.add_argument("--no-s3", action="store_true")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--only", choices=("all", "runner"), default="all",
                    help="runner: the current layer's readers and kills alone (local; no Icechunk)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="substrate-") as tmp:
        results = run_runner(Path(tmp), args) if args.only == "runner" else run(Path(tmp), args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
