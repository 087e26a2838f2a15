"""Each training recipe on the tiny LSTM store: the lines drawn are the stored values."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from runner.read.figures import figures
from runner.plugin.recipes import recipes


@pytest.fixture(scope="module")
def ds(training_store):
    return xr.open_zarr(training_store, consolidated=False)


def draw(fig_id: str, ds):
    return recipes("training")[fig_id].draw(ds)


def labelled(ax):
    return {line.get_label(): line for line in ax.lines if not line.get_label().startswith("_")}


def test_every_training_figure_is_drawn(training_store, tmp_path):
    drawn = {d.id: d for d in figures(training_store, out=tmp_path)}
    # Ch. 5 figures read the scaffold and syntax measures (tests/training/test_scaffold_study.py,
    # test_syntax_di.py); every other training figure is drawn from this store
    want = {k for k in recipes("training") if not k.startswith("ch5_")}
    assert {k for k, d in drawn.items() if d.status == "drawn"} == want, \
        {k: d.reason for k, d in drawn.items() if d.status != "drawn"}


def test_versus_final_draws_svcca_and_cka_per_layer(ds):
    svcca_ax, cka_ax = draw("ch4_fig3", ds).axes
    for ax, var in ((svcca_ax, "svcca_final"), (cka_ax, "cka_final")):
        lines = labelled(ax)
        measured = [str(la) for la in ds["layer"].values if np.isfinite(ds[var].sel(network="lm", layer=la)).any()]
        assert set(lines) == set(measured) and len(measured) == 3
        for layer, line in lines.items():
            np.testing.assert_array_equal(line.get_ydata(), ds[var].sel(network="lm", layer=layer).values)
            np.testing.assert_array_equal(line.get_xdata(), ds["epoch"].values)


def test_taggers_trained_on_shuffled_tags_are_dotted(ds):
    ax = draw("ch4_fig8_11", ds).axes[0]
    lines = labelled(ax)
    assert len(lines) == 3 * ds.sizes["tagger"]  # the 3 layers the spec measures
    for label, line in lines.items():
        layer, tagger = label.split("-", 1)
        assert (line.get_linestyle() == ":") == tagger.endswith("shuffled")
        np.testing.assert_array_equal(line.get_ydata(), ds["svcca_tagger"].sel(network="lm", layer=layer, tagger=tagger))


def test_between_layers_shows_each_pair_once(ds):
    lines = labelled(draw("ch4_fig5", ds).axes[0])
    n = 3
    assert len(lines) == n * (n - 1) // 2
    np.testing.assert_array_equal(lines["lstm2-lstm1"].get_ydata(),
                                  ds["svcca_layers"].sel(network="lm", layer="lstm2", layer_other="lstm1").values)


def test_sparsity_figures(ds):
    fig = draw("ch6_fig2", ds)
    mesh = fig.axes[0].collections[0]
    chi = ds["word_chi"].sel(network="lm", layer="lstm2", quantity="gradient")
    order = np.argsort(-ds["word_count"].values, kind="stable")
    np.testing.assert_allclose(np.asarray(mesh.get_array()).reshape(chi.sizes["word"], -1),
                               chi.values[:, order].T if chi.dims[-1] == "word" else chi.values[order])
    lines = labelled(draw("ch6_fig4", ds).axes[0])
    assert set(lines) == {"all", "open", "closed"}
    np.testing.assert_array_equal(lines["open"].get_ydata(), ds["rho_target"].sel(
        network="lm", layer="lstm2", quantity="gradient", word_class_split="open").values)
    ax = draw("ch6_fig5", ds).axes[0]
    assert sum(len(c.get_offsets()) for c in ax.collections) == ds.sizes["word"]


def test_perplexity_and_probes(ds):
    lines = labelled(draw("ch4_fig2", ds).axes[0])
    assert set(lines) == {"lm", "lm_seed2"}
    np.testing.assert_array_equal(lines["lm"].get_ydata(), ds["val_perplexity"].sel(network="lm").values)
    current, _ = draw("ch4_fig6_7", ds).axes
    probes = [k for k in labelled(current) if not k.startswith("majority class")]
    assert len(probes) == ds.sizes["tagset"] * 3


def test_perplexity_log_axis_has_plain_ticks_and_whole_epochs(ds):
    """Ch. 4 Fig. 2's log axis labels plain numbers at 1-2-5 (or integer) multiples of powers of ten,
    at least two of them around the data; matplotlib's default labelled this store's range (one decade)
    with minor ticks such as 3.35 x 10^1. Epochs are whole numbers: no 1.25, 1.5 ticks."""
    fig = draw("ch4_fig2", ds)
    fig.draw_without_rendering()
    ax = fig.axes[0]
    lo, hi = ax.get_ylim()
    shown = [t for t in ax.get_yticklabels() if lo <= t.get_position()[1] <= hi]
    texts = [t.get_text() for t in shown]
    assert len(shown) >= 2 and all(t and "$" not in t and "times" not in t for t in texts), texts
    for t in shown:
        y = t.get_position()[1]
        assert float(t.get_text()) == pytest.approx(y)
        assert y / 10 ** np.floor(np.log10(y)) == pytest.approx(round(y / 10 ** np.floor(np.log10(y))))
    ppl = ds["val_perplexity"].sel(network=["lm", "lm_seed2"]).values
    assert lo <= np.nanmin(ppl) and np.nanmax(ppl) <= hi
    assert [t.get_text() for t in ax.get_yticklabels(minor=True) if t.get_text()] == []
    x0, x1 = ax.get_xlim()
    ticks = [x for x in ax.get_xticks() if x0 <= x <= x1]
    assert ticks and all(float(x).is_integer() for x in ticks), ticks


def test_probes_show_the_majority_class_baseline(ds):
    """Ch. 4 Figs. 6-7: each panel draws the majority class's held-out accuracy, labelled with its value."""
    axes = draw("ch4_fig6_7", ds).axes
    for ax, target in zip(axes, ds["tag_target"].values, strict=True):
        for tagset in ds["tagset"].values:
            majority = ds["probe_majority"].sel(network="lm", tag_target=target, tagset=tagset).values
            value = majority[np.isfinite(majority)]
            assert value.size and np.ptp(value) == 0  # the same labels and split at every checkpoint and layer
            (line,) = [x for x in ax.lines if x.get_gid() == f"majority:{tagset}"]
            assert set(line.get_ydata()) == {value[0]}
            assert line.get_label() == f"majority class ({tagset}): {value[0]:.3f}"
            assert line.get_label() in [t.get_text() for t in ax.get_legend().get_texts()]


def test_probes_store_their_n_and_interval_and_the_figure_draws_them(ds):
    """Each probe keeps its held-out n and the Wilson 95% interval of its accuracy; the figure shades
    the interval and says where it contains the majority class's accuracy."""
    from analyses.diagnostic import wilson_interval
    from runner.studies.training.measures.diagnostic import VERDICTS

    where = dict(network="lm", tag_target="current", tagset="upos")
    acc, n = ds["probe_accuracy"].sel(where).values, ds["probe_n"].sel(where).values
    low, high = ds["probe_accuracy_low"].sel(where).values, ds["probe_accuracy_high"].sel(where).values
    kept = np.isfinite(acc)
    assert kept.any() and (n[kept] >= 1).all() and (n[kept] == np.round(n[kept])).all()
    np.testing.assert_allclose(np.stack([low, high])[:, kept], np.stack(wilson_interval(np.round(acc * n), n))[:, kept])
    assert (low[kept] <= acc[kept]).all() and (acc[kept] <= high[kept]).all()
    majority = ds["probe_majority"].sel(where).values
    verdict = ds["probe_against_majority"].sel(where).values
    inside = (low <= majority) & (majority <= high)
    assert (kept & inside).any()  # this store's probes hold the majority (the other verdicts: tests/analyses)
    assert (verdict[kept & inside] == VERDICTS.index("cannot_tell_from_majority")).all()
    assert (verdict[kept & ~inside] != VERDICTS.index("cannot_tell_from_majority")).all()

    current = draw("ch4_fig6_7", ds).axes[0]
    for layer in ds["layer"].values:
        if not np.isfinite(ds["probe_accuracy"].sel(dict(where, layer=layer))).any():
            continue
        (band,) = [c for c in current.collections if c.get_gid() == f"interval:upos {layer}"]
        ys = band.get_paths()[0].vertices[:, 1]
        at = dict(where, layer=layer)
        assert np.isclose(ys.min(), np.nanmin(ds["probe_accuracy_low"].sel(at))) and \
            np.isclose(ys.max(), np.nanmax(ds["probe_accuracy_high"].sel(at)))
        (label,) = [k for k in labelled(current) if k.startswith(f"upos {layer}")]
        told = ds["probe_against_majority"].sel(at).values
        assert ("cannot be told from the majority class" in label) == bool((told == 1).any())
