"""The syntax_interdependence measure (Ch. 5 Sec. 3, Figs. 3-4) on a tiny LM and a CoNLL-U treebank
made here with real dependency heads, read through the data layer; Figs. 3 and 4 draw the stored
means where enough pairs were averaged."""

from __future__ import annotations

import random

import numpy as np
import pytest
import xarray as xr

from runner.run.apply import apply
from runner.run.prepare import prepare
from runner.studies.training.data.treebank import parse_conllu_trees
from runner.plugin.recipes import recipes
from training_helpers import CORPUS

# DET ADJ NOUN VERB DET NOUN ADP DET NOUN . with heads 3 3 4 0 6 4 9 9 4 4 (1-based; 0 = root)
PATTERN = [("DET", 3), ("ADJ", 3), ("NOUN", 4), ("VERB", 0), ("DET", 6), ("NOUN", 4), ("ADP", 9), ("DET", 9),
           ("NOUN", 4), ("PUNCT", 4)]
WORDS = {"DET": ["a", "the", "this"], "ADJ": ["big", "small"], "NOUN": ["fish", "bird", "horse", "cat", "dog"],
         "VERB": ["saw", "found"], "ADP": ["near"], "PUNCT": ["."]}


def treebank(n: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    out = []
    for s in range(n):
        out.append(f"# sent_id = {s + 1}")
        for i, (pos, head) in enumerate(PATTERN, 1):
            w = rng.choice(WORDS[pos])
            out.append(f"{i}\t{w}\t{w}\t{pos}\t_\t_\t{head}\t{'root' if head == 0 else 'dep'}\t_\t_")
        out.append("")
    return "\n".join(out) + "\n"


def test_trees_are_read_by_the_data_layer():
    trees = parse_conllu_trees(treebank(2))
    assert len(trees) == 2 and trees[0].heads == tuple(h for _, h in PATTERN)
    assert trees[0].upos[:3] == ("DET", "ADJ", "NOUN")


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    root = tmp_path_factory.mktemp("syntax")
    (root / "trees.conllu").write_text(treebank(30))
    spec = root / "syntax.toml"
    spec.write_text(f"""
        [experiment]
        name = "syntax"
        seed = 0
        store = "{root / 'syntax.zarr'}"

        [corpus]
        source = "{CORPUS}"
        min_count = 2
        drop_rare_sentences = false
        analysis_tokens = 100

        [training]
        epochs = 1
        batch_size = 8
        bptt = 10
        embedding_dim = 16
        hidden_dim = 16
        num_layers = 1

        [checkpoints]
        every_epoch = true
        steps = [10]

        [[model]]
        name = "lm"

        [[measure]]
        kind = "syntax_interdependence"
        treebank = "trees.conllu"
        max_distance = 4
        max_syntactic = 4
        min_cases = 20
        """.replace("\n        ", "\n"))
    out = apply(prepare(spec), quiet=True)
    assert not out.failed, out
    return xr.open_zarr(root / "syntax.zarr", consolidated=False)


def test_counts_and_means(ds):
    count = ds["di_sequential_count"].sel(network="lm")
    # 30 sentences of 10 words: 9 pairs at distance 1, 8 at 2, ... per sentence, at every checkpoint
    np.testing.assert_array_equal(count.values, np.tile([9 * 30, 8 * 30, 7 * 30, 6 * 30], (count.sizes["checkpoint"], 1)))
    syn = ds["di_syntactic_count"].sel(network="lm")
    # DET-ADJ (1, 2) and ADJ-NOUN ... every pair of the pattern with open/closed words at its distances
    assert syn.isel(checkpoint=0).sel(seq_distance=1, syn_distance=2, pos_pair="closed-open").item() == 30  # a big
    assert syn.isel(checkpoint=0).sel(seq_distance=1, syn_distance=1, pos_pair="open-open").item() == 60  # big fish, fish saw
    assert int(syn.isel(checkpoint=0).sum()) < int(count.isel(checkpoint=0).sum())  # PUNCT pairs only in Fig. 3
    di = ds["di_sequential"].sel(network="lm").values
    assert np.isfinite(di).all() and (di >= 0).all()
    assert ds["di_syntactic"].attrs["min_cases"] == 20


def test_figure_3_draws_the_stored_means(ds):
    (ax,) = recipes("training")["ch5_fig3"].draw(ds).axes
    (line,) = [ln for ln in ax.lines if not ln.get_label().startswith("_")]
    last = ds["di_sequential"].sel(network="lm").isel(checkpoint=-1)
    np.testing.assert_array_equal(line.get_ydata(), last.values)
    np.testing.assert_array_equal(line.get_xdata(), [1, 2, 3, 4])


def test_figure_4_draws_only_means_of_enough_cases(ds):
    fig = recipes("training")["ch5_fig4"].draw(ds)
    mean = ds["di_syntactic"].sel(network="lm").isel(checkpoint=-1)
    count = ds["di_syntactic_count"].sel(network="lm").isel(checkpoint=-1)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles and all(t.startswith("sequential distance") for t in titles)
    drawn = 0
    for ax in fig.axes:
        d = int(ax.get_title().split()[-1])
        for line in ax.lines:
            want = mean.sel(seq_distance=d, pos_pair=line.get_label())
            keep = count.sel(seq_distance=d, pos_pair=line.get_label()).values >= 20
            np.testing.assert_array_equal(line.get_ydata(), np.where(keep, want.values, np.nan))
            drawn += 1
    assert drawn >= 3
