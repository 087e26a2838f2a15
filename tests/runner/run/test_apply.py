"""`runner apply` end to end, in a subprocess, on reference maps with known behaviour."""

from __future__ import annotations

import json
import re
import math
import signal
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from runner.core.layout import counted, internal
from tests.runner.helpers import maps_spec, popen_cli, run_cli, wait_for, write_spec


def _open(path: Path) -> xr.Dataset:
    return xr.open_zarr(path, consolidated=False).load()


def _events(store: Path) -> list[dict]:
    return [json.loads(line) for line in store.with_suffix(".runner").joinpath("events.jsonl").read_text().splitlines()]


def test_reference_maps_give_known_exponents_through_the_runner(tmp_path):
    spec = write_spec(tmp_path, maps_spec("maps", steps=1000, samples=32, extra_models="""
        [[model]]
        name = "henon"
        source = "map:henon"
        """))
    result = run_cli("apply", spec, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "xr.open_zarr" in result.stdout
    ds = _open(tmp_path / "store/maps.zarr")
    rate = ds.lyapunov_per_step.mean(["sample", "lyapunov_step"]).to_series()
    rate.index = ds.model.values
    assert rate["logistic"] == pytest.approx(math.log(2), abs=0.03)
    # lambda asked for in fp64 is stored in fp64 (fp32 specs keep float32 stores)
    assert ds.lyapunov.dtype == ds.lyapunov_per_step.dtype == np.float64
    assert rate["henon"] == pytest.approx(0.42, abs=0.03)
    assert rate["tanh"] < 0
    # the contracting reservoir is never chaotic; the chaotic maps stay chaotic to the end
    chaos = ds.fraction_never_chaotic.to_series()
    chaos.index = ds.model.values
    assert chaos["tanh"] == 1.0 and chaos["logistic"] == 0.0
    # a map has one token: the token deviation does not apply (D(t) would be 0 by construction)
    assert ds.deviation.isnull().all() and ds.sync_offset.isnull().all()
    assert ds.sync_outcome.attrs["flag_meanings"].split()[int(ds.sync_outcome.max())] == "not_applicable"
    assert (ds.sync_outcome == ds.sync_outcome.max()).all()
    plan = json.loads(run_cli("plan", spec, "--json", cwd=tmp_path).stdout)["tasks"]
    assert {t["network"] for t in plan if t.get("not_applicable")} == {"logistic", "henon", "tanh"}
    for name, var in ds.data_vars.items():
        unitless = var.dtype == bool or var.dtype.kind in "OUST" or "flag_meanings" in var.attrs
        assert var.attrs.get("long_name") and ("units" in var.attrs) != unitless, name
    units = {name: var.attrs.get("units") for name, var in {**ds.data_vars, **ds.coords}.items()}
    # UDUNITS units: counts of steps and exponents per step are dimensionless, long_name says what they count
    assert units["lyapunov_per_step"] == units["lyapunov_step"] == "1"
    assert units["chaos_length"] == units["sync_offset"] == units["diverged_step"] == "1"
    assert ds.chaos_length.attrs["long_name"].endswith("(steps)") and counted(ds.lyapunov_step.attrs) == "steps"
    assert units["chaos_censored"] is None and units["effective_dimension"] == "1"
    outcome = ds.chaos_outcome.attrs["flag_meanings"].split()
    assert [outcome[int(v)] for v in ds.chaos_outcome.sel(network="logistic").values] == \
        ["censored" if c else "chaotic_transient" for c in ds.chaos_censored.sel(network="logistic").values]
    assert {outcome[int(v)] for v in ds.chaos_outcome.sel(network="tanh").values} == {"never_chaotic"}
    assert internal(ds.attrs)["package_versions"]["torch"]
    assert internal(ds.attrs)["spec_toml"] == spec.read_text()


@pytest.mark.slow
def test_apply_is_idempotent_and_reruns_only_what_changed(tmp_path):
    spec = write_spec(tmp_path, maps_spec("idem"))
    assert run_cli("apply", spec, cwd=tmp_path).returncode == 0
    store = tmp_path / "store/idem.zarr"
    before = {p: p.stat().st_mtime_ns for p in store.rglob("c/**/*") if p.is_file()}
    again = run_cli("apply", spec, cwd=tmp_path)
    assert again.returncode == 0 and "nothing to do" in again.stdout
    assert {p: p.stat().st_mtime_ns for p in store.rglob("c/**/*") if p.is_file()} == before
    neff_before = _open(store).effective_dimension.values

    spec.write_text(spec.read_text().replace("k = 1e-8", "k = 1e-7"))
    plan = run_cli("plan", spec, "--json", cwd=tmp_path)
    pending = [t for t in json.loads(plan.stdout)["tasks"] if t["state"] == "pending"]
    assert {t["measure"] for t in pending} == {"lyapunov", "transient_chaos"} and len(pending) == 4
    assert {t["action"] for t in pending} == {"replace"}
    assert all(t["changes"] == ["k: 1e-08 -> 1e-07"] for t in pending), pending
    refused = run_cli("apply", spec, cwd=tmp_path)  # finished results are replaced only when asked
    assert refused.returncode == 77
    assert "replace logistic lyapunov, transient_chaos; tanh lyapunov, transient_chaos: k: 1e-08 -> 1e-07" \
        in refused.stderr
    changed = run_cli("apply", spec, "--replace", cwd=tmp_path)
    assert changed.returncode == 0 and "ran 4 task(s)" in changed.stdout
    ds = _open(store)
    np.testing.assert_array_equal(ds.effective_dimension.values, neff_before)
    assert ds.lyapunov.attrs["k"] == 1e-7

    # a new tau changes the exponent's time axis: its arrays are remade, and only the exponent
    # and what derives from it run again
    spec.write_text(spec.read_text().replace("tau = 1", "tau = 4"))
    retau = run_cli("apply", spec, "--replace", cwd=tmp_path)
    assert retau.returncode == 0 and "ran 4 task(s)" in retau.stdout, retau.stdout
    ds = _open(store)
    assert list(ds.lyapunov_step.values[:3]) == [0, 4, 8] and ds.lyapunov.notnull().all()
    assert ds.lyapunov.attrs["tau"] == 4 and (ds.chaos_length % 4 == 0).all()


RESUME = maps_spec("resume", steps=3000, samples=64, checkpoint_every=100, n=256)


@pytest.fixture(scope="module")
def resume_reference(tmp_path_factory):
    """The uninterrupted run the interrupted ones must equal (one for the three ways to stop)."""
    reference = tmp_path_factory.mktemp("ref")
    assert run_cli("apply", write_spec(reference, RESUME), cwd=reference).returncode == 0
    return reference


@pytest.mark.slow
@pytest.mark.parametrize("how", ["kill -9", "ctrl-c", "sigterm"])
def test_interrupted_run_resumes_to_the_same_result(tmp_path, how, resume_reference):
    text, reference = RESUME, resume_reference
    spec = write_spec(tmp_path, text)
    # the second network's pass stops at step 1550, past its durable point at 1500, until signalled
    proc = popen_cli("apply", spec, cwd=tmp_path, RUNNER_TEST_STALL="tanh@1550")
    wait_for(lambda: (tmp_path / "store/resume.runner/stalled").exists(), proc)
    proc.send_signal({"kill -9": signal.SIGKILL, "ctrl-c": signal.SIGINT, "sigterm": signal.SIGTERM}[how])
    _, err = proc.communicate(timeout=120)
    if how == "kill -9":
        assert proc.returncode == -signal.SIGKILL
    else:
        assert proc.returncode == 130 and "resume" in err

    status = json.loads(run_cli("status", tmp_path / "store/resume.zarr", "--json", cwd=tmp_path).stdout)
    assert status["state"] == "interrupted"
    done_before = {t["id"] for t in status["tasks"] if t["state"] in ("done", "n/a")}  # n/a: token_deviation of maps
    # the first network is finished, its derived chaos length included: it ran as soon as it could
    assert done_before == {t["id"] for t in status["tasks"] if t["network_index"] == 0}
    plan = " ".join(run_cli("plan", spec, "--no-estimate", cwd=tmp_path).stdout.split())
    assert re.search(r"tanh lyapunov pending \(resumes from step 1500\)", plan), plan  # issue 53: resume points

    resumed = run_cli("apply", spec, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    done = [e for e in _events(tmp_path / "store/resume.zarr") if e["event"] == "task_done" and "resumed_from" in e]
    assert done[-1]["resumed_from"] == 1500, "the interrupted pass did not resume from its last durable point"
    assert f"ran 4 task(s), {len(done_before)} already done" in resumed.stdout  # logistic's pass not recomputed
    a, b = _open(tmp_path / "store/resume.zarr"), _open(reference / "store/resume.zarr")
    xr.testing.assert_equal(a.drop_attrs(), b.drop_attrs())


def test_second_apply_on_a_store_is_refused(tmp_path):
    spec = write_spec(tmp_path, maps_spec("locked", steps=20000, samples=64, checkpoint_every=1000, n=256))
    proc = popen_cli("apply", spec, cwd=tmp_path)
    try:
        wait_for(lambda: (tmp_path / "store/locked.runner/apply.pid").exists(), proc)
        second = run_cli("apply", spec, cwd=tmp_path)
        assert second.returncode == 75
        assert "being written by another `runner apply`" in second.stderr
        assert second.stderr.count("\n") == 1
    finally:
        proc.kill()
        proc.communicate()


def test_divergence_is_recorded_and_the_run_goes_on(tmp_path):
    spec = write_spec(tmp_path, maps_spec("nan", steps=200, extra_models="""
        [[model]]
        name = "exploding"
        source = "map:logistic"
        params = { r = 5.0 }
        """))
    result = run_cli("apply", spec, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    ds = _open(tmp_path / "store/nan.zarr")
    diverged = ds.diverged_step.to_series().unstack()
    diverged.index = ds.model.values
    assert (diverged.loc["exploding"] > 0).all()
    assert diverged.loc["logistic"].isnull().all() and diverged.loc["tanh"].isnull().all()
    exploding = ds.lyapunov.sel(network="exploding")
    assert exploding.isnull().any() and ds.lyapunov.sel(network="logistic").notnull().all()
    assert np.isfinite(ds.effective_dimension.sel(network="logistic")).all()


def test_status_and_show(tmp_path):
    spec = write_spec(tmp_path, maps_spec("status"))
    before = run_cli("status", spec, "--json", cwd=tmp_path)
    assert before.returncode == 66 and "no such store" in before.stderr and not before.stdout
    assert run_cli("apply", spec, cwd=tmp_path).returncode == 0
    status = run_cli("status", spec, cwd=tmp_path)
    assert status.returncode == 0 and "done" in status.stdout and "6/6 tasks done, 2 not applicable" in status.stdout  # token_deviation: maps have one token
    show = run_cli("show", tmp_path / "store/status.zarr", cwd=tmp_path)
    assert "lyapunov_per_step" in show.stdout and "completed tasks: 8" in show.stdout
    assert "mean lambda/step" in show.stdout and "logistic=0.69" in show.stdout  # ln 2


def test_a_spec_run_from_another_folder_says_where_its_relative_store_goes(tmp_path):
    """`runner plan ../proj/specs/x.toml` from elsewhere plans into ./store: plan says so, and names the
    store the spec has beside it (issue 37)."""
    from tests.runner.helpers import maps_spec, run_cli, write_spec

    project = tmp_path / "proj"
    (project / "specs").mkdir(parents=True)
    spec = write_spec(project / "specs", maps_spec("where", steps=20, samples=4))
    assert run_cli("apply", "specs/spec.toml", cwd=project).returncode == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = run_cli("plan", spec, "--no-estimate", cwd=elsewhere)
    assert out.returncode == 0, out.stderr
    said = " ".join(out.stdout.split())  # plan wraps its lines to the terminal
    assert "relative to the working directory" in said and f"{project / 'store' / 'where.zarr'} exists" in said
    assert f"run from {project}" in said
    here = run_cli("plan", "specs/spec.toml", "--no-estimate", cwd=project)
    said = " ".join(here.stdout.split())
    assert f"store {project / 'store' / 'where.zarr'} " in said and "relative to the working" not in said
    # a relative spec path from a sibling folder, and the project's parent folder (issue 53, item 3)
    for cwd, given in ((elsewhere, "../proj/specs/spec.toml"), (tmp_path, "proj/specs/spec.toml")):
        out = run_cli("plan", given, "--no-estimate", cwd=cwd)
        said = " ".join(out.stdout.split())
        assert out.returncode == 0 and f"{project / 'store' / 'where.zarr'} exists" in said, (given, said)
        assert f"run from {project}" in said
