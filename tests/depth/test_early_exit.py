"""Early exit ([dynamics] early_exit): samples whose state repeats leave f's batch, results equal a full run."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import torch
import xarray as xr

from tests.runner.helpers import popen_cli, run_cli, wait_for, write_spec

MAPS = """
[experiment]
name = "{name}"
store = "store/{name}.zarr"

[[model]]
name = "fixed"
source = "map:logistic"
params = {{ r = 2.8 }}

[[model]]
name = "cycle"
source = "map:logistic"
params = {{ r = 3.2 }}

[[model]]
name = "chaos"
source = "map:logistic"

[[model]]
name = "exploding"
source = "map:logistic"
params = {{ r = 5.0 }}

[input]
samples = 13

[dynamics]
steps = 300
precision = "fp64"
checkpoint_every = 100
{exit}

[[measure]]
kind = "lyapunov"
k = 1e-8
tau = 10

[[measure]]
kind = "transient_chaos"

[[measure]]
kind = "effective_dimension"

[[measure]]
kind = "token_deviation"

[[measure]]
kind = "trajectory"
samples = [0, 5]
tokens = [0]
elements = [0]

[[measure]]
kind = "twin_distance"
samples = [1, 2]
k = 1e-6

[[measure]]
kind = "pca"
samples = [3]
start = 200
"""

EXIT_VARS = ["exit_step", "exit_period"]


def _open(path) -> xr.Dataset:
    return xr.open_zarr(path, consolidated=False).load()


@pytest.fixture(scope="module")
def full_and_exit(tmp_path_factory):
    """The same maps without and with early exit (the real CLI, in this process): their directories."""
    from runner.cli import main

    out = []
    for name, exit in (("full", ""), ("exit", "early_exit = true")):
        d = tmp_path_factory.mktemp(name)
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(d)
            assert main(["apply", "-q", str(write_spec(d, MAPS.format(name=name, exit=exit)))]) == 0
        out.append(d)
    return out


def test_exited_samples_give_the_full_runs_values(full_and_exit):
    full_dir, exit_dir = full_and_exit
    full, ex = _open(full_dir / "store/full.zarr"), _open(exit_dir / "store/exit.zarr")
    xr.testing.assert_identical(full.drop_attrs(), ex.drop_vars(EXIT_VARS).drop_attrs())
    assert not set(EXIT_VARS) & set(full.data_vars)
    step, period = ex.exit_step, ex.exit_period
    # r = 2.8: the fixed point 1 - 1/r; r = 3.2: the attracting 2-cycle; r = 4: chaos, never periodic
    assert (period.sel(network="fixed") == 1).all() and (period.sel(network="cycle") == 2).all()
    assert (step.sel(network=["fixed", "cycle"]) > 0).all() and (step.sel(network=["fixed", "cycle"]) < 300).all()
    assert step.sel(network="chaos").isnull().all() and period.sel(network="chaos").isnull().all()
    # a diverged sample's NaN state repeats its bits too: it leaves the batch, its values stay NaN
    assert (ex.diverged_step.sel(network="exploding") >= 0).all() and (step.sel(network="exploding") > 0).all()


def test_a_killed_run_with_exits_resumes_to_the_same_result(tmp_path, full_and_exit):
    spec = write_spec(tmp_path, MAPS.format(name="exit", exit="early_exit = true"))
    # "cycle" left the batch at step 140: its durable point at 200 holds the replayed cycle
    proc = popen_cli("apply", spec, cwd=tmp_path, RUNNER_TEST_STALL="cycle@250")
    wait_for(lambda: (tmp_path / "store/exit.runner/stalled").exists(), proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    resumed = run_cli("apply", spec, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    reference = _open(full_and_exit[1] / "store/exit.zarr")
    xr.testing.assert_identical(_open(tmp_path / "store/exit.zarr").drop_attrs(), reference.drop_attrs())


def test_the_option_enters_task_ids_only_when_on(tmp_path, in_process):
    def ids(exit: str) -> list[str]:
        code, out, _ = in_process("plan", write_spec(tmp_path, MAPS.format(name="a", exit=exit)), "--json")
        assert code == 0
        return [t["id"] for t in json.loads(out)["tasks"]]

    off = ids("")
    assert ids("early_exit = false\nexit_period = 3") == off
    assert not set(ids("early_exit = true")) & set(off)


def test_a_measure_that_does_not_declare_exit_refuses_it(tmp_path):
    text = MAPS.format(name="toy", exit="early_exit = true") + '\n[[measure]]\nkind = "state_rms"\n'
    root = str(Path(__file__).resolve().parents[2])  # the plugin is a module of the test tree
    out = run_cli("plan", write_spec(tmp_path, text), cwd=tmp_path, TRANSIENT_PLUGINS="tests.plugins.toy_measure",
                  PYTHONPATH=root)
    assert out.returncode == 65
    assert "[dynamics] early_exit: measure state_rms ([[measure]] #8) does not allow early exit" in out.stderr


def test_tiny_albert_rows_get_the_same_bits_in_a_smaller_batch(shared_cache, monkeypatch):
    """What equality with a full run rests on for a text model: f of the rows still iterated,
    alone, gives each row the bits it gets in the whole batch (CPU, rows of 16 tokens)."""
    from models.init import TruncatedNormalInit
    from models.registry import family_for

    monkeypatch.setenv("TRANSIENT_CACHE", str(shared_cache))
    family = family_for("builtin:tiny-albert")
    gen = torch.Generator().manual_seed(0)
    for init in (None, TruncatedNormalInit(std=0.02, clip=2.0)):
        f = family.build("builtin:tiny-albert", init=init, seed=1, dtype=torch.float32, device="cpu")
        z = torch.randn(40, 16, f.config.hidden_size, generator=gen)
        mask = torch.ones(40, 16, dtype=torch.int64)
        mask[::3, 12:] = 0
        with torch.no_grad():
            whole = f.step(z, mask)
            for n in (1, 2, 3, 7, 21, 39):
                rows = torch.randperm(40, generator=gen)[:n].sort().values
                assert torch.equal(f.step(z[rows], mask[rows]), whole[rows]), n
