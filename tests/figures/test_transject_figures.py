"""TransJect recipes on the tiny TransJect store: readable legends, and n on pooled distributions."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from runner.plugin.recipes import recipes


@pytest.fixture(scope="module")
def ds(transject_store):
    return xr.open_zarr(transject_store, consolidated=False)


def test_fig1_labels_pairs_by_their_tokens_and_positions(ds):
    fig = recipes("transject")["fig1"].draw(ds)
    (legend,) = fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    pairs = ds["pair"].values[:8]
    assert len(labels) == len(pairs) == 8
    for label, pair in zip(labels, pairs, strict=True):
        i, j = int(ds["pair_first"].sel(pair=pair)), int(ds["pair_second"].sel(pair=pair))
        a, b = str(pair).split("~")  # the coordinate reads "0:[SM~1:8": position:token of each
        assert "~" not in label and label == f'"{a.split(":", 1)[1]}" ({i}) and "{b.split(":", 1)[1]}" ({j})'
    assert legend.get_title().get_text() == f"token (position)\n8 of {ds.sizes['pair']} pairs"
    ax = fig.axes[0]
    np.testing.assert_array_equal(ax.lines[0].get_ydata(), ds["pair_euclidean"].isel(network=0, pair=0)
                                  .isel(checkpoint=-1).values)


def test_pooled_boxes_state_their_seeds(ds):
    for fig_id in ("fig5a", "fig5b"):
        labels = [t.get_text() for t in recipes("transject")[fig_id].draw(ds).axes[0].get_legend().get_texts()]
        assert "transject (n=2 seeds)" in labels, labels


def test_a_figure_of_one_seed_per_model_names_the_seed(ds):
    """Figs. 1 and 6 draw one network per model: its title says which (the first seed), not the model."""
    first = [str(ds["network"].values[ds["model"].values == m][0]) for m in dict.fromkeys(ds["model"].values)]
    fig1 = recipes("transject")["fig1"].draw(ds)
    assert [ax.get_title() for ax in fig1.axes[: len(first)]] == first == ["transject-s0", "entropic-transject-s0",
                                                                           "transformer-s0", "transformer-rezero-s0"]
    fig6 = recipes("transject")["fig6"].draw(ds)
    assert fig6.axes[0].get_title().startswith("transject-s0: ")


def test_every_figure_names_the_paper_one_way(transject_store, tmp_path):
    """The paper's own title (the seed text: "Don't Bet on Sparsity: Designing Brain-Inspired
    Distance-Preserving Encoder") names every TransJect figure the same way in figures.json and in
    each figure's title; Figs. 4-6 said "TransJect paper" where Figs. 1 and 5a said the title."""
    import json

    from runner.read.figures import figures

    drawn = {d.id: d for d in figures(transject_store, out=tmp_path)}
    listed = {f["id"]: f["reproduces"] for f in json.loads((tmp_path / "figures.json").read_text())["figures"]}
    ours = {"fig1", "fig4", "fig5a", "fig5b", "fig5c", "fig6"}
    assert ours <= {k for k, d in drawn.items() if d.status == "drawn"}, {k: d.reason for k, d in drawn.items()}
    for fid in ours:
        assert listed[fid] == drawn[fid].reproduces == f"Don't Bet on Sparsity (TransJect), Fig. {fid[3:]}"


def test_fig4_training_steps_get_whole_number_ticks(ds):
    """Training steps are whole numbers: Fig. 4's step axes have no 2.5, 7.5, 12.5 ticks."""
    fig = recipes("transject")["fig4"].draw(ds)
    fig.draw_without_rendering()
    for ax in fig.axes:
        lo, hi = ax.get_xlim()
        ticks = [x for x in ax.get_xticks() if lo <= x <= hi]
        assert len(ticks) >= 2 and all(float(x).is_integer() for x in ticks), (ax.get_xlabel(), ticks)
