"""Sweeps through the real CLI: the grid in the plan, points stored together, only new points run."""

from __future__ import annotations

import json

import pytest
import xarray as xr

from runner.core.layout import internal
from runner.storage.store import read_tasks
from runner.spec.sweep import open_sweep
from tests.runner.helpers import maps_spec, run_cli, write_spec

SWEEP = """
[sweep.input]
samples = {samples}

[sweep.dynamics]
steps = [20, 30]
"""


def spec_text(samples: list[int]) -> str:
    return maps_spec("grid", steps=20, samples=4) + SWEEP.format(samples=samples)


def _records(store):
    return read_tasks(store)


@pytest.mark.slow
def test_a_sweep_runs_each_point_once_and_reads_as_one_dataset(tmp_path):
    spec = write_spec(tmp_path, spec_text([4, 8]))
    plan = run_cli("plan", spec, cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert "sweep      input.samples = [4, 8] x dynamics.steps = [20, 30]: 4 point(s)" in plan.stdout
    assert "samples=8,steps=30" in plan.stdout and "Plan: 32 to run, 0 done, in 4 point(s)" in plan.stdout

    assert run_cli("apply", spec, cwd=tmp_path).returncode == 0
    root = tmp_path / "store/grid.zarr"
    before = _records(root / "samples=4,steps=20")
    spec.write_text(spec_text([4, 8, 16]))  # one more value: only its two points run
    again = run_cli("apply", spec, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "ran 16 task(s), 32 already done" in again.stdout
    assert _records(root / "samples=4,steps=20") == before
    assert "nothing to do" in run_cli("apply", spec, cwd=tmp_path).stdout

    ds = open_sweep(root)
    assert ds["deviation"].dims[:2] == ("samples", "steps") and ds.sizes["samples"] == 3
    assert list(ds["samples"].values) == [4, 8, 16] and list(ds["steps"].values) == [20, 30]
    tree = xr.open_datatree(root, engine="zarr", consolidated=False)
    assert len(tree.children) == 6
    consolidated = xr.open_datatree(root, engine="zarr", consolidated=True)  # as the README opens it
    assert len(consolidated.children) == 6 and consolidated["samples=8,steps=30"]["deviation"].attrs["units"] == "1"

    # a point equals the same spec run alone
    alone = tmp_path / "alone"
    alone.mkdir()
    single = write_spec(alone, maps_spec("grid", steps=30, samples=8))
    assert run_cli("apply", single, cwd=alone).returncode == 0
    a = xr.open_zarr(alone / "store/grid.zarr", consolidated=False)
    b = xr.open_zarr(root / "samples=8,steps=30", consolidated=False)
    xr.testing.assert_equal(a.drop_attrs(), b.drop_attrs())
    assert internal(b.attrs)["sweep_point"] == {"input.samples": 8, "dynamics.steps": 30}
    sub = ds.sel(samples=8, steps=30).dropna("sample", how="all").dropna("deviation_step", how="all")
    xr.testing.assert_allclose(sub["lyapunov"].dropna("lyapunov_step", how="all").drop_vars(["samples", "steps"]),
                               a["lyapunov"])

    status = run_cli("status", spec, "--json", cwd=tmp_path)
    assert set(json.loads(status.stdout)["points"]) == {f"samples={n},steps={s}" for n in (4, 8, 16) for s in (20, 30)}
    assert run_cli("show", spec, cwd=tmp_path).stdout.count("sweep point") == 6
    monitor = run_cli("monitor", spec, cwd=tmp_path)
    assert monitor.returncode == 2 and "samples=4,steps=20" in monitor.stderr


def test_a_sweep_never_writes_into_a_store_without_one(tmp_path):
    plain = write_spec(tmp_path, maps_spec("mixed", steps=20, samples=4))
    assert run_cli("apply", plain, cwd=tmp_path).returncode == 0
    swept = write_spec(tmp_path, maps_spec("mixed", steps=20, samples=4) + SWEEP.format(samples=[4]), "swept.toml")
    out = run_cli("apply", swept, cwd=tmp_path)
    assert out.returncode == 65 and "holds a run without a sweep" in out.stderr
    assert run_cli("apply", swept, cwd=tmp_path).returncode == 65
    write_spec(tmp_path, maps_spec("other", steps=20, samples=4) + SWEEP.format(samples=[4]), "other.toml")
    assert run_cli("apply", tmp_path / "other.toml", cwd=tmp_path).returncode == 0
    plain_on_sweep = write_spec(tmp_path, maps_spec("other", steps=20, samples=4), "plain.toml")
    out = run_cli("apply", plain_on_sweep, cwd=tmp_path)
    assert out.returncode == 65 and "holds a sweep" in out.stderr


def test_prepare_refuses_a_sweep_naming_its_file_whether_given_a_path_or_a_read_spec(tmp_path, monkeypatch):
    from runner.run.prepare import prepare, prepare_all, read_spec
    from runner.spec.specfile import SpecError

    monkeypatch.chdir(tmp_path)
    spec = write_spec(tmp_path, spec_text([4, 8]))
    for given in (spec, read_spec(spec)):
        with pytest.raises(SpecError) as err:
            prepare(given)
        assert str(spec) in str(err.value) and "[sweep]" in str(err.value) and "SpecFile(" not in str(err.value)
    sweep, points = prepare_all(read_spec(spec), ["model[1].params.g=0.75"])  # overrides apply to a read spec too
    assert len(points) == 4 and all(p.attrs["overrides"] == ["model[1].params.g=0.75"] for p in points)
