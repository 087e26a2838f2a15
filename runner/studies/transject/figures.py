"""Figures of the TransJect paper drawn from a TransJect store.

Fig. 1 (Euclidean and cosine distances of token pairs per layer), Fig. 4 (training loss per step
and test loss per epoch), Fig. 5a (token entropy per layer), 5b (expert weights), 5c (activation
bound per layer) and Fig. 6 (Isomap of one sentence's tokens per layer). Measures are drawn at
each network's last measured checkpoint; one network (the first seed) per model where a figure
shows one, every seed pooled where it shows a distribution.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from runner.read.figures import NotDrawable, recipe
from runner.read.plotting import first_replicate, models, new_figure, of_model

STUDY = "transject"
PAPER = "TransJect paper"


def last_measured(da: xr.DataArray) -> xr.DataArray:
    """``da`` of one network at its last checkpoint with any finite value (NotDrawable if none)."""
    done = [c for c in range(da.sizes["checkpoint"]) if np.isfinite(da.isel(checkpoint=c).values).any()]
    if not done:
        raise NotDrawable(f"no {da.name} has been computed yet")
    return da.isel(checkpoint=done[-1])


def _measured_nets(ds: xr.Dataset, name: str) -> list[tuple[str, str]]:
    out = [(m, n) for m, n in first_replicate(ds) if np.isfinite(ds[name].sel(network=n).values).any()]
    if not out:
        raise NotDrawable(f"no {name} has been computed yet")
    return out


#: Token pairs drawn per panel of Fig. 1 at most (the first ones of the ``pair`` coordinate).
MAX_PAIRS = 8


def pair_label(ds: xr.Dataset, pair: str) -> str:
    """A legend label of a ``pair`` of the distances measure: its two tokens, quoted, and their
    positions in the analysis sentence (``"[SM" (0) and "8" (1)`` for the coordinate ``0:[SM~1:8``)."""
    i, j = (int(ds[c].sel(pair=pair)) for c in ("pair_first", "pair_second"))
    a, b = pair.split("~", 1)
    a, b = a.removeprefix(f"{i}:"), b.removeprefix(f"{j}:")
    return f'"{a}" ({i}) and "{b}" ({j})'


@recipe(study=STUDY, id="fig1", reproduces=f"{PAPER}, Fig. 1", needs=("pair_euclidean", "pair_cosine"),
        title="Layer-wise distances between token pairs")
def distances(ds: xr.Dataset) -> Figure:
    """Per model (its first seed, last measured checkpoint): the Euclidean and cosine distance of
    each token pair (at most ``MAX_PAIRS``) at every layer."""
    nets = _measured_nets(ds, "pair_euclidean")
    fig = new_figure(4.0 * len(nets), 6.0)
    axes = np.atleast_2d(fig.subplots(2, len(nets), squeeze=False))
    layers = np.arange(ds.sizes["layer"])
    for k, (model, net) in enumerate(nets):
        for row, (name, what) in enumerate((("pair_euclidean", "Euclidean distance"), ("pair_cosine", "cosine distance"))):
            ax = axes[row, k]
            da = last_measured(ds[name].sel(network=net))
            for pair in da["pair"].values[:MAX_PAIRS]:
                ax.plot(layers, da.sel(pair=pair).values, marker=".", label=pair_label(ds, str(pair)))
            ax.set(xlabel="layer", ylabel=what, xticks=layers, title=model if row == 0 else "")
    shown, total = min(MAX_PAIRS, ds.sizes["pair"]), ds.sizes["pair"]
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside right upper", fontsize="x-small",
               title_fontsize="x-small",
               title="token (position)" + (f"\n{shown} of {total} pairs" if shown < total else ""))
    return fig


@recipe(study=STUDY, id="fig4", reproduces=f"{PAPER}, Fig. 4", needs=("train_loss", "test_loss"),
        title="Training loss per step and test loss per epoch")
def losses(ds: xr.Dataset) -> Figure:
    nets = [(m, n) for m, n in first_replicate(ds) if np.isfinite(ds["train_loss"].sel(network=n).values).any()]
    if not nets:
        raise NotDrawable("no network has trained yet")
    fig = new_figure(10, 4)
    train_ax, test_ax = fig.subplots(1, 2)
    spe = ds.sizes["train_step"] / max(ds.sizes["training_epoch"], 1)
    for k, (model, net) in enumerate(nets):
        color = f"C{k}"
        train_ax.plot(ds["train_step"].values, ds["train_loss"].sel(network=net).values, color=color, linewidth=0.7,
                      label=model)
        test_ax.plot(ds["training_epoch"].values * spe, ds["test_loss"].sel(network=net).values, color=color,
                     marker=".", label=model)
    train_ax.set(xlabel="training step", ylabel="training loss")
    test_ax.set(xlabel="training step", ylabel="test loss")
    train_ax.legend(fontsize="small")
    return fig


def _boxes(ax, stats: list[dict], positions, color: str, width: float) -> None:
    ax.bxp(stats, positions=positions, widths=width, showfliers=False, patch_artist=True,
           boxprops={"facecolor": color, "alpha": 0.5}, medianprops={"color": "black"})


def _quantile_boxes(ds: xr.Dataset, name: str, ylabel: str, skip_embedding: bool) -> Figure:
    """One box per (model, layer) from stored quantiles (whiskers 5-95 %), pooled over seeds by the
    median (each label gives the seeds pooled)."""
    da = ds[name]
    q = list(np.round(da["quantile"].values, 4))
    need = [0.05, 0.25, 0.5, 0.75, 0.95]
    if not all(x in q for x in need):
        raise NotDrawable(f"{name} lacks the quantiles {need}")
    layers = list(da["layer"].values)[1 if skip_embedding else 0:]
    ms = models(ds)
    fig = new_figure(max(6.4, 1.2 * len(layers) * max(1, len(ms)) / 2), 4.0)
    ax = fig.subplots()
    width = 0.8 / max(len(ms), 1)
    drawn = 0
    for k, model in enumerate(ms):
        cells = []
        for net in of_model(da, model)["network"].values:
            try:
                cells.append(last_measured(da.sel(network=net)))
            except NotDrawable:
                continue
        if not cells:
            continue
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN cells (the embedding's bound)
            pooled = cells[0].copy(data=np.nanmedian(np.stack([c.values for c in cells]), axis=0))
        stats, pos = [], []
        for i, layer in enumerate(layers):
            v = pooled.sel(layer=layer)
            vals = [float(v.isel(quantile=q.index(x))) for x in need]
            if not all(map(math.isfinite, vals)):
                continue
            stats.append(dict(whislo=vals[0], q1=vals[1], med=vals[2], q3=vals[3], whishi=vals[4], label=str(layer)))
            pos.append(i + (k - (len(ms) - 1) / 2) * width)
        if stats:
            _boxes(ax, stats, pos, f"C{k}", width * 0.9)
            ax.plot([], [], color=f"C{k}", linewidth=6, alpha=0.5, label=f"{model} (n={len(cells)} seeds)")
            drawn += 1
    if not drawn:
        raise NotDrawable(f"no {name} has been computed yet")
    ax.set_xticks(range(len(layers)), [str(x) for x in layers])
    ax.set(xlabel="layer", ylabel=ylabel)
    ax.legend(fontsize="small")
    return fig


@recipe(study=STUDY, id="fig5a", reproduces=f"{PAPER}, Fig. 5a", needs=("entropy_quantile",),
        title="Layer-wise entropy of token representations")
def entropy(ds: xr.Dataset) -> Figure:
    return _quantile_boxes(ds, "entropy_quantile", "token entropy (nats)", skip_embedding=False)


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
    fig = _quantile_boxes(ds, "bound_quantile", r"$\|f(x_i)-f(x_j)\| / \|x_i-x_j\|$", skip_embedding=True)
    fig.axes[0].axhline(1.0, color="grey", linestyle=":", linewidth=0.8)
    return fig


@recipe(study=STUDY, id="fig6", reproduces=f"{PAPER}, Fig. 6", needs=("isomap",),
        title="Isomap of the sentence's token representations per layer")
def isomap(ds: xr.Dataset) -> Figure:
    nets = _measured_nets(ds, "isomap")
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
            ax.set(xticks=[], yticks=[], title=f"{model}: {layer}" if r == 0 or c == 0 else str(layer))
    return fig


# The measures shared with the training study (entropy, distances: on activations only) drawn from its
# stores too: the same recipes, registered for that study under their own ids.
recipe(study="training", id="transject_fig1", reproduces=f"{PAPER}, Fig. 1 (on the training study's networks)",
       needs=("pair_euclidean", "pair_cosine"), title="Layer-wise distances between token pairs")(distances)
recipe(study="training", id="transject_fig5a", reproduces=f"{PAPER}, Fig. 5a (on the training study's networks)",
       needs=("entropy_quantile",), title="Layer-wise entropy of token representations")(entropy)
