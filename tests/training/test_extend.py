"""More epochs continue a finished training run (issue 37): the longer run takes the finished one's
checkpoints and resume file, trains the epochs added, and its store equals a fresh run's bit for
bit (real CLI runs), the shipped tiny spec's included; a schedule that moves with the run's length
is recomputed, and plan says why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import xarray as xr
from training_helpers import ROOT, TINY

from runner.storage.history import versions
from runner.storage.store import read_tasks

RUNNER = [sys.executable, "-m", "runner.cli"]


#: The shipped tiny spec's log-spaced steps: within the first epoch, whatever the number of epochs.
SHIPPED_LOG_SPACED = "log_spaced = { start = 1, stop = 20, count = 4 }\n"


def spec(folder: Path, epochs: int, log_spaced: bool = False) -> Path:
    """lstm_tiny with two LMs and the measures that read one checkpoint, its final one or a pair;
    ``log_spaced``: its log-spaced steps spread over the whole run (no ``stop``)."""
    text = TINY.read_text()
    head, _, _ = text.partition("[[model]]")
    head = head.replace("epochs = 3\n", f"epochs = {epochs}\n", 1).replace('seed = 0\n', 'seed = 0\nstore = '
                                                                             '"store/t.zarr"\n', 1)
    assert SHIPPED_LOG_SPACED in head
    head = head.replace(SHIPPED_LOG_SPACED, "log_spaced = { start = 1, count = 4 }\n" if log_spaced else "")
    folder.mkdir(exist_ok=True)
    path = folder / "t.toml"
    path.write_text(head + """
[[model]]
name = "lm"
kind = "lm"

[[model]]
name = "lm_seed2"
kind = "lm"
seed = 7

[[measure]]
kind = "svcca"
compare = "final"
networks = ["lm"]

[[measure]]
kind = "svcca"
compare = "seed"
networks = ["lm"]
reference = ["lm_seed2"]

[[measure]]
kind = "lca"
networks = ["lm"]

[[measure]]
kind = "entropy"
""")
    return path


def cli(*args, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT),
           "TRANSIENT_CACHE": str(cwd / "cache")}
    env.pop("RUNNER_TEST_STALL", None)
    return subprocess.run([*RUNNER, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def bits(path: Path) -> dict[str, tuple]:
    ds = xr.open_zarr(path, consolidated=False).load()
    out = {}
    for name, v in ds.variables.items():
        a = np.asarray(v.values)
        out[name] = (v.dims, a.dtype.str, a.tolist() if a.dtype.kind in "OTUS" else a.tobytes())
    return out


def test_more_epochs_extend_and_equal_a_fresh_run_bit_for_bit(tmp_path):
    path = spec(tmp_path / "a", 2)
    assert cli("apply", path, "-q", cwd=path.parent).returncode == 0
    spec(tmp_path / "a", 3)
    plan = cli("plan", path, "--no-estimate", cwd=path.parent)
    out = " ".join(plan.stdout.split())
    assert "training.epochs: 2 -> 3 (continued from epoch 2)" in out, out
    assert "recomputed on the new run's checkpoints" in out and "kept: the same checkpoints" in out
    assert "apply refuses" not in out
    done = cli("apply", path, "-q", cwd=path.parent)
    assert done.returncode == 0, done.stderr
    trains = [r for r in read_tasks(path.parent / "store/t.zarr").values() if r["kind"] == "train"]
    assert len(trains) == 2 and all(r["resumed_from"] > 0 for r in trains)  # continued, not retrained
    records = read_tasks(path.parent / "store/t.zarr").values()
    assert any(r.get("taken_over_from") for r in records)  # measures of kept checkpoints: not run again
    assert cli("verify", path.parent / "store/t.zarr", cwd=path.parent).returncode == 0

    fresh = spec(tmp_path / "b", 3)
    assert cli("apply", fresh, "-q", cwd=fresh.parent).returncode == 0
    a, b = bits(path.parent / "store/t.zarr"), bits(fresh.parent / "store/t.zarr")
    assert a.keys() == b.keys() and [k for k in b if a[k] != b[k]] == []
    (version,) = versions(path.parent / "store/t.zarr")
    assert version.manifest["reason"] == "extend"


def test_a_schedule_that_moves_with_the_length_is_recomputed_and_plan_says_why(tmp_path):
    path = spec(tmp_path, 2, log_spaced=True)
    assert cli("apply", path, "-q", cwd=tmp_path).returncode == 0
    spec(tmp_path, 3, log_spaced=True)
    out = " ".join(cli("plan", path, "--no-estimate", cwd=tmp_path).stdout.split())
    assert "not extended: its checkpoint steps move with the run's length" in out
    plan = json.loads(cli("plan", path, "--json", "--no-estimate", cwd=tmp_path).stdout)
    assert not plan["extend"] and plan["replace"]
    assert cli("apply", path, "-q", cwd=tmp_path).returncode == 77


def test_the_shipped_tiny_spec_extends_to_a_fresh_runs_store_bit_for_bit(tmp_path, shipped_store):
    """The shipped lstm_tiny, run for 2 epochs and raised to its 3: plan says extend, apply continues
    without consent, and the store equals the session's fresh apply of the shipped spec bit for bit."""
    shipped = TINY.read_text().replace("[experiment]\n", '[experiment]\nstore = "store/lstm_tiny.zarr"\n', 1)
    path = tmp_path / "s.toml"
    assert "\nepochs = 3\n" in shipped  # [training] epochs comes first (the diagnostic's probe epochs later)
    path.write_text(shipped.replace("\nepochs = 3\n", "\nepochs = 2\n", 1))
    first = cli("apply", path, "-q", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    path.write_text(shipped)
    out = " ".join(cli("plan", path, "--no-estimate", cwd=tmp_path).stdout.split())
    assert out.count("training.epochs: 2 -> 3 (continued from epoch 2)") == 4, out  # each of the 4 networks
    assert "not extended" not in out and "replace" not in out and "extend finished results (no consent needed" in out, out
    done = cli("apply", path, "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    store = tmp_path / "store/lstm_tiny.zarr"  # the name of the fresh store: checkpoint_path names it
    records = read_tasks(store).values()
    assert sorted(r["resumed_from"] for r in records if r["kind"] == "train") == [40] * 4  # continued at epoch 2
    assert sum(bool(r.get("taken_over_from")) for r in records) > 0
    a, b = bits(store), bits(shipped_store("lstm_tiny"))
    assert a.keys() == b.keys() and [k for k in b if a[k] != b[k]] == []
