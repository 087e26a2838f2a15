"""Damaged and foreign stores (issue 22, point 5): chunks carry crc32c checksums, records list the
chunks each task wrote, ``verify``/``status`` find missing, truncated and corrupt chunks and name
their tasks, ``apply`` recomputes exactly those, ``show``/``figures`` refuse until then.

Each study's finished store (the tiny maps spec, the tiny LSTM spec, the tiny TransJect spec) is
damaged three ways at once, in chunks of three different tasks, through the real CLI."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from runner.storage.records import chunk_coords, decode_key
from runner.storage.store import read_tasks
from tests.runner.helpers import maps_spec, write_spec

ROOT = Path(__file__).resolve().parents[3]


def test_chunk_coords_of_a_region():
    """The chunks a region touches, from the region and the chunk grid (worked by hand)."""
    assert chunk_coords((4, 10), (1, 3), (2, slice(2, 7))) == [(2, 0), (2, 1), (2, 2)]
    assert chunk_coords((4, 10), (1, 3), (1,)) == [(1, 0), (1, 1), (1, 2), (1, 3)]
    assert chunk_coords((4, 10), (2, 5), (slice(None), slice(9, 10))) == [(0, 1), (1, 1)]
    assert chunk_coords((4, 10), (1, 5), (-1, slice(0, 0))) == []
    assert chunk_coords((4, 10), (1, 5), (np.array([0, 3]), slice(0, 10, 6))) == [(0, 0), (0, 1), (3, 0), (3, 1)]
    assert chunk_coords((), (), ()) == [()]


def _tiny(path: Path, store: Path) -> str:
    return path.read_text().replace("seed = 0\n", f'seed = 0\nstore = "{store}"\n', 1)


def _depth(tmp: Path) -> Path:
    return write_spec(tmp, maps_spec("maps", steps=60, samples=8))


def _training(tmp: Path) -> Path:
    return write_spec(tmp, _tiny(ROOT / "specs/tiny/lstm_tiny.toml", tmp / "store/lstm.zarr"))


def _transject(tmp: Path) -> Path:
    text = _tiny(ROOT / "specs/tiny/transject_tiny.toml", tmp / "store/tj.zarr").replace("seeds = [0, 1]", "seeds = [0]")
    return write_spec(tmp, text)


def _values(store: Path) -> dict[str, np.ndarray]:
    with xr.open_zarr(store, consolidated=False) as ds:
        return {name: v.values for name, v in ds.variables.items()}


def _chunk_of(store: Path, array: str, which: int = 0) -> tuple[str, Path]:
    """(task id, chunk file) of a recorded chunk of ``array``: the ``which``-th recording task's first."""
    owners = sorted((tid, rec["chunks"][array]["keys"][0]) for tid, rec in read_tasks(store).items()
                    if array in rec.get("chunks", {}))
    tid, key = owners[which]
    return tid, store / array / key


def _truncate(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


CASES = {  # study -> (spec, (array truncated, array deleted, array corrupted))
    "depth": (_depth, ("lyapunov", "chaos_length", "effective_dimension")),
    "training": (_training, ("svcca_final", "train_loss", "probe_accuracy")),
    "transject": (_transject, ("entropy_quantile", "test_loss", "isomap")),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("study", CASES)
def test_truncated_deleted_and_corrupt_chunks_are_found_refused_and_repaired(study, tmp_path, in_process):
    make, (truncated, deleted, corrupted) = CASES[study]
    spec = make(tmp_path)
    code, _, err = in_process("apply", "-q", spec)
    assert code == 0, err
    store = next((tmp_path / "store").glob("*.zarr"))
    uninterrupted = _values(store)
    code, out, _ = in_process("verify", store)
    assert code == 0 and "ok" in out.splitlines()[0]

    t1, f1 = _chunk_of(store, truncated)
    t2, f2 = _chunk_of(store, deleted, -1)
    t3, f3 = _chunk_of(store, corrupted, -1)
    assert len({t1, t2, t3}) == 3
    _truncate(f1)
    f2.unlink()
    _flip(f3)

    code, out, _ = in_process("verify", store, "--json")
    assert code == 74
    (found,) = json.loads(out)
    assert set(found["damaged_tasks"]) == {t1, t2, t3}
    problems = {(d["array"], d["chunk"]): d["problem"] for d in found["damaged"]}
    assert len(problems) == 3
    assert problems[(deleted, str(f2.relative_to(store / deleted)))].startswith("missing")
    assert problems[(corrupted, str(f3.relative_to(store / corrupted)))].startswith("corrupt")

    code, out, _ = in_process("status", store, "--json")
    status = json.loads(out)
    assert code == 0 and status["state"] == "damaged"
    assert {t["id"] for t in status["tasks"] if t["state"] == "damaged"} == {t1, t2, t3}
    for command in ("show", "figures"):
        code, out, err = in_process(command, store)
        assert code == 74 and "runner apply" in err and t1 in err and not out.strip(), (command, err)
    assert not (store.parent / (store.stem + ".figures")).exists()

    code, out, err = in_process("apply", "-q", spec)
    assert code == 0, err
    assert out.startswith("ran 3 task(s)"), out  # exactly the damaged ones
    code, out, _ = in_process("verify", store)
    assert code == 0, out
    repaired = _values(store)
    assert repaired.keys() == uninterrupted.keys()
    for name, values in uninterrupted.items():
        np.testing.assert_array_equal(repaired[name], values, err_msg=name)
    code, out, _ = in_process("apply", "-q", spec)
    assert code == 0 and "nothing to do" in out


@pytest.mark.timeout(60)
def test_records_list_exactly_the_chunks_the_tasks_wrote(tmp_path, in_process):
    """Every chunk file of a result array is listed by the record of the task that wrote it, and
    every listed chunk exists (a chunk of fill values too: the runner writes every chunk)."""
    spec = _depth(tmp_path)
    assert in_process("apply", "-q", spec)[0] == 0
    store = tmp_path / "store/maps.zarr"
    listed: dict[str, set[str]] = {}
    for rec in read_tasks(store).values():
        for name, entry in rec["chunks"].items():
            listed.setdefault(name, set()).update(entry["keys"])
    for name, keys in listed.items():
        files = {str(p.relative_to(store / name)) for p in (store / name / "c").rglob("*") if p.is_file()}
        assert files == keys, name
    assert {"lyapunov", "chaos_length", "chaos_censored", "effective_dimension", "diverged_step"} <= set(listed)
    for rec in read_tasks(store).values():  # every key is on its network's row of the grid
        for name, entry in rec["chunks"].items():
            assert all(decode_key(k)[0] == rec["network"] for k in entry["keys"]), (name, rec["label"])


@pytest.mark.timeout(60)
def test_foreign_and_corrupt_stores_are_named_in_one_line(tmp_path, in_process):
    foreign = tmp_path / "plain.zarr"
    xr.Dataset({"a": ("x", np.arange(5.0))}).to_zarr(foreign, zarr_format=3)
    for command in ("status", "show", "figures", "verify"):
        code, out, err = in_process(command, foreign)
        assert code == 66 and err.strip().splitlines() == [
            f"error: {foreign} is a zarr store this project did not write (it has no runner attributes); "
            "open it with xarray (xr.open_zarr)"], (command, err)
    spec = write_spec(tmp_path, maps_spec("x", steps=20).replace('store = "store/x.zarr"', f'store = "{foreign}"'))
    code, _, err = in_process("apply", spec)
    assert code == 66 and "this runner did not create" in err and "Traceback" not in err  # as its readers

    spec = _depth(tmp_path)
    assert in_process("apply", "-q", spec)[0] == 0
    store = tmp_path / "store/maps.zarr"
    kept = tmp_path / "kept.zarr"
    shutil.copytree(store, kept)
    (store / "lyapunov" / "zarr.json").write_bytes(b"\xff\xfe\x00garbage")  # UnicodeDecodeError in json
    for command in ("show", "figures"):
        code, out, err = in_process(command, store)
        assert code == 74 and "metadata (zarr.json) of lyapunov is corrupt" in err and "Traceback" not in err
    code, out, _ = in_process("status", store)
    assert code == 0 and "damaged" in out.splitlines()[0] and "tasks done" in out and "8/8" not in out
    code, _, err = in_process("apply", "-q", spec)  # removes the array and recomputes its tasks
    assert code == 0, err
    assert in_process("verify", store)[0] == 0
    np.testing.assert_array_equal(_values(store)["lyapunov"], _values(kept)["lyapunov"])

    (store / "zarr.json").write_bytes(b"\x8f\x00 not json")  # the manifest binds the root: damage apply writes back
    code, out, _ = in_process("verify", store)
    assert code == 74 and "(root) zarr.json: corrupt (not JSON" in out, out
    for command in ("show", "figures"):
        code, _, err = in_process(command, store)
        assert code == 74 and "(root)" in err and "Traceback" not in err, (command, err)
    assert in_process("apply", "-q", spec)[0] == 0 and in_process("verify", store)[0] == 0
    np.testing.assert_array_equal(_values(store)["lyapunov"], _values(kept)["lyapunov"])

    (store / "zarr.json").write_bytes(b"\x8f\x00 not json")
    (tmp_path / "store/maps.runner/manifest.json").unlink()  # nothing binds the root any more
    message = f"error: {store}: its metadata {store / 'zarr.json'} is corrupt"
    for command in ("status", "show", "figures", "verify"):
        code, out, err = in_process(command, store)
        assert code == 66 and err.startswith(message) and len(err.strip().splitlines()) == 1, (command, err)
    for command in ("plan", "apply"):  # 66 as documented, as for the commands that read it (issue 36)
        code, _, err = in_process(command, spec)
        assert code == 66 and "is corrupt (not JSON)" in err and "Traceback" not in err, (command, err)
