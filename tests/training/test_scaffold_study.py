"""specs/tiny/scaffold_tiny.toml through the real CLI: the paper's direction (Ch. 5 Fig. 10: on the
in-domain test set DI(alpha, scaffold) is higher for familiar-scaffold models), the stored
variables, and the Ch. 5 figures drawn from them."""

from __future__ import annotations


import numpy as np
from tests.runner import launcher
import pytest
import xarray as xr
from training_helpers import ROOT

from runner.read.figures import figures
from runner.plugin.recipes import recipes
from runner.core.layout import internal
from runner.studies.training.figures import scaffold_mean

TINY = ROOT / "specs" / "tiny" / "scaffold_tiny.toml"


def _cli(*args, cwd):
    from tests.runner.helpers import cli_env

    return launcher.run(args, cwd=cwd, env=cli_env(cwd, PYTHONPATH=str(ROOT)), timeout=600)


@pytest.fixture(scope="module")
def store(shipped_store):
    """The shipped spec applied once per test session (``shipped_store``, shared with the estimate
    and golden tests). Read it only."""
    return shipped_store("scaffold_tiny")


@pytest.fixture(scope="module")
def ds(store):
    return xr.open_zarr(store, consolidated=False)


def _final(ds, name, **sel):
    da = ds[name].sel(**sel).isel(checkpoint=-1)
    return {str(n): float(da.sel(network=n)) for n in ds["network"].values}


@pytest.mark.slow
def test_familiar_scaffolds_are_more_interdependent_in_domain(ds):
    di = _final(ds, "rule_di", test_domain="in_domain")
    familiar = [n for n in di if ds["familiar_scaffold"].sel(network=n)]
    unfamiliar = [n for n in di if not ds["familiar_scaffold"].sel(network=n)]
    assert len(familiar) == len(unfamiliar) == 2
    for f, u in zip(sorted(familiar), sorted(unfamiliar)):  # each seed, and on average
        assert ds["seed"].sel(network=f) == ds["seed"].sel(network=u)
        assert di[f] > di[u], di
    assert np.mean([di[n] for n in familiar]) > np.mean([di[n] for n in unfamiliar])


@pytest.mark.slow
def test_familiar_scaffolds_carry_smaller_error_gradients_in_domain(ds):
    """App. C, Fig. 12: "a predictable scaffold is associated with a smaller error gradient"."""
    g = ds["rule_gradient_norm"].sel(test_domain="in_domain").isel(checkpoint=-1)
    for seed in (0, 1):
        pair = [n for n in ds["network"].values if int(ds["seed"].sel(network=n)) == seed]
        fam = [n for n in pair if ds["familiar_scaffold"].sel(network=n)]
        unf = [n for n in pair if not ds["familiar_scaffold"].sel(network=n)]
        assert len(fam) == len(unf) == 1
        assert (g.sel(network=fam[0]).values < g.sel(network=unf[0]).values).all(), g.values


def test_store_holds_every_rule_variable(ds):
    assert ds["rule_target_probability"].dims == ("network", "checkpoint", "test_domain")
    assert list(ds["cd_focus"].values) == ["alpha", "scaffold"]
    assert list(ds["prefix_length"].values) == [0, 1, 2, 3]
    for name in ("rule_target_probability", "rule_cd_probability", "rule_cd_prefix_probability", "rule_di"):
        v = ds[name]
        assert v.attrs["units"] == "1" and internal(v.attrs)["plot"] == "curve" and v.attrs["long_name"]
        assert np.isfinite(v.values).all()
        assert ((v.values >= 0) & (v.values <= (1 if name != "rule_di" else np.inf))).all()
    g = ds["rule_gradient_norm"]
    assert g.dims == ("network", "checkpoint", "test_domain", "gradient_distance")
    assert list(ds["gradient_distance"].values) == [0, 1, 2, 3]
    assert g.attrs["units"] == "1" and g.attrs["long_name"].endswith("(nats)") and internal(g.attrs)["plot"] == "curve"
    assert np.isfinite(g.values).all() and (g.values > 0).all()
    assert list(ds["scaffold_length"].values) == [3] * 4
    assert list(ds["corpus_variant"].values) == ["unfamiliar_k3", "familiar_k3"] * 2
    # lr 1 throughout (no plateau decay), one LSTM layer
    np.testing.assert_array_equal(ds["learning_rate"].values, 1.0)
    assert list(ds["layer"].values) == ["embedding", "lstm1", "logits"]


def _lines(fig_id, ds):
    """Each axes' labelled lines by label, less the n every label states (two seeds per setting)."""
    fig = recipes("training")[fig_id].draw(ds)
    axes = [{line.get_label(): line for line in ax.lines if not line.get_label().startswith("_")} for ax in fig.axes]
    assert all(label.endswith(" (n=2)") for lines in axes for label in lines)
    return [{label.removesuffix(" (n=2)"): line for label, line in lines.items()} for lines in axes]


def _group(ds, familiar):
    return [str(n) for n in ds["network"].values if bool(ds["familiar_scaffold"].sel(network=n)) == familiar]


@pytest.mark.parametrize("fig_id, var, sel", [
    ("ch5_fig7", "rule_target_probability", [{"test_domain": "in_domain"}, {"test_domain": "out_domain"}]),
    ("ch5_fig8", "rule_cd_probability", [{"test_domain": "out_domain", "cd_focus": "alpha"}]),
    ("ch5_fig10", "rule_di", [{"test_domain": "in_domain"}]),
])
def test_figures_draw_the_stored_means(ds, fig_id, var, sel):
    axes = _lines(fig_id, ds)
    assert len(axes) == len(sel)
    for lines, s in zip(axes, sel):
        assert set(lines) == {"k=3 unfamiliar", "k=3 familiar"}
        for label, line in lines.items():
            familiar = label.endswith(" familiar")
            want = scaffold_mean(ds[var].sel(**s), _group(ds, familiar))
            np.testing.assert_array_equal(line.get_ydata(), want.values)
            np.testing.assert_array_equal(line.get_xdata(), ds["epoch"].values)
            assert line.get_linestyle() == ("--" if familiar else "-")


def test_prefix_cd_probability_ends_where_the_other_cd_measures_stand(ds):
    """i = 0 is Fig. 8's alpha-in-focus value; Fig. 9 draws the last checkpoint against i."""
    prefix = ds["rule_cd_prefix_probability"]
    np.testing.assert_allclose(prefix.sel(prefix_length=0).values, ds["rule_cd_probability"].sel(cd_focus="alpha").values,
                               rtol=1e-12)
    _assert_last_checkpoint_panels(ds, "ch5_fig9", prefix)


def test_gradient_figure_draws_the_last_checkpoint_against_distance(ds):
    """Ch. 5 Fig. 12: ||d e_omega / d h_(alpha+d)|| against d, the seeds' mean at the last checkpoint."""
    _assert_last_checkpoint_panels(ds, "ch5_fig12", ds["rule_gradient_norm"])


def _assert_last_checkpoint_panels(ds, figure: str, var) -> None:
    """In-domain and random panels: a line per group, the seeds' mean of ``var`` at the last
    checkpoint against 0 .. k, dashed for familiar scaffolds."""
    axes = _lines(figure, ds)
    assert len(axes) == 2
    for lines, domain in zip(axes, ("in_domain", "out_domain")):
        assert {label.split(",")[0] for label in lines} == {"k=3 unfamiliar", "k=3 familiar"}
        for label, line in lines.items():
            familiar = label.split(",")[0].endswith(" familiar")
            want = scaffold_mean(var.sel(test_domain=domain), _group(ds, familiar)).isel(checkpoint=-1)
            np.testing.assert_array_equal(line.get_ydata(), want.values)
            np.testing.assert_array_equal(line.get_xdata(), [0, 1, 2, 3])
            assert line.get_linestyle() == ("--" if familiar else "-")


def test_figures_command_draws_the_scaffold_figures(store, tmp_path):
    drawn = {d.id: d for d in figures(store, out=tmp_path)}
    assert {k for k, d in drawn.items() if d.status == "drawn"} == {"ch4_fig2", "ch5_fig7", "ch5_fig8", "ch5_fig9",
                                                                      "ch5_fig10", "ch5_fig12"}
    assert (tmp_path / "ch5_fig10.png").is_file() and (tmp_path / "ch5_fig12.png").is_file()
    assert "sweep them" in drawn["ch5_fig11"].reason  # Fig. 11 needs a sweep over the number of rules


def test_di_syntax_spec_plans_offline_and_apply_refuses(tmp_path):
    spec = ROOT / "specs" / "di_syntax.toml"
    plan = _cli("plan", spec, cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert "requirements not met here (2" in plan.stdout
    assert "en_ewt-ud-test.conllu" in plan.stdout and "Salesforce/wikitext" in plan.stdout
    out = _cli("apply", spec, cwd=tmp_path)
    assert out.returncode == 66, out.stderr
