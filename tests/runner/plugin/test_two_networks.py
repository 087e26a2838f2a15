"""A checkpointed study of two networks and a device on the kit (tests/plugins/toy_two_networks.py, at most
120 lines): planned and applied through the real CLI, through ``--executor ray``, and resumed after
``kill -9`` with the values of an uninterrupted run, bit for bit."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from tests.runner import launcher
from tests.runner.helpers import cli_env, write_spec
from tests.runner.plugin.test_plugins import killed_and_resumed

ROOT = Path(__file__).resolve().parents[3]
PLUGIN = "tests.plugins.toy_two_networks"

COUNTING = """
[experiment]
name = "counting"
study = "counting"
seed = 4

[counting]
epochs = 3
steps_per_epoch = 8
device = "cpu"

[[measure]]
kind = "svcca"
layers = ["hidden", "act"]

[[measure]]
kind = "svcca"
compare = "seed"
networks = ["tanh"]
reference = ["relu"]
layers = ["hidden", "act"]

[[measure]]
kind = "entropy"
"""


def cli(*args, cwd: Path, **env) -> subprocess.CompletedProcess:
    out = launcher.run([str(a) for a in args], cwd=cwd, timeout=600,
                       env=cli_env(cwd, TRANSIENT_PLUGINS=PLUGIN, PYTHONPATH=str(ROOT), **env))
    assert out.returncode == 0, out.stderr
    return out


def applied(root: Path, *flags: str, **env) -> xr.Dataset:
    root.mkdir()
    cli("apply", write_spec(root, COUNTING), "-q", *flags, cwd=root, **env)
    return xr.open_zarr(root / "store" / "counting.zarr").load()


def test_two_networks_on_the_kit_plan_apply_and_resume_after_kill_equal(tmp_path):
    assert len((ROOT / "tests" / "plugins" / "toy_two_networks.py").read_text().splitlines()) <= 120
    (tmp_path / "plan").mkdir()
    plan = cli("plan", write_spec(tmp_path / "plan", COUNTING), "--no-estimate", cwd=tmp_path / "plan").stdout
    assert plan.count(" train ") == 2 and "tanh" in plan and "relu" in plan
    ds = applied(tmp_path / "ref")
    assert list(ds["network"].values) == ["tanh", "relu"] and list(ds["step"].values) == [0, 8, 16, 24]
    assert list(ds["layer"].values) == ["embedding", "hidden", "act", "logits"]
    # one seed, and a nonlinearity has no weights: the two networks start with the same hidden layer
    np.testing.assert_allclose(ds["svcca_seed"].sel(network="tanh", layer="hidden").isel(checkpoint=0), 1.0, atol=1e-6)
    assert float(ds["cka_seed"].sel(network="tanh", layer="act").isel(checkpoint=-1)) < 1 - 1e-6  # they part
    assert np.isnan(ds["svcca_seed"].sel(network="relu")).all()  # the measure names tanh only
    for net in ("tanh", "relu"):
        np.testing.assert_allclose(ds["svcca_final"].sel(network=net, layer=["hidden", "act"]).isel(checkpoint=-1),
                                   1.0, atol=1e-6)
        loss = ds["train_loss"].sel(network=net).values
        # from about ln(vocab) towards the entropy of the steps (odds 6:3:1), the best a next-token guess does
        entropy = -sum(p * math.log(p) for p in (0.6, 0.3, 0.1))
        assert abs(loss[0] - math.log(10)) < 0.5 and loss[-1] < loss[0] and loss[-1] - entropy < 0.2, loss
    assert np.isfinite(ds["layer_entropy"].sel(network="tanh").values).all()

    killed = tmp_path / "killed"
    killed.mkdir()
    resumed = killed_and_resumed(killed, COUNTING, "counting", stall="relu@12", plugins=PLUGIN)
    xr.testing.assert_equal(resumed.drop_attrs(), ds.drop_attrs())


@pytest.mark.ray
@pytest.mark.slow
def test_two_networks_on_the_kit_through_ray_equal_a_local_run(tmp_path):
    pytest.importorskip("ray", reason="the Ray executor's tests need ray: pip install -e '.[ray]'")
    local = applied(tmp_path / "local")
    through_ray = applied(tmp_path / "ray", "--executor", "ray", TRANSIENT_RAY_CPUS="2")
    workers = list((tmp_path / "ray" / "store" / "counting.runner" / "workers").glob("*.pid"))
    assert len(workers) >= 2  # the groups ran as Ray tasks
    xr.testing.assert_equal(through_ray.drop_attrs(), local.drop_attrs())


@pytest.mark.requires_gpu
def test_two_networks_on_cuda_resume_after_kill_equal(tmp_path):
    """``device = "cuda"`` in the study's table: the kit trains and measures there, and a killed run resumes to
    the bits of an uninterrupted one on the same device."""
    text = COUNTING.replace('device = "cpu"', 'device = "cuda"')
    (tmp_path / "ref").mkdir()
    cli("apply", write_spec(tmp_path / "ref", text), "-q", cwd=tmp_path / "ref")
    recorded = json.loads(cli("show", tmp_path / "ref" / "store" / "counting.zarr", "--json", cwd=tmp_path / "ref").stdout)
    assert recorded["tasks"] and all(t["device"].startswith("cuda") for t in recorded["tasks"]), recorded["tasks"]
    killed = tmp_path / "killed"
    killed.mkdir()
    resumed = killed_and_resumed(killed, text, "counting", stall="relu@12", plugins=PLUGIN)
    uninterrupted = xr.open_zarr(tmp_path / "ref" / "store" / "counting.zarr").load()
    xr.testing.assert_equal(resumed.drop_attrs(), uninterrupted.drop_attrs())
