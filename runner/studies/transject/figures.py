"""Figures of "Don't Bet on Sparsity" (TransJect) drawn from a TransJect store, every one naming
the paper as :data:`runner.checkpointed.measures.figures.TRANSJECT` does.

Fig. 1 (Euclidean and cosine distances of token pairs per layer), Fig. 4 (training loss per step
and test loss per epoch), Fig. 5a (token entropy per layer), 5b (expert weights), 5c (activation
bound per layer) and Fig. 6 (Isomap of one sentence's tokens per layer). Measures are drawn at
each network's last measured checkpoint; the losses as the mean over each model's seeds (with its
n); one network (the first seed) per model where a figure shows one and says so, every seed pooled
where it shows a distribution.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from runner.checkpointed.measures.figures import TRANSJECT, last_measured, measured_nets, quantile_boxes
from runner.plugin.recipes import NotDrawable, recipe
from runner.plugin.plotting import mean_band, mean_legend, models, new_figure, of_model

STUDY = "transject"
#: One name for the paper in every TransJect figure, Figs. 1 and 5a (the kit's) included.
PAPER = TRANSJECT


@recipe(study=STUDY, id="fig4", reproduces=f"{PAPER}, Fig. 4", needs=("train_loss", "test_loss"),
        title="Training loss per step and test loss per epoch")
def losses(ds: xr.Dataset) -> Figure:
    """Each model's training loss per step and test loss per epoch (at the epoch's last step): the
    mean over its seeds, each label with its n, the band a bootstrap CI of the mean where a model has
    several seeds (it drew the first seed alone, unsaid)."""
    names = [m for m in models(ds) if np.isfinite(of_model(ds["train_loss"], m).values).any()]
    if not names:
        raise NotDrawable("no network has trained yet")
    fig = new_figure(10, 4)
    train_ax, test_ax = fig.subplots(1, 2)
    spe = ds.sizes["train_step"] / max(ds.sizes["training_epoch"], 1)
    for k, model in enumerate(names):
        style = {"color": f"C{k}", "gid": model}
        mean_band(train_ax, of_model(ds["train_loss"], model), ("network",), "train_step", label=model,
                  linewidth=0.7, **style)
        test = of_model(ds["test_loss"], model)
        mean_band(test_ax, test.assign_coords(training_epoch=test["training_epoch"] * spe), ("network",),
                  "training_epoch", label=model, marker=".", **style)
    train_ax.set(xlabel="training step", ylabel="training loss")
    test_ax.set(xlabel="training step", ylabel="test loss")
    for ax in (train_ax, test_ax):  # steps are whole numbers: no 2.5, 7.5 ticks
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    mean_legend(train_ax, "seeds")
    return fig


@recipe(study=STUDY, id="fig5b", reproduces=f"{PAPER}, Fig. 5b", needs=("expert_weight",),
        title="Expert weights per layer")
def expert_weights(ds: xr.Dataset) -> Figure:
    da = ds["expert_weight"]
    ms = [m for m in models(ds) if np.isfinite(of_model(da, m).values).any()]
    if not ms:
        raise NotDrawable("no expert weight has been computed yet (the baselines have none)")
    layers = list(da["encoder_layer"].values)
    fig = new_figure(max(6.4, 1.5 * len(layers)), 4.0)
    ax = fig.subplots()
    width = 0.8 / len(ms)
    for k, model in enumerate(ms):
        values = [[] for _ in layers]
        seeds = 0
        for net in of_model(da, model)["network"].values:
            if not np.isfinite(da.sel(network=net).values).any():
                continue
            seeds += 1
            cell = last_measured(da.sel(network=net))
            for i, layer in enumerate(layers):
                w = cell.sel(encoder_layer=layer).values
                values[i] += list(w[np.isfinite(w)])
        pos = [i + (k - (len(ms) - 1) / 2) * width for i in range(len(layers))]
        keep = [i for i, v in enumerate(values) if v]
        parts = ax.boxplot([values[i] for i in keep], positions=[pos[i] for i in keep], widths=width * 0.9,
                           patch_artist=True, showfliers=True)
        for box in parts["boxes"]:
            box.set(facecolor=f"C{k}", alpha=0.5)
        ax.plot([], [], color=f"C{k}", linewidth=6, alpha=0.5, label=f"{model} (n={seeds} seeds)")
    n_exp = ds.sizes["expert"]
    ax.axhline(1 / n_exp, color="grey", linestyle=":", linewidth=0.8, label="uniform")
    ax.set_xticks(range(len(layers)), [str(x) for x in layers])
    ax.set(xlabel="layer", ylabel=r"expert weight $\lambda_e$")
    ax.legend(fontsize="small")
    return fig


@recipe(study=STUDY, id="fig5c", reproduces=f"{PAPER}, Fig. 5c", needs=("bound_quantile",),
        title="Layer-wise empirical activation bounds")
def activation_bounds(ds: xr.Dataset) -> Figure:
    fig = quantile_boxes(ds, "bound_quantile", r"$\|f(x_i)-f(x_j)\| / \|x_i-x_j\|$", skip_embedding=True)
    fig.axes[0].axhline(1.0, color="grey", linestyle=":", linewidth=0.8)
    return fig


@recipe(study=STUDY, id="fig6", reproduces=f"{PAPER}, Fig. 6", needs=("isomap",),
        title="Isomap of the sentence's token representations per layer")
def isomap(ds: xr.Dataset) -> Figure:
    nets = measured_nets(ds, "isomap")
    layers = list(ds["layer"].values)
    fig = new_figure(2.6 * len(layers), 2.6 * len(nets))
    axes = np.atleast_2d(fig.subplots(len(nets), len(layers), squeeze=False))
    words = [str(t) for t in ds["token_text"].values]
    for r, (model, net) in enumerate(nets):
        cell = last_measured(ds["isomap"].sel(network=net))
        for c, layer in enumerate(layers):
            ax = axes[r, c]
            xy = cell.sel(layer=layer).values
            ok = np.isfinite(xy).all(axis=1)
            ax.scatter(xy[ok, 0], xy[ok, 1], s=10)
            for i in np.flatnonzero(ok):
                ax.annotate(words[i], xy[i], fontsize="xx-small")
            ax.set(xticks=[], yticks=[], title=f"{net}: {layer}" if r == 0 or c == 0 else str(layer))  # which seed
    return fig
