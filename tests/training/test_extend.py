"""More epochs continue a finished training run (issue 37): the longer run takes the finished one's
checkpoints and resume file, trains the epochs added, and its store equals a fresh run's bit for
bit (the shipped tiny spec, real CLI runs); a schedule that moves with the run's length is
recomputed, and plan says why."""

from __future__ import annotations

import json
import re
import os
import subprocess
from pathlib import Path

import numpy as np
import xarray as xr
from training_helpers import ROOT, TINY

from runner.storage.history import versions
from runner.storage.store import read_tasks
from tests.runner import launcher

#: The shipped tiny spec's log-spaced steps: within the first epoch, whatever the number of epochs.
SHIPPED_LOG_SPACED = "log_spaced = { start = 1, stop = 20, count = 4 }\n"


def spec(folder: Path, epochs: int) -> Path:
    """lstm_tiny with two LMs and the measures that read one checkpoint, its final one or a pair, whose
    log-spaced steps spread over the whole run (no ``stop``): they move with the run's length."""
    text = TINY.read_text()
    head, _, _ = text.partition("[[model]]")
    head = head.replace("epochs = 3\n", f"epochs = {epochs}\n", 1).replace('seed = 0\n', 'seed = 0\nstore = '
                                                                             '"store/t.zarr"\n', 1)
    assert SHIPPED_LOG_SPACED in head
    head = head.replace(SHIPPED_LOG_SPACED, "log_spaced = { start = 1, count = 4 }\n")
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
    return launcher.run(args, cwd=cwd, env=env, timeout=600)


def bits(path: Path) -> dict[str, tuple]:
    ds = xr.open_zarr(path, consolidated=False).load()
    out = {}
    for name, v in ds.variables.items():
        a = np.asarray(v.values)
        out[name] = (v.dims, a.dtype.str, a.tolist() if a.dtype.kind in "OTUS" else a.tobytes())
    return out


def test_a_schedule_that_moves_with_the_length_is_recomputed_and_plan_says_why(tmp_path):
    path = spec(tmp_path, 2)
    assert cli("apply", path, "-q", cwd=tmp_path).returncode == 0
    spec(tmp_path, 3)
    out = " ".join(cli("plan", path, "--no-estimate", cwd=tmp_path).stdout.split())
    assert "not extended: its checkpoint steps move with the run's length" in out
    plan = json.loads(cli("plan", path, "--json", "--no-estimate", cwd=tmp_path).stdout)
    assert not plan["extend"] and plan["replace"]
    assert cli("apply", path, "-q", cwd=tmp_path).returncode == 77


def test_more_epochs_of_the_shipped_tiny_spec_extend_and_equal_a_fresh_run_bit_for_bit(tmp_path, shipped_store):
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
    assert "recomputed on the new run's checkpoints" in out and "kept: the same checkpoints" in out
    said = re.search(r"Plan: (\d+) to run, 0 done, (\d+) taken over", out)
    assert said, out
    done = cli("apply", path, "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # one count in plan and apply (issue 53): what plan said would run ran, what it said is taken over was
    assert f"ran {said.group(1)} task(s), 0 already done, {said.group(2)} taken over" in done.stdout, done.stdout
    store = tmp_path / "store/lstm_tiny.zarr"  # the name of the fresh store: checkpoint_path names it
    records = read_tasks(store).values()
    assert sorted(r["resumed_from"] for r in records if r["kind"] == "train") == [40] * 4  # continued at epoch 2
    assert any(r.get("taken_over_from") for r in records)  # measures of kept checkpoints: not run again
    assert cli("verify", store, cwd=tmp_path).returncode == 0
    (version,) = versions(store)
    assert version.manifest["reason"] == "extend"
    a, b = bits(store), bits(shipped_store("lstm_tiny"))
    assert a.keys() == b.keys() and [k for k in b if a[k] != b[k]] == []


def test_why_a_longer_training_run_is_or_is_not_continued(tmp_path):
    """The training study's verdict on one finished training task (runner.studies.training.extend):
    not a longer run; no resume file kept; a run that stopped before its last epoch; continued."""
    from types import SimpleNamespace

    import torch

    from runner.checkpointed.files import RESUME, checkpoint_dir, save
    from runner.plugin.study import Extension
    from runner.storage.store import runner_dir
    from runner.studies.training.extend import _train

    def key(epochs, steps):
        return {"network": "lm", "training": {"epochs": epochs, "lr": 20.0}, "steps": steps}

    p = SimpleNamespace(store_path=tmp_path / "s.zarr", labels=["lm"])
    longer = SimpleNamespace(network=0, key=key(5, [5, 10, 20, 30, 40]))
    assert _train(p, longer, "old", "not a key") is None
    assert _train(p, longer, "old", {**key(3, [5, 10, 20]), "network": "lm2"}) is None  # another change
    assert _train(p, SimpleNamespace(network=0, key=key(3, [5, 10, 20])), "old", key(5, [5, 10, 20, 30, 40])) is None
    assert not _train(p, longer, "old", key(3, [5, 12, 20])).extends  # the schedule moved
    assert _train(p, longer, "old", key(3, [5, 10, 20])) == Extension("no resume state of the 3-epoch run was kept",
                                                                     extends=False)
    resume = checkpoint_dir(runner_dir(p.store_path), "lm", "old") / RESUME
    resume.parent.mkdir(parents=True)
    save(resume, {"w": torch.zeros(1)}, {"train_id": "old", "done": "1", "epoch": "2"})
    assert _train(p, longer, "old", key(3, [5, 10, 20])) == Extension("the 3-epoch run stopped early, at epoch 2",
                                                                     extends=False)
    save(resume, {"w": torch.zeros(1)}, {"train_id": "old", "done": "1", "epoch": "3"})
    assert _train(p, longer, "old", key(3, [5, 10, 20])) == Extension("continued from epoch 3")
