"""Figures that fail loudly and state their statistics (issue 20, point 5): a figure without values
is skipped with the reason, baselines and n are drawn, legends read, and any variable of any store
has a fallback plot."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr

from runner.read.figures import figures
from runner.plugin.recipes import recipes
from tests.runner.helpers import maps_spec, popen_cli, run_cli, wait_for, write_spec


@pytest.fixture(scope="module")
def maps_store(tmp_path_factory):
    """A finished store of two reference maps (logistic, tanh), 6 samples each: (spec, store)."""
    root = tmp_path_factory.mktemp("maps")
    spec = write_spec(root, maps_spec("maps", steps=120, samples=6))
    out = run_cli("apply", "-q", spec, cwd=root)
    assert out.returncode == 0, out.stderr
    return spec, root / "store/maps.zarr"


def test_a_store_interrupted_before_its_first_durable_point_draws_nothing(tmp_path):
    spec = write_spec(tmp_path, maps_spec("early", steps=2000, samples=4, checkpoint_every=1000))
    proc = popen_cli("apply", spec, cwd=tmp_path, RUNNER_TEST_STALL="logistic@5")  # before the first checkpoint
    try:
        wait_for(lambda: (tmp_path / "store/early.runner/stalled").exists(), proc)
        out = run_cli("figures", spec, cwd=tmp_path)
    finally:
        proc.kill()
        proc.communicate()
    assert out.returncode == 0, out.stderr
    manifest = json.loads((tmp_path / "store/early.figures/figures.json").read_text())
    status = {f["id"]: f for f in manifest["figures"]}
    assert status["fig2c"]["status"] == "skipped"
    assert status["fig2c"]["reason"].startswith("no values: lyapunov_per_step, effective_dimension hold no finite")
    assert not [f["id"] for f in manifest["figures"] if f["status"] == "drawn"]
    assert not (tmp_path / "store/early.figures/fig2c.png").exists()
    assert "skipped: no values" in out.stdout and "0 figure(s)" in out.stdout


def test_a_figure_whose_variables_hold_no_finite_value_is_skipped(maps_store, tmp_path):
    ds = xr.open_zarr(maps_store[1], consolidated=False)
    empty = ds.assign(lyapunov_per_step=ds["lyapunov_per_step"] * np.nan,
                      effective_dimension=ds["effective_dimension"] * np.inf)  # inf is no value either
    drawn = {d.id: d for d in figures(empty, out=tmp_path, only=["fig2c"])}
    assert drawn["fig2c"].status == "skipped" and drawn["fig2c"].reason.startswith("no values")
    half = ds.assign(effective_dimension=ds["effective_dimension"] * np.nan)  # one of them has values: drawn
    assert figures(half, out=tmp_path, only=["fig2c"])[0].status == "drawn"


def test_fig2c_states_n_and_its_band(maps_store):
    ds = xr.open_zarr(maps_store[1], consolidated=False)
    top, bottom = recipes("depth")["fig2c"].draw(ds).axes
    legend = top.get_legend()
    # one network per model: 6 samples in the mean of lambda(t), one network in N_eff(t)
    assert [t.get_text() for t in legend.get_texts()] == ["logistic (n=6)", "tanh (n=6)"]
    assert legend.get_title().get_text() == "mean over replicates and samples\nband: 95% bootstrap CI of the mean"
    assert [t.get_text() for t in bottom.get_legend().get_texts()] == ["logistic (n=1)", "tanh (n=1)"]


def test_a_mean_with_missing_series_counts_only_those_with_values(maps_store):
    from matplotlib.figure import Figure

    from runner.plugin.plotting import mean_band, mean_legend

    ds = xr.open_zarr(maps_store[1], consolidated=False)
    lam = ds["lyapunov_per_step"].sel(network="logistic").load()
    assert lam.sizes["sample"] == 6
    lam[:1] = np.nan  # a sample diverged at once
    ax = Figure().subplots()
    assert mean_band(ax, lam, ("sample",), "lyapunov_step", label="logistic", band="se") == 5
    assert ax.lines[0].get_label() == "logistic (n=5)"
    rest = lam.values[1:]
    se = rest.std(axis=0, ddof=1) / np.sqrt(5)
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    for edge in (rest.mean(0) - se, rest.mean(0) + se):  # each edge of the band is among its vertices
        assert np.abs(band[None, :] - edge[:, None]).min(axis=1).max() < 1e-12
    lam[:2] = np.nan  # and another: 4 series, fewer than MIN_INTERVAL_N, so the band is their range
    ax = Figure().subplots()
    assert mean_band(ax, lam, ("sample",), "lyapunov_step", label="logistic", band="se") == 4
    assert ax.lines[0].get_label() == "logistic (n=4, band: range)"
    mean_legend(ax, "samples")  # the title says the band is a range, as every line's is
    assert ax.get_legend().get_title().get_text() == "mean over samples\nband: range (n < 5)"
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    for edge in (lam.values[2:].min(0), lam.values[2:].max(0)):
        assert np.abs(band[None, :] - edge[:, None]).min(axis=1).max() < 1e-12


def test_standard_error_known_answer():
    from runner.plugin.plotting import standard_error

    se = standard_error(np.array([[1.0, 1.0], [2.0, np.nan], [3.0, np.nan], [4.0, np.inf]]), axis=0)
    np.testing.assert_allclose(se[0], np.sqrt(5 / 3) / 2)  # s of 1..4 is sqrt(5/3), n = 4
    assert np.isnan(se[1])  # one finite value: no band


def test_var_fallback_draws_any_variable_with_its_units(maps_store, tmp_path):
    spec, store = maps_store
    out = run_cli("figures", spec, "--only", "var:lyapunov_per_step", "--only", "var:chaos_length", "--out",
                  tmp_path / "figs", cwd=spec.parent)
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in (tmp_path / "figs").iterdir()) == [
        "figures.json", "var_chaos_length.png", "var_chaos_length.svg", "var_lyapunov_per_step.png",
        "var_lyapunov_per_step.svg"]
    from runner.read.fallback import plot

    ds = xr.open_zarr(store, consolidated=False)
    ax = plot(ds, "lyapunov_per_step").axes[0]
    assert ax.get_ylabel() == "local Lyapunov exponent per step"
    assert ax.get_xlabel() == "interval start t [steps]"
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["logistic (n=6)", "tanh (n=6)"]
    assert legend.get_title().get_text() == "mean over sample\nband: \u00b11 s.e. of the mean"
    np.testing.assert_allclose(ax.lines[1].get_ydata(), ds["lyapunov_per_step"].sel(network="tanh").mean("sample"))
    ax = plot(ds, "chaos_length").axes[0]  # (network, sample): one line per network, nothing averaged
    assert ax.get_ylabel() == "transient chaos length (steps)"
    np.testing.assert_array_equal(ax.lines[0].get_ydata(), ds["chaos_length"].sel(network="logistic").values)


def test_var_fallback_refuses_what_it_cannot_plot(maps_store):
    spec, _ = maps_store
    out = run_cli("figures", spec, "--only", "var:sync_outcome", cwd=spec.parent)  # a CF flag: categories
    assert out.returncode == 2 and "no numeric variable sync_outcome" in out.stderr and "chaos_length" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_store_no_recipe_covers_gets_a_fallback_per_numeric_variable(maps_store, tmp_path):
    ds = xr.open_zarr(maps_store[1], consolidated=False)
    ds[["chaos_length", "diverged_step", "chaos_outcome", "fraction_never_chaotic"]].to_zarr(tmp_path / "bare.zarr")
    out = run_cli("figures", tmp_path / "bare.zarr", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "no figure recipe covers this store" in out.stdout
    manifest = json.loads((tmp_path / "bare.figures/figures.json").read_text())
    drawn = [f["id"] for f in manifest["figures"] if f["status"] == "drawn"]
    assert manifest["fallback"] is True
    assert sorted(drawn) == ["var:chaos_length", "var:fraction_never_chaotic"]  # not the flag
    assert np.isnan(ds["diverged_step"]).all()  # no map diverged: listed, skipped, not drawn
    skipped = {f["id"]: f["reason"] for f in manifest["figures"] if f["status"] == "skipped"}
    assert skipped["var:diverged_step"].startswith("no values")


@pytest.mark.parametrize("study, figure, names", [
    ("training", "fig1", ("pair_euclidean", "pair_cosine")), ("training", "fig5a", ("entropy_quantile",)),
    ("transject", "ch4_fig3", ("svcca_final", "cka_final")), ("training", "ch4_fig3", ("svcca_final", "cka_final"))])
def test_a_kit_figure_of_values_not_computed_yet_says_so(request, study, figure, names):
    """The kit's figures (distances, entropy, similarity to the final checkpoint; the training study
    draws the last its own way) drawn from a store whose values are all missing refuse with the
    reason, not an empty plot."""
    from runner.plugin.recipes import NotDrawable

    store = request.getfixturevalue("training_store" if study == "training" else "transject_store")
    ds = xr.open_zarr(store, consolidated=False)
    empty = ds.assign({name: ds[name] * np.nan for name in names})
    with pytest.raises(NotDrawable, match="has been computed yet"):
        recipes(study)[figure].draw(empty)


def test_the_kits_entropy_boxes_need_their_quantiles_and_skip_a_layer_without_values(transject_store):
    from runner.plugin.recipes import NotDrawable

    ds = xr.open_zarr(transject_store, consolidated=False)
    with pytest.raises(NotDrawable, match=r"entropy_quantile lacks the quantiles \[0.05, 0.25, 0.5, 0.75, 0.95\]"):
        recipes("transject")["fig5a"].draw(ds.isel(quantile=[0, 1]))
    top = str(ds["layer"].values[-1])
    gap = ds.assign(entropy_quantile=ds["entropy_quantile"].where(ds["layer"] != top))  # nothing at the top layer
    models = len(set(ds["model"].values.tolist()))  # 4 models x 3 layers: 12 boxes, 8 without the top layer
    assert len(recipes("transject")["fig5a"].draw(ds).axes[0].patches) == models * ds.sizes["layer"]
    assert len(recipes("transject")["fig5a"].draw(gap).axes[0].patches) == models * (ds.sizes["layer"] - 1)


def test_the_kits_similarity_of_checkpoints_without_epochs_is_drawn_by_training_step(transject_store):
    """A published suite's checkpoints have steps and no epochs: the kit draws them over the steps."""
    ds = xr.open_zarr(transject_store, consolidated=False)
    suite_like = ds.assign_coords(epoch=ds["epoch"] * np.nan)
    ax = recipes("transject")["ch4_fig3"].draw(suite_like).axes[0]
    assert ax.get_xlabel() == "training step" and ax.get_xscale() == "symlog"
    assert recipes("transject")["ch4_fig3"].draw(ds).axes[0].get_xlabel() == "epoch"
