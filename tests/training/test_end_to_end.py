"""The tiny training study through the real CLI: kill -9 mid-training, resume, compare stores."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import xarray as xr
from safetensors.torch import load_file
from training_helpers import ROOT, tiny_spec

from runner.run.apply import apply
from runner.run.prepare import prepare
from runner.storage.store import read_tasks

RUNNER = [sys.executable, "-m", "runner.cli"]


def _env(**extra):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    env.pop("RUNNER_TEST_STALL", None)
    env.update(extra)
    return env


@pytest.mark.slow
def test_kill_resume_matches_uninterrupted_run(tmp_path):
    ref_spec = tiny_spec(tmp_path, "ref")
    out = apply(prepare(ref_spec), quiet=True)
    assert not out.failed and len(out.ran) == 91

    spec = tiny_spec(tmp_path, "killed")
    # step 27 is mid-epoch 2 of the first network, 7 steps after its last durable point (20)
    proc = subprocess.Popen([*RUNNER, "apply", "-q", str(spec)], cwd=tmp_path, env=_env(RUNNER_TEST_STALL="lm@27"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    marker = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = list((tmp_path / "killed.runner" / "checkpoints").glob("*/*/stalled"))
        if found:
            marker = found[0]
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    assert marker is not None, "the run never reached the stall step"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    marker.unlink()

    status = subprocess.run([*RUNNER, "status", "--json", str(spec)], cwd=tmp_path, env=_env(),
                            capture_output=True, text=True, check=True)
    tasks = json.loads(status.stdout)["tasks"]
    assert any(t["state"] == "done" for t in tasks) and any(t["state"] != "done" for t in tasks)

    resumed = subprocess.run([*RUNNER, "apply", "-q", str(spec)], cwd=tmp_path, env=_env(), capture_output=True,
                             text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    again = subprocess.run([*RUNNER, "apply", "-q", str(spec)], cwd=tmp_path, env=_env(), capture_output=True,
                           text=True, timeout=120)
    assert again.returncode == 0 and "nothing to do" in again.stdout

    a = xr.open_zarr(tmp_path / "ref.zarr")
    b = xr.open_zarr(tmp_path / "killed.zarr")
    assert {"network", "checkpoint", "layer", "word", "tagset"} <= set(b.dims)
    assert "epoch" in b.coords and "step" in b.coords
    records = read_tasks(tmp_path / "killed.zarr")
    lm_train = next(r for r in records.values() if r["kind"] == "train" and r["network"] == 0)
    assert lm_train["resumed_from"] == 20
    for name in a.data_vars:
        if name == "checkpoint_path":
            continue
        np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)
    for rel_a, rel_b in zip(a.checkpoint_path.values.ravel(), b.checkpoint_path.values.ravel()):
        assert rel_a and rel_b
        wa, wb = load_file(str(tmp_path / rel_a)), load_file(str(tmp_path / rel_b))
        assert all(np.array_equal(wa[k].numpy(), wb[k].numpy()) for k in wa)
    # training curves and the measures are in the store
    assert np.isfinite(b.train_loss.values).all() and np.isfinite(b.val_perplexity.values).all()
    final = b.svcca_final.sel(network="lm").sel(layer="lstm1").values
    assert abs(final[-1] - 1.0) < 1e-6 and np.isfinite(final).all()
    assert np.isfinite(b.chi_mean.sel(network="lm").values).all()
    assert np.isfinite(b.probe_accuracy.sel(network="lm").sel(layer="lstm2").values).all()
    assert np.isnan(b.lca.sel(network="lm").isel( checkpoint=0).values).all()
    assert np.isfinite(b.lca.sel(network="lm").isel( checkpoint=1).values).all()
    # known answers: a layer is perfectly similar to itself, and the allocations of a checkpoint
    # interval add up to the loss change over it (path integral of the gradient, Lan et al. 2019)
    layers = b.svcca_layers.sel(network="lm").isel(checkpoint=-1)
    for name in ("embedding", "lstm1", "lstm2"):
        assert layers.sel(layer=name, layer_other=name).item() == pytest.approx(1.0, abs=1e-6)
    total = b.lca.sel(network="lm").sum("parameter_group").values[1:]
    np.testing.assert_allclose(total, b.loss_change.sel(network="lm").values[1:], rtol=0.05, atol=1e-3)
    # sparsity chi of a d-dimensional vector lies in [1/sqrt(d), 1]
    chi = b.chi_mean.sel(network="lm").values
    assert ((chi > 0) & (chi <= 1)).all()


def test_plan_cli_lists_tasks(tmp_path):
    spec = tiny_spec(tmp_path)
    res = subprocess.run([*RUNNER, "plan", "--json", str(spec)], cwd=tmp_path, env=_env(), capture_output=True,
                         text=True, check=True)
    plan = json.loads(res.stdout)
    assert plan["checkpoint_steps"] == [0, 1, 3, 5, 7, 20, 40, 60]
    kinds = {t["kind"] for t in plan["tasks"]}
    assert kinds == {"train", "svcca", "sparsity", "diagnostic", "lca", "entropy", "distances"}
    bad = tiny_spec(tmp_path, "bad", replace={"bptt = 10": "bpt = 10"})
    res = subprocess.run([*RUNNER, "plan", str(bad)], cwd=tmp_path, env=_env(), capture_output=True, text=True)
    assert res.returncode == 65 and "[training] bpt: unknown key" in res.stderr
