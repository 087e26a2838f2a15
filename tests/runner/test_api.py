"""The Python API (runner.api): the CLI's validation, tasks and store, from a script."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import runner
from runner import api
from runner.run.apply import ReplaceRefused
from runner.spec.specfile import SpecError

from .helpers import maps_spec

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def spec(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "maps.toml"
    path.write_text(textwrap.dedent(maps_spec("maps", steps=40, samples=4)))
    return path


def test_the_example_script_plans_applies_and_opens(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    run = lambda: subprocess.run([sys.executable, str(ROOT / "docs" / "api_example.py")], cwd=tmp_path,  # noqa: E731
                                 capture_output=True, text=True, env=env, timeout=300)
    out = run()
    assert out.returncode == 0, out.stderr
    assert "4 to run, 0 done" in out.stdout and "ran 4 tasks" in out.stdout
    lam = float(out.stdout.split("largest Lyapunov exponent ")[1].split()[0])
    assert lam == pytest.approx(np.log(2), abs=0.02)  # the logistic map at r = 4
    again = run()
    assert "0 to run, 4 done" in again.stdout and "ran 0 tasks" in again.stdout  # resumable: nothing twice


def test_the_api_plans_the_tasks_the_cli_plans(spec, in_process):
    import json

    planned = api.plan(spec, ["dynamics.steps=30"])
    code, out, _ = in_process("plan", spec, "--no-estimate", "--json", "--set", "dynamics.steps=30")
    assert [t["id"] for t in planned.tasks()] == [t["id"] for t in json.loads(out)["tasks"]]
    assert planned.unmet == [] and {t["state"] for t in planned.tasks()} == {"pending"}
    api.apply(planned)
    code, out, _ = in_process("apply", spec, "-q", "--set", "dynamics.steps=30")
    assert code == 0 and "nothing to do" in out  # the same store
    assert api.plan(spec, ["dynamics.steps=30"]).summary().startswith("0 to run")


def test_a_dict_spec_is_validated_as_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tables = {"experiment": {"name": "d"}, "model": [{"name": "m", "source": "map:tanh"}],
              "dynamics": {"steps": "many"}, "measure": [{"kind": "lyapunov"}]}
    with pytest.raises(SpecError) as err:
        api.plan(tables)
    assert "<dict>: [dynamics] steps: Input should be a valid integer" in str(err.value)
    with pytest.raises(SpecError, match=r"<dict>: --set dynamics.steps=-1: \[dynamics\] steps"):
        api.plan({**tables, "dynamics": {"steps": 10}}, ["dynamics.steps=-1"])


def test_apply_refuses_to_replace_finished_results_without_consent(spec):
    api.apply(spec)
    with pytest.raises(ReplaceRefused):
        api.apply(spec, ["dynamics.steps=50"])
    api.apply(spec, ["dynamics.steps=50"], replace=True)
    tree = runner.open(Path("store/maps.zarr"), history=True)
    assert isinstance(tree, xr.DataTree)
    assert tree["current"].to_dataset().sizes["deviation_step"] == 51  # the store as it is now
    (version,) = tree["history"].children.values()
    assert version.to_dataset().sizes["deviation_step"] == 41  # and as it was


def test_a_sweep_store_opens_as_a_tree_of_its_points(spec):
    spec.write_text(spec.read_text() + "\n[sweep.input]\nsamples = [2, 4]\n")
    api.apply(spec)
    tree = api.open("store/maps.zarr")
    assert set(tree.children) == {"samples=2", "samples=4"}
    assert tree["samples=2"].to_dataset().sizes["sample"] == 2


def test_on_common_steps_puts_measures_of_different_strides_on_one_axis(spec):
    api.apply(spec)
    ds = api.open("store/maps.zarr")
    every = int(np.diff(ds["neff_step"].values[:2])[0])
    aligned = api.on_common_steps(ds)
    assert "step" in aligned.dims and not any(str(d).endswith("_step") for d in aligned.dims)
    steps = aligned["step"].values
    assert set(steps) == set(ds["deviation_step"].values) | set(ds["neff_step"].values) | set(ds["lyapunov_step"].values)
    neff = aligned["effective_dimension"].isel(network=0)
    sampled = np.isin(steps, ds["neff_step"].values)
    assert every == 10 and np.isfinite(neff.values[sampled]).all() and np.isnan(neff.values[~sampled]).all()
    np.testing.assert_array_equal(neff.values[sampled], ds["effective_dimension"].isel(network=0).values)


def test_on_common_steps_on_a_store_with_checkpoints_keeps_their_step():
    """A training-as-time store: its checkpoints' training `step` is not replaced by the aligned axis."""
    import xarray as xr

    from runner.core.layout import with_internal

    counts = with_internal({}, counts="steps")
    ds = xr.Dataset({"train_loss": (("network", "train_step"), np.ones((1, 4))),
                     "svcca_final": (("network", "checkpoint"), np.ones((1, 2)))},
                    coords={"network": ["lm"], "train_step": ("train_step", [1, 2, 3, 4], counts),
                            "checkpoint": [0, 1], "step": ("checkpoint", [0, 4], counts)})
    with pytest.raises(api.ApiArgumentError, match=r"has a 'step' of its own .* pass another dim= \(its step axes: "
                                                    r"train_step\)"):
        api.on_common_steps(ds)
    aligned = api.on_common_steps(ds, dim="t")
    assert list(aligned["step"].values) == [0, 4] and list(aligned["t"].values) == [1, 2, 3, 4]


def test_a_missing_store_is_named():
    with pytest.raises(FileNotFoundError, match="no store here"):
        api.open("store/nothing.zarr")
