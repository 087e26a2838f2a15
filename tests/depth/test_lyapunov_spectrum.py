"""The Lyapunov spectrum measure (issue 54) through ``runner apply``, against known answers: a constant
linear map and Arnold's cat map (plug-in families, tests/plugins/spectrum_maps.py), the Hénon map,
Lorenz-96; the sum rule (the full spectrum sums to the time average of ln|det J|); the top exponent
against the ``lyapunov`` measure's. Each reference value's source is cited where it is used."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from runner.studies.depth.measures.lyapunov import TWIN_OUTCOMES
from tests.runner.helpers import run_cli, write_spec

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = {"TRANSIENT_PLUGINS": "tests.plugins.spectrum_maps", "PYTHONPATH": str(ROOT)}

SPEC = """
[experiment]
name = "{name}"
store = "store/{name}.zarr"
{models}
[input]
samples = {samples}

[dynamics]
steps = {steps}
precision = "{precision}"

[[measure]]
kind = "lyapunov_spectrum"
{spectrum}
{more}
"""


def _model(name: str, source: str, params: str = "{}") -> str:
    return f'\n[[model]]\nname = "{name}"\nsource = "{source}"\nparams = {params}\n'


def _apply(tmp_path, name, models, *, precision="fp64", steps=300, samples=4, spectrum="", more=""):
    """Apply the spec through the CLI (plug-in maps loaded): the store and show --json's results."""
    write_spec(tmp_path, SPEC.format(name=name, models=models, samples=samples, steps=steps, precision=precision,
                                     spectrum=spectrum, more=more), f"{name}.toml")
    applied = run_cli("apply", f"{name}.toml", cwd=tmp_path, **PLUGINS)
    assert applied.returncode == 0, applied.stderr
    shown = run_cli("show", f"store/{name}.zarr", "--json", cwd=tmp_path, **PLUGINS)
    assert shown.returncode == 0, shown.stderr
    results = {r["variable"]: r["per_network"] for r in json.loads(shown.stdout)["results"]}
    ds = xr.open_zarr(tmp_path / f"store/{name}.zarr", consolidated=False)
    return ds.assign_coords(network=ds.model.values), results


@pytest.mark.parametrize("precision,tolerance", [("fp64", 1e-6), ("fp32", 1e-4)])
def test_linear_and_cat_maps_give_their_eigenvalues(tmp_path, precision, tolerance):
    """x -> A x, A triangular with eigenvalues 1.1, -0.5, 0.25: the exponents are the logs of their
    moduli (Oseledets' theorem for a constant matrix). Arnold's cat map: +-ln((3 + sqrt 5) / 2) = +-0.9624
    (Ott, Chaos in Dynamical Systems, 2nd ed., Sec. 4.1). Past the basis' alignment (start = 100) exact
    to 1e-6 in fp64; the sum is ln|det A| per step (the sum rule)."""
    models = _model("linear", "map:linear") + _model("cat", "map:cat")
    ds, results = _apply(tmp_path, "linear", models, precision=precision, spectrum="m = 3\nstart = 100")
    linear = ds.lyapunov_spectrum.sel(network="linear").values
    expected = np.log([1.1, 0.5, 0.25])
    np.testing.assert_allclose(linear, np.broadcast_to(expected, linear.shape), atol=tolerance, rtol=0)
    np.testing.assert_allclose(linear.sum(1), math.log(1.1 * 0.5 * 0.25), atol=tolerance, rtol=0)
    cat = ds.lyapunov_spectrum.sel(network="cat").values
    golden = math.log((3 + math.sqrt(5)) / 2)
    assert golden == pytest.approx(0.9624, abs=1e-4)
    np.testing.assert_allclose(cat[:, :2], np.broadcast_to([golden, -golden], (4, 2)), atol=tolerance, rtol=0)
    assert np.isnan(cat[:, 2]).all()  # m = 3 > the cat map's 2 dimensions: the third is NaN
    np.testing.assert_allclose(cat[:, :2].sum(1), 0.0, atol=tolerance)  # det = 1: area-preserving
    # Kaplan-Yorke: linear 1 + ln 1.1 / ln 2 (Kaplan & Yorke 1979's formula), cat 2 (a lower bound: sum 0)
    np.testing.assert_allclose(ds.kaplan_yorke.sel(network="linear").values, 1 + math.log(1.1) / math.log(2),
                               atol=10 * tolerance)
    assert results["lyapunov_spectrum_1"]["cat"] == pytest.approx(golden, abs=tolerance)
    assert (ds.lyapunov_spectrum_space.values == 0).all()  # the full space
    assert (ds.lyapunov_spectrum_steps.values == 200).all()


@pytest.mark.parametrize("precision", ["fp64", "fp32"])
def test_henon_spectrum_sum_rule_and_the_lyapunov_measure(tmp_path, precision):
    """Hénon a = 1.4, b = 0.3: 0.41922 and -1.62319, D_KY 1.25827 (Sprott, Chaos and Time-Series
    Analysis, 2003, Table A.1), within 0.01 over 3000 steps of 16 samples; det J = -b at every step, so
    the full spectrum sums to ln 0.3 per step (1e-6 in fp64); the top exponent is the ``lyapunov``
    measure's (Algorithm A1, its defaults, valid here: tests/depth/test_lyapunov_regime.py) within 0.01."""
    models = _model("m", "map:henon", "{ a = 1.4, b = 0.3 }")
    ds, results = _apply(tmp_path, "henon", models, precision=precision, steps=3000, samples=16,
                         spectrum="m = 2", more='[[measure]]\nkind = "lyapunov"')
    lam = ds.lyapunov_spectrum.isel(network=0).values
    assert lam.shape == (16, 2)
    assert lam[:, 0].mean() == pytest.approx(0.41922, abs=0.01)
    assert lam[:, 1].mean() == pytest.approx(-1.62319, abs=0.01)
    np.testing.assert_allclose(lam.sum(1), math.log(0.3), atol=1e-6 if precision == "fp64" else 1e-4, rtol=0)
    assert results["kaplan_yorke"]["m"] == pytest.approx(1.25827, abs=0.01)
    assert results["lyapunov_positive_sum"]["m"] == pytest.approx(0.41922, abs=0.01)
    stayed = ds.lyapunov_per_step.where(ds.lyapunov_twin == TWIN_OUTCOMES.index("stayed"))
    assert float(stayed.mean()) == pytest.approx(float(lam[:, 0].mean()), abs=0.01)
    # the local exponents per interval average to the spectrum; the running D_KY ends at D_KY
    local = ds.lyapunov_spectrum_local.isel(network=0).values
    np.testing.assert_allclose(local.mean(1), lam, atol=1e-9)
    np.testing.assert_allclose(ds.kaplan_yorke_running.isel(network=0).values[:, -1],
                               ds.kaplan_yorke.isel(network=0).values, atol=1e-12)


def test_lorenz96_leading_exponent_and_kaplan_yorke_dimension(tmp_path):
    """Lorenz-96, N = 40, F = 8: the leading exponent 1.68 per time unit and D_KY 27.1 (Karimi & Paul,
    Chaos 20, 043105 (2010), their Lyapunov spectrum at N = 40, F = 8), the full spectrum of one orbit
    over 90 time units (dt = 0.05, 2000 steps, the first 200 left out), within 0.1 and 0.5 (a finite orbit's
    spread: this project's tolerance). The flow's divergence is -N (sum_i d(dx_i/dt)/dx_i = -1 each), so
    the spectrum sums to -N dt = -2 per step (the RK4 step's own error: 1e-3)."""
    models = _model("l96", "map:lorenz96", "{ n = 40, forcing = 8.0, dt = 0.05 }")
    ds, results = _apply(tmp_path, "l96", models, steps=2000, samples=1, spectrum="m = 40\nstart = 200")
    lam = ds.lyapunov_spectrum.isel(network=0).values[0]
    assert lam[0] / 0.05 == pytest.approx(1.68, abs=0.1)
    assert float(ds.kaplan_yorke.isel(network=0)[0]) == pytest.approx(27.1, abs=0.5)
    assert lam.sum() == pytest.approx(-40 * 0.05, abs=1e-3)
    assert (np.diff(lam) <= 0.02).all()  # Benettin's order: descending (up to a finite orbit's noise)


@pytest.mark.parametrize("space", ["full", "synchronized"])
def test_coupled_logistic_maps_within_and_across_the_synchronised_set(tmp_path, space):
    """Eight logistic maps at r = 4 coupled through their mean with eps = 0.6 (Kaneko, Physica D 41,
    137 (1990)) synchronise; on the synchronised set the map is the logistic map, exponent ln 2 (Ott,
    Chaos in Dynamical Systems, Sec. 2.2); across it a perturbation summing to zero grows by
    (1 - eps) f'(x), exponent ln(1 - eps) + ln 2 = ln 0.8 (Pikovsky, Rosenblum & Kurths, Synchronization,
    2001, Sec. 15.4), 7-fold. The within-set spectrum has one exponent, averaged from each sample's
    synchronisation on; the full spectrum's first two are ln 2 and ln 0.8. Within 0.03 over 2000 steps."""
    models = _model("m", "map:coupled_logistic", "{ r = 4.0, eps = 0.6, units = 8 }")
    ds, results = _apply(tmp_path, "coupled", models, steps=2000, samples=8,
                         spectrum=f'm = 2\nspace = "{space}"')
    lam = ds.lyapunov_spectrum.isel(network=0).values
    assert lam[:, 0].mean() == pytest.approx(math.log(2), abs=0.03)
    assert int(ds.lyapunov_spectrum_space.values[0]) == ("full", "synchronized").index(space)
    steps = ds.lyapunov_spectrum_steps.isel(network=0).values
    if space == "full":
        assert lam[:, 1].mean() == pytest.approx(math.log(0.8), abs=0.03)
        assert (steps == 2000).all()
    else:
        assert np.isnan(lam[:, 1]).all()  # one token of one element: one exponent
        assert ((steps > 1000) & (steps < 2000)).all()  # from each sample's synchronisation on
        local = ds.lyapunov_spectrum_local.isel(network=0, exponent=0).values
        assert np.isnan(local[:, 0]).all() and np.isfinite(local[:, -1]).all()


def test_the_shipped_tiny_albert_spec_and_a_kill_9_resume_bit_for_bit(tmp_path, shared_cache):
    """specs/tiny/albert_spectrum.toml (offline): the leading 8 exponents and the Kaplan-Yorke
    dimension of a pre-trained and an initial tiny ALBERT, the figure drawn, show's headline; killed
    (SIGKILL) past its durable point at t = 100 and applied again, the store equals the uninterrupted
    run's bit for bit."""
    import signal

    text = (ROOT / "specs/tiny/albert_spectrum.toml").read_text()
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    cache = {"TRANSIENT_CACHE": str(shared_cache)}
    for d in (whole, killed):
        d.mkdir()
        (d / "spec.toml").write_text(text)
    assert (done := run_cli("apply", "spec.toml", cwd=whole, **cache)).returncode == 0, done.stderr
    store = "store/albert_spectrum.zarr"
    ds = xr.open_zarr(whole / store, consolidated=False)
    lam = ds.lyapunov_spectrum.values
    assert lam.shape == (2, 16, 8)
    assert np.isfinite(lam[:, :8]).all() and np.isnan(lam[:, 8:]).all()  # the first 8 samples measured
    assert np.isfinite(ds.kaplan_yorke.values[:, :8]).all()
    assert (np.diff(lam[:, :8].mean(1), axis=-1) <= 1e-3).all()  # Benettin's order, on average
    shown = run_cli("show", store, cwd=whole, **cache)
    assert shown.returncode == 0, shown.stderr
    for label in ("lambda_1/step (spectrum)", "lambda_2/step", "Kaplan-Yorke dimension"):
        line = next(row for row in shown.stdout.splitlines() if row.strip().startswith(label) and "=" in row)
        assert re.search(r"pretrained=-?\d", line) and re.search(r"initial=-?\d", line), line  # "=-": none
    drawn = run_cli("figures", store, "--only", "spectrum", cwd=whole, **cache)
    assert drawn.returncode == 0, drawn.stderr
    assert (whole / "store/albert_spectrum.figures/spectrum.png").stat().st_size > 0

    out = run_cli("apply", "spec.toml", cwd=killed, RUNNER_TEST_KILL="initial@150", **cache)
    assert out.returncode == -signal.SIGKILL
    planned = run_cli("plan", "spec.toml", "--no-estimate", cwd=killed, **cache)
    assert "resumes from step 100" in " ".join(planned.stdout.split()), planned.stdout  # its state, not a run from t = 0
    resumed = run_cli("apply", "spec.toml", cwd=killed, **cache)
    assert resumed.returncode == 0, resumed.stderr
    a = xr.open_zarr(whole / store, consolidated=False)
    b = xr.open_zarr(killed / store, consolidated=False)
    names = [n for n in a.data_vars if n.startswith(("lyapunov_", "kaplan_yorke"))]
    assert len(names) >= 8
    for name in names:
        np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)


def test_tiny_albert_within_its_synchronised_set(tmp_path, shared_cache):
    """space = "synchronized" on tiny ALBERT (the shipped spec's networks): the pre-trained network's
    samples synchronise (Inoue et al. 2021, Fig. 2B) and get a spectrum one token wide, averaged from
    their synchronisation on; the store says which spectrum it measured."""
    text = (ROOT / "specs/tiny/albert_spectrum.toml").read_text()
    text = text.replace("samples = 8 ", 'space = "synchronized"\nsamples = 4 ').replace("steps = 200", "steps = 150")
    assert 'space = "synchronized"' in text
    (tmp_path / "spec.toml").write_text(text)
    done = run_cli("apply", "spec.toml", cwd=tmp_path, TRANSIENT_CACHE=str(shared_cache))
    assert done.returncode == 0, done.stderr
    ds = xr.open_zarr(tmp_path / "store/albert_spectrum.zarr", consolidated=False)
    assert (ds.lyapunov_spectrum_space.values == 1).all()  # synchronized
    steps = ds.lyapunov_spectrum_steps.values[0, :4]
    assert ((steps > 0) & (steps < 150)).all()
    assert np.isfinite(ds.lyapunov_spectrum.values[0, :4]).all()
    assert np.isnan(ds.lyapunov_spectrum.values[:, 4:]).all()


def test_auto_takes_the_within_set_spectrum_for_an_albert_size_state():
    """The default space: full for tiny ALBERT (16 x 64) and every map of one token, within the
    synchronised set for a token-equivariant state of ALBERT's size (128 x 768); plan says which."""
    from types import SimpleNamespace

    from runner.plugin.measures import measures

    cls = measures("depth")["lyapunov_spectrum"]
    measure = cls(cls.Params(kind="lyapunov_spectrum"))

    def net(tokens, hidden, equivariant):
        family = SimpleNamespace(token_equivariant=lambda source: equivariant)
        return SimpleNamespace(n_tokens=tokens, n_hidden=hidden, precision="fp32",
                               model=SimpleNamespace(family=family, source="x"))

    assert measure.space_for(net(16, 64, True)) == "full"
    assert measure.space_for(net(128, 768, True)) == "synchronized"
    assert measure.space_for(net(128, 768, False)) == "full"
    assert "space=synchronized (one token, n=768), m=8: ~8 one-token passes/step" in measure.default_note(
        net(128, 768, True))


def test_plan_refuses_a_start_off_the_intervals_and_states_the_cost(in_process, tmp_path):
    models = _model("m", "map:henon", "{ a = 1.4, b = 0.3 }")
    write_spec(tmp_path, SPEC.format(name="bad", models=models, samples=4, steps=100, precision="fp64",
                                     spectrum="every = 2\nstart = 5", more=""), "bad.toml")
    code, out, err = in_process("plan", "bad.toml", "--no-estimate")
    assert code != 0 and "5 is not a multiple of every = 2" in out + err
    write_spec(tmp_path, SPEC.format(name="good", models=models, samples=4, steps=100, precision="fp64",
                                     spectrum="", more=""), "good.toml")
    code, out, err = in_process("plan", "good.toml", "--no-estimate")
    assert code == 0, err
    assert "m: space=full (tokens x hidden, n=2), m=2: ~2 passes/step per measured sample" in " ".join(out.split())
