"""A damage corpus (issue 36): every byte of a finished store is bound to its place, so damage cannot
hide. Each study's tiny store (the specs of ``test_integrity.py``) is built once per module and copied
per case; each case damages the copy one way (chunks swapped, truncated, deleted, flipped or replaced
by a valid chunk of elsewhere; a coordinate's chunk or the whole coordinate; an array's ``fill_value``,
``shape`` or attributes; a record edited, flipped or deleted; the manifest), and checks that ``verify`` finds it (exit 74, naming
the place) and that ``apply`` repairs it to the values of the uninterrupted run, bit for bit, with
``verify`` whole again. In process through the CLI's entry point; a few cases through the real CLI.
A kept version's damage is found by ``runner history`` and ``runner verify --version``."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from runner.storage.history import versions
from runner.storage.manifest import ALGORITHM
from runner.storage.store import read_tasks
from tests.runner.helpers import maps_spec, run_cli, write_spec

ROOT = Path(__file__).resolve().parents[3]


def _tiny(path: Path) -> str:
    return path.read_text().replace("seed = 0\n", 'seed = 0\nstore = "store/s.zarr"\n', 1)


SPECS = {  # the tiny specs of test_integrity.py, each writing store/s.zarr
    "depth": lambda: maps_spec("s", steps=60, samples=8),
    "training": lambda: _tiny(ROOT / "specs/tiny/lstm_tiny.toml"),
    "transject": lambda: _tiny(ROOT / "specs/tiny/transject_tiny.toml").replace("seeds = [0, 1]", "seeds = [0]"),
}


def cli(cwd: Path, *args) -> tuple[int, str, str]:
    """``runner ARGS`` in this process, in ``cwd``: (exit code, stdout, stderr)."""
    from runner.cli import main

    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([str(a) for a in args])
    finally:
        os.chdir(here)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def built(tmp_path_factory, shared_cache):
    """study -> the folder of its finished store (``spec.toml``, ``store/s.zarr`` and its run folder), built once."""
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRANSIENT_CACHE", str(shared_cache))
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("COLUMNS", "250")
        for study, text in SPECS.items():
            folder = tmp_path_factory.mktemp(f"built-{study}")
            write_spec(folder, text())
            code, _, err = cli(folder, "apply", "-q", "spec.toml")
            assert code == 0, err
            out[study] = folder
    return out


@pytest.fixture
def case(built, tmp_path, shared_cache, monkeypatch):
    """study -> a copy of its finished store in ``tmp_path`` (the folder, as ``built``)."""
    monkeypatch.setenv("TRANSIENT_CACHE", str(shared_cache))
    monkeypatch.setenv("COLUMNS", "250")

    def copy(study: str) -> Path:
        dst = tmp_path / study
        shutil.copytree(built[study], dst)
        return dst
    return copy


def values(store: Path) -> dict[str, tuple]:
    with xr.open_zarr(store, consolidated=False) as ds:
        return {name: (v.dtype, v.dims, v.attrs, v.values) for name, v in ds.variables.items()}


def assert_equal_stores(store: Path, reference: Path) -> None:
    got, want = values(store), values(reference)
    assert got.keys() == want.keys()
    for name, (dtype, dims, attrs, data) in want.items():
        assert got[name][:3] == (dtype, dims, attrs), name
        np.testing.assert_array_equal(got[name][3], data, err_msg=name)


# --- what to damage, chosen from the records and the manifest


def two_chunks(store: Path, records: dict | None = None) -> tuple[str, str, str]:
    """(array, key, other key): two recorded chunks of one array whose bytes differ."""
    for name, entries in sorted(_recorded(store, records).items()):
        by_digest = {}
        for key, digest in sorted(entries.items()):
            by_digest.setdefault(digest, key)
        if len(by_digest) >= 2:
            a, b = list(by_digest.values())[:2]
            return name, a, b
    raise AssertionError("no array with two different chunks")


def _recorded(store: Path, records: dict | None = None) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for rec in (records if records is not None else read_tasks(store)).values():
        for name, entry in rec["chunks"].items():
            out.setdefault(name, {}).update(entry[ALGORITHM])
    return out


def float_array(store: Path) -> str:
    """A recorded array of floats whose fill value is NaN, with a cell no task wrote (so a changed fill shows)."""
    for name in sorted(_recorded(store)):
        meta = json.loads((store / name / "zarr.json").read_text())
        if meta["data_type"] == "float64" and meta["fill_value"] == "NaN":
            return name
    raise AssertionError("no float array")


def swap(store, name, a, b):
    t = store / name / "tmp-chunk"
    os.replace(store / name / a, t)
    os.replace(store / name / b, store / name / a)
    os.replace(t, store / name / b)


def flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def edit_json(path: Path, change) -> None:
    meta = json.loads(path.read_text())
    change(meta)
    path.write_text(json.dumps(meta, indent=2))


def flip_shape_digit(path: Path) -> None:
    """One bit flipped in a digit of ``shape`` (``2`` -> ``3``): the file stays JSON."""
    text = path.read_text()
    i = text.index('"shape"')
    j = next(k for k in range(i, len(text)) if text[k].isdigit())
    path.write_text(text[:j] + chr(ord(text[j]) ^ 0x01) + text[j + 1:])


def _without_layout_id(meta: dict) -> None:
    raw = meta["attributes"]["runner"]
    entries = json.loads(raw) if isinstance(raw, str) else raw
    entries.pop("layout_id")
    meta["attributes"]["runner"] = json.dumps(entries) if isinstance(raw, str) else entries
    meta.pop("consolidated_metadata", None)


def rebound(path: Path, change) -> None:
    """Edit a manifest and give it the digest of its new content (a rolled-back or copied-in one)."""
    from runner.storage.manifest import record_digest

    manifest = json.loads(path.read_bytes())
    change(manifest)
    manifest["digest"] = record_digest(manifest)
    path.write_text(json.dumps(manifest))


def edited_alike(store: Path, name: str) -> None:
    """An array's fill_value edited in its zarr.json and in the manifest, whose digest is made again."""
    edit_json(store / name / "zarr.json", lambda m: m.update(fill_value=0.0))
    rebound(store.parent / "s.runner" / "manifest.json", lambda m: m["metadata"][name].update(fill_value=0.0))


def a_record(store: Path) -> Path:
    return sorted((store.parent / "s.runner" / "records").glob("*.json"))[-1]


# damage -> (what it does to the store, what verify names)
DAMAGE = {
    "chunks swapped": (lambda s: swap(s, *two_chunks(s)), "swapped"),
    "chunk replaced by a valid chunk of elsewhere": (
        lambda s: (lambda n, a, b: shutil.copyfile(s / n / b, s / n / a))(*two_chunks(s)), "holds the chunk recorded for"),
    "chunk truncated": (lambda s: (lambda n, a, _: os.truncate(s / n / a, (s / n / a).stat().st_size // 2))(
        *two_chunks(s)), "corrupt"),
    "chunk deleted": (lambda s: (lambda n, a, _: (s / n / a).unlink())(*two_chunks(s)), "missing"),
    "chunk flipped": (lambda s: (lambda n, a, _: flip(s / n / a))(*two_chunks(s)), "corrupt"),
    "coordinate chunk deleted": (lambda s: (s / "network" / "c" / "0").unlink(), "network c/0: missing"),
    "coordinate chunk flipped": (lambda s: flip(s / "network" / "c" / "0"), "network c/0"),
    "coordinate deleted": (lambda s: shutil.rmtree(s / "network"), "network (array): missing"),
    "coordinate metadata corrupt": (lambda s: (s / "network" / "zarr.json").write_bytes(b"\x00 not json"),
                                    "network zarr.json"),
    "array metadata deleted": (lambda s: (s / float_array(s) / "zarr.json").unlink(), "zarr.json is missing"),
    "fill_value edited": (lambda s: edit_json(s / float_array(s) / "zarr.json",
                                              lambda m: m.update(fill_value=0.0)),
                          "fill_value is 0.0, the manifest says \"NaN\""),
    "fill_value edited in the metadata and the manifest": (lambda s: edited_alike(s, float_array(s)), "neither is trusted"),
    "shape digit flipped": (lambda s: flip_shape_digit(s / float_array(s) / "zarr.json"), "shape is"),
    "attribute edited": (lambda s: edit_json(s / float_array(s) / "zarr.json",
                                             lambda m: m["attributes"].update(units="furlongs")), "attributes.units"),
    "root attribute edited": (lambda s: edit_json(s / "zarr.json", lambda m: m["attributes"].update(title="x")),
                              "(root) zarr.json: attributes.title"),
    "record flipped": (lambda s: flip(a_record(s)), "(records)"),
    "record edited": (lambda s: edit_json(a_record(s), lambda r: r.update(seconds=r["seconds"] + 1)),
                      "altered (its digest does not match"),
    "record deleted": (lambda s: a_record(s).unlink(), "missing (the manifest lists the task as finished)"),
    "manifest corrupt": (lambda s: flip(s.parent / "s.runner" / "manifest.json"), "(manifest) manifest.json: corrupt"),
    "root metadata corrupt": (lambda s: (s / "zarr.json").write_bytes(b"\x00 not json"),
                              "(root) zarr.json: corrupt"),
    "manifest deleted": (lambda s: (s.parent / "s.runner" / "manifest.json").unlink(), "manifest.json: missing"),
    "manifest and a coordinate chunk deleted": (lambda s: ((s.parent / "s.runner" / "manifest.json").unlink(),
                                                           (s / "network" / "c" / "0").unlink()), "manifest.json: missing"),
    "manifest of another version": (lambda s: rebound(s.parent / "s.runner" / "manifest.json",
                                                      lambda m: m.update(layout_id="0" * 32)), "of another version"),
}

QUICK = ["root metadata corrupt", "manifest of another version", "chunks swapped", "coordinate deleted", "array metadata deleted", "manifest and a coordinate chunk deleted", "fill_value edited", "shape digit flipped", "record edited",
         "record deleted"]
CASES = [("depth", d) for d in DAMAGE] + [(s, d) for s in ("training", "transject") for d in QUICK]


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("study", "damage"), CASES, ids=[f"{s}-{d.replace(' ', '_')}" for s, d in CASES])
def test_damage_is_found_and_repaired_to_the_uninterrupted_run(study, damage, built, case):
    folder = case(study)
    store = folder / "store/s.zarr"
    assert cli(folder, "verify", store)[0] == 0
    make, named = DAMAGE[damage]
    make(store)
    code, out, err = cli(folder, "verify", store)
    assert code == 74, (out, err)
    assert named in out, out
    code, out, _ = cli(folder, "plan", "--detailed-exitcode", "spec.toml")
    assert code == 2 and "\nrepair " in out, out  # plan says what apply repairs, not only "0 to run"
    code, out, err = cli(folder, "apply", "-q", "spec.toml")
    assert code == 0, err
    code, out, err = cli(folder, "verify", store)
    assert code == 0 and "ok" in out.splitlines()[0], out
    assert_equal_stores(store, built[study] / "store/s.zarr")
    assert "nothing to do" in cli(folder, "apply", "-q", "spec.toml")[1]


def test_only_the_tasks_whose_chunks_are_damaged_are_recomputed(built, case):
    """Swapped chunks: their two tasks run again; altered metadata: written back, no task runs."""
    folder = case("depth")
    store = folder / "store/s.zarr"
    name, a, b = two_chunks(store)
    owners = {tid for tid, rec in read_tasks(store).items() if {a, b} & set(rec["chunks"].get(name, {}).get("keys", []))}
    swap(store, name, a, b)
    edit_json(store / float_array(store) / "zarr.json", lambda m: m.update(fill_value=0.0))
    code, out, _ = cli(folder, "verify", store, "--json")
    (found,) = json.loads(out)
    assert code == 74 and set(found["recomputed_tasks"]) == owners and found["restored_metadata"]
    code, out, err = cli(folder, "apply", "-q", "spec.toml")
    assert code == 0 and out.startswith(f"ran {len(owners)} task(s)"), (out, err)
    assert_equal_stores(store, built["depth"] / "store/s.zarr")


def test_a_deleted_record_is_damage_not_a_task_to_run(built, case):
    """The manifest lists the finished tasks: a record deleted from under it is damage (verify 74,
    status ``damaged``), not a task never run; apply recomputes exactly it."""
    folder = case("depth")
    store = folder / "store/s.zarr"
    record = a_record(store)
    record.unlink()
    code, out, _ = cli(folder, "verify", store)
    assert code == 74 and f"{record.name}: missing (the manifest lists the task as finished)" in out, out
    code, out, _ = cli(folder, "status", store, "--json")
    status = json.loads(out)
    assert status["state"] == "damaged" and record.stem in {t["id"] for t in status["tasks"] if t["state"] == "damaged"}
    code, out, _ = cli(folder, "apply", "-q", "spec.toml")
    assert code == 0 and out.startswith("ran 1 task(s)")
    assert_equal_stores(store, built["depth"] / "store/s.zarr")
    assert cli(folder, "verify", store)[0] == 0


def test_a_store_without_a_manifest_is_not_covered(built, case):
    """A store made before the manifest: verify checks what its records allow and says the rest is
    not covered (exit 0), never refuses it; the next apply that runs something writes one."""
    folder = case("depth")
    store = folder / "store/s.zarr"
    (folder / "store/s.runner/manifest.json").unlink()
    edit_json(store / "zarr.json", _without_layout_id)  # nor a version named in its root
    code, out, _ = cli(folder, "verify", store)
    assert code == 0 and "no manifest" in out
    (store / "network" / "c" / "0").unlink()  # not covered: read as the fill value, as before issue 36
    assert cli(folder, "verify", store)[0] == 0


def test_a_damaged_kept_version_is_marked_and_verified(built, case):
    folder = case("depth")
    store = folder / "store/s.zarr"
    spec = folder / "spec.toml"
    spec.write_text(spec.read_text().replace("steps = 60", "steps = 70"))
    assert cli(folder, "apply", "-q", "--replace", spec)[0] == 0
    (version,) = versions(store)
    assert cli(folder, "verify", store, "--version", version.name)[0] == 0
    assert "DAMAGED" not in cli(folder, "history", store)[1]
    name, a, b = two_chunks(version.store, version.manifest["records"])
    swap(version.store, name, a, b)  # links: the live store keeps its own files
    code, out, _ = cli(folder, "history", store)
    assert code == 0 and "DAMAGED" in out and f"{name} {a}" in out, out
    for target in ((store, "--version", version.name), (version.store,)):
        code, out, _ = cli(folder, "verify", *target)
        assert code == 74 and "swapped" in out and "kept version" in out, out
    assert cli(folder, "verify", store)[0] == 0
    assert cli(folder, "verify", store, "--version", "nope")[0] == 66


@pytest.mark.timeout(300)
def test_swapped_chunks_through_the_real_cli(built, tmp_path):
    """The issue's first report, as a user runs it: verify, show and figures refuse (74), plan says
    repair (2), apply repairs, the store equals the uninterrupted run."""
    shutil.copytree(built["depth"], tmp_path / "d")
    folder = tmp_path / "d"
    store = folder / "store/s.zarr"
    name, a, b = two_chunks(store)
    swap(store, name, a, b)
    edit_json(store / float_array(store) / "zarr.json", lambda m: m.update(fill_value=0.0))
    for command in ("verify", "show", "figures"):
        done = run_cli(command, store, cwd=folder)
        assert done.returncode == 74, (command, done.stdout, done.stderr)
    assert f"{name} {a}: holds the chunk recorded for {b}" in run_cli("verify", store, cwd=folder).stdout
    plan = run_cli("plan", "--detailed-exitcode", "spec.toml", cwd=folder)
    assert plan.returncode == 2 and "repair" in plan.stdout, plan.stdout
    assert run_cli("apply", "-q", "spec.toml", cwd=folder).returncode == 0
    assert run_cli("verify", store, cwd=folder).returncode == 0
    assert_equal_stores(store, built["depth"] / "store/s.zarr")
