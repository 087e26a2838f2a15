"""The STS-B readouts (Inoue et al. 2021, Figs. 3B, 3C, A1) end to end on the builtin tiny ALBERT,
offline, through the CLI in this process: sentence pairs from a local file, values stored per step
(checked against the analyses applied to the stored trajectory), and `runner figures` drawing
each recipe from the store's data (checked on matplotlib's objects)."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
import torch
import xarray as xr

from analyses.handwriting import letter_path, nmse_grid, pen_directions
from analyses.sts import pearson, readout_predictions, train_linear_readouts
from runner.plugin.recipes import recipes
from runner.studies.depth.readout_figures import BEST
from runner.studies.depth.resolve import derive_seed
from tests.figures.conftest import ALBERTS
from tests.runner.pairs import write_pairs

SAMPLES = 60
SPEC = """
    [experiment]
    name = "sts"
    seed = 0
""" + ALBERTS + """    replicates = 2

    [[model]]
    name = "logistic"
    source = "map:logistic"

    [input]
    source = "pairs.tsv"
    pair = ["sentence1", "sentence2"]
    score = "label"
    samples = {samples}
    tokens = 16

    [dynamics]
    steps = 20
    checkpoint_every = 10

    [[measure]]
    kind = "sts_readout"

    [[measure]]
    kind = "handwriting_readout"
    t0_start = 0
    t0_stop = 6
    dt_start = 4
    dt_stop = 12
    demo = [2, 8]
    font = "DejaVu Sans"

    [[measure]]
    kind = "lyapunov"
    tau = 5

    [[measure]]
    kind = "effective_dimension"
    by_score = true

    [[measure]]
    kind = "mlm_readout"
    refit = false

    [[measure]]
    kind = "trajectory"
    samples = {all}
    tokens = [0]
    elements = {elements}
    """


@pytest.fixture(scope="module")
def run(tmp_path_factory, tiny_albert, shared_cache):
    """``(root, spec, code, figures code)``: apply and figures, in-process and offline."""
    from runner.cli import main

    root = tmp_path_factory.mktemp("sts")
    write_pairs(root / "pairs.tsv")
    spec = root / "sts.toml"
    spec.write_text(textwrap.dedent(SPEC.format(albert=tiny_albert, samples=SAMPLES, all=list(range(SAMPLES)),
                                                elements=list(range(64)))))
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.setenv("TRANSIENT_CACHE", str(shared_cache))
        mp.setenv("HF_HUB_OFFLINE", "1")
        code = main(["apply", "-q", str(spec)])
        drawn = main(["figures", str(spec), *(a for f in ("fig3a", "fig3b", "fig3c", "figA1") for a in ("--only", f))])
    return root, spec, code, drawn


@pytest.fixture(scope="module")
def ds(run):
    root, _, code, _ = run
    assert code == 0
    return xr.open_zarr(root / "store" / "sts.zarr", consolidated=False)


def _text(ds):
    return [n for n in ds["network"].values if not str(n).startswith("logistic")]


def test_pairs_and_their_scores_are_the_samples(ds, run):
    rows = {}
    for line in (run[0] / "pairs.tsv").read_text().splitlines()[1:]:
        a, b, label = line.split("\t")
        rows[f"{a} [SEP] {b}"] = float(label)
    assert [rows[str(t)] for t in ds["text"].values] == list(ds["score"].values)
    assert ds.sizes["sample"] == SAMPLES


def test_sts_pearson_is_the_readout_of_the_stored_cls_states(ds):
    n = int(0.8 * SAMPLES)
    y = torch.as_tensor(ds["score"].values)
    seed = derive_seed(0, "sts_readout", 0)
    for net in _text(ds):
        r = ds["sts_pearson"].sel(network=net).values
        assert np.isnan(r[0])  # x_0[CLS] is the same for every pair: no spread to correlate
        assert np.isfinite(r[1:]).all() and (np.abs(r[1:]) <= 1).all()
        for lo, hi in ((0, 10), (10, 21)):  # the steps of each segment are trained together, as in the pass
            x = torch.as_tensor(ds["trace"].sel(network=net).isel(trace_token=0, trace_step=slice(lo, hi)).values)
            x = x.transpose(0, 1)  # (step, sample, element)
            w = train_linear_readouts(x[:, :n], y[:n], seed=seed)
            want = pearson(readout_predictions(w, x[:, n:]), y[n:]).numpy()
            np.testing.assert_allclose(r[lo:hi], want, rtol=1e-6)
    assert np.isnan(ds["sts_pearson"].sel(network="logistic").values).all()


def test_handwriting_grid_is_the_regression_on_the_stored_states(ds):
    score = ds["score"].values
    used = np.flatnonzero((score < 1) | (score > 4))
    letter = torch.as_tensor((score[used] > 4).astype(np.int64))
    train = torch.arange(len(used)) < int(0.8 * len(used))
    paths = [letter_path(c, "DejaVu Sans")[0] for c in "US"]
    targets = {d: torch.from_numpy(np.stack([pen_directions(p, d + 1) for p in paths])) for d in range(4, 13)}
    assert ds.attrs["handwriting_font"] == "DejaVu Sans"
    for net in _text(ds):
        x = torch.as_tensor(ds["trace"].sel(network=net).isel(trace_token=0).values)  # (sample, step, element)
        x = x[used].transpose(0, 1)[:19]
        grid, kept = nmse_grid(x, letter, train, targets, list(range(7)), list(range(4, 13)), 0, 1e-6, keep=(2, 8))
        np.testing.assert_allclose(ds["handwriting_nmse"].sel(network=net).values, grid.numpy(), rtol=1e-4)
        out = ds["handwriting_output"].sel(network=net).values
        np.testing.assert_allclose(out[used[~train.numpy()]], kept[~train].numpy(), rtol=1e-4, atol=1e-8)
        assert np.isnan(np.delete(out, used[~train.numpy()], axis=0)).all()
        np.testing.assert_array_equal(ds["handwriting_target"].sel(network=net).values, targets[8].numpy())


def test_runner_figures_draws_the_readout_figures(run):
    root, spec, _, drawn = run
    assert drawn == 0
    listing = json.loads((root / "store" / "sts.figures" / "figures.json").read_text())
    status = {f["id"]: f["status"] for f in listing["figures"]}
    assert {status[k] for k in ("fig3a", "fig3b", "fig3c", "figA1")} == {"drawn"}
    assert (root / "store" / "sts.figures" / "fig3c.png").stat().st_size > 0


def test_fig3b_lines_are_the_mean_pearson_per_model_with_a_band(ds):
    (ax,) = recipes("depth")["fig3b"].draw(ds).axes
    lines = {line.get_gid(): line for line in ax.lines if line.get_gid()}
    assert set(lines) == {"sts_pearson:pretrained", "sts_pearson:initial"}  # the map has none
    initial = ds["sts_pearson"].isel(network=np.flatnonzero(ds["model"].values == "initial"))
    np.testing.assert_allclose(lines["sts_pearson:initial"].get_ydata(), initial.mean("network").values)
    np.testing.assert_array_equal(lines["sts_pearson:pretrained"].get_ydata(),
                                  ds["sts_pearson"].sel(network="pretrained").values)
    assert len(ax.collections) == 1  # the bootstrap band over the two initial networks


def test_fig3a_has_a_bootstrap_band_over_the_initial_networks(ds):
    (ax,) = recipes("depth")["fig3a"].draw(ds).axes
    lines = {line.get_gid(): line for line in ax.lines if line.get_gid()}
    assert set(lines) == {"mlm_accuracy:pretrained", "mlm_accuracy:initial"}
    initial = ds["mlm_accuracy"].isel(network=np.flatnonzero(ds["model"].values == "initial"))
    np.testing.assert_allclose(lines["mlm_accuracy:initial"].get_ydata(), initial.mean("network").values)
    assert len(ax.collections) == 1  # one band: the pre-trained network has one replicate


def test_fig3c_grid_and_best_outputs(ds):
    fig = recipes("depth")["fig3c"].draw(ds)
    axes = [a for a in fig.axes if a.get_label() != "<colorbar>"]
    assert len(axes) == 3 * 2  # pretrained and initial's first network; the map has no values
    grid_ax, u_ax, s_ax = axes[:3]
    net = "pretrained"
    np.testing.assert_array_equal(grid_ax.images[0].get_array(), ds["handwriting_nmse"].sel(network=net).values.T)
    out = ds["handwriting_output"].sel(network=net).values
    score = ds["score"].values
    for k, ax in enumerate((u_ax, s_ax)):
        held = np.flatnonzero(((score < 1) if k == 0 else (score > 4)) & np.isfinite(out).all(axis=(1, 2)))
        outputs = [line for line in ax.lines if line.get_gid().startswith("output:")]
        assert len(outputs) == min(BEST, held.size)
        for line in outputs:
            s = int(line.get_gid().rsplit(":", 1)[1])
            assert s in held
            np.testing.assert_allclose(line.get_ydata(), np.cumsum(out[s], axis=0)[:, 1])
        (target,) = [line for line in ax.lines if line.get_gid().startswith("target:")]
        np.testing.assert_allclose(target.get_xdata(),
                                   np.cumsum(ds["handwriting_target"].sel(network=net).values[k], axis=0)[:, 0])


def test_figA1_lle_and_neff_per_score_class(ds):
    fig = recipes("depth")["figA1"].draw(ds)
    assert len(fig.axes) == 4  # pretrained and initial; the map's samples have no score class
    top, bottom = np.asarray(fig.axes).reshape(2, 2)[:, 0]  # pretrained's column
    classes = np.clip(np.floor(ds["score"].values), 0, 4).astype(int)
    names = [str(c) for c in ds["score_class"].values]
    lle = {line.get_gid(): line for line in top.lines if line.get_gid()}
    assert set(lle) == {f"lle:pretrained:{names[c]}" for c in np.unique(classes)}
    for c in np.unique(classes):
        want = ds["lyapunov_per_step"].sel(network="pretrained").isel(sample=np.flatnonzero(classes == c))
        np.testing.assert_allclose(lle[f"lle:pretrained:{names[c]}"].get_ydata(), want.mean("sample").values, rtol=1e-6)
    neff = {line.get_gid(): line for line in bottom.lines if line.get_gid()}
    for name in names:
        np.testing.assert_array_equal(neff[f"neff:pretrained:{name}"].get_ydata(),
                                      ds["effective_dimension_class"].sel(network="pretrained", score_class=name).values)
