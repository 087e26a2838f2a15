"""The figures of the kit's measures (:mod:`runner.checkpointed.measures`), drawn from the store of
every study that takes the kit; a study may draw one of them its own way by registering a recipe of
the same id (the LSTM study's Fig. 3 marks its learning-rate changes)."""

from __future__ import annotations

import math
import warnings

from collections.abc import Callable

import numpy as np
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from runner.checkpointed.measure import KIT
from runner.plugin.recipes import NotDrawable, recipe
from runner.plugin.plotting import first_replicate, legend_if_drawn, models, new_figure, of_model

TRANSJECT = "Don't Bet on Sparsity (TransJect)"
SAPHRA = "Saphra 2021, Ch. 4"


def last_measured(da: xr.DataArray) -> xr.DataArray:
    """``da`` of one network at its last checkpoint with any finite value (NotDrawable if none)."""
    done = [c for c in range(da.sizes["checkpoint"]) if np.isfinite(da.isel(checkpoint=c).values).any()]
    if not done:
        raise NotDrawable(f"no {da.name} has been computed yet")
    return da.isel(checkpoint=done[-1])


def measured_nets(ds: xr.Dataset, name: str) -> list[tuple[str, str]]:
    """(model, network) of the first seed of each model with any value of ``name``."""
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


@recipe(study=KIT, id="fig1", reproduces=f"{TRANSJECT}, Fig. 1", needs=("pair_euclidean", "pair_cosine"),
        title="Layer-wise distances between token pairs")
def distances(ds: xr.Dataset) -> Figure:
    """Per model (its first seed, last measured checkpoint): the Euclidean and cosine distance of
    each token pair (at most ``MAX_PAIRS``) at every layer."""
    nets = measured_nets(ds, "pair_euclidean")
    fig = new_figure(4.0 * len(nets), 6.0)
    axes = np.atleast_2d(fig.subplots(2, len(nets), squeeze=False))
    layers = np.arange(ds.sizes["layer"])
    for k, (model, net) in enumerate(nets):
        for row, (name, what) in enumerate((("pair_euclidean", "Euclidean distance"), ("pair_cosine", "cosine distance"))):
            ax = axes[row, k]
            da = last_measured(ds[name].sel(network=net))
            for pair in da["pair"].values[:MAX_PAIRS]:
                ax.plot(layers, da.sel(pair=pair).values, marker=".", label=pair_label(ds, str(pair)))
            ax.set(xlabel="layer", ylabel=what, xticks=layers, title=net if row == 0 else "")  # which seed
    shown, total = min(MAX_PAIRS, ds.sizes["pair"]), ds.sizes["pair"]
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside right upper", fontsize="x-small",
               title_fontsize="x-small",
               title="token (position)" + (f"\n{shown} of {total} pairs" if shown < total else ""))
    return fig


def _boxes(ax, stats: list[dict], positions, color: str, width: float) -> None:
    ax.bxp(stats, positions=positions, widths=width, showfliers=False, patch_artist=True,
           boxprops={"facecolor": color, "alpha": 0.5}, medianprops={"color": "black"})


def quantile_boxes(ds: xr.Dataset, name: str, ylabel: str, skip_embedding: bool) -> Figure:
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


@recipe(study=KIT, id="fig5a", reproduces=f"{TRANSJECT}, Fig. 5a", needs=("entropy_quantile",),
        title="Layer-wise entropy of token representations")
def entropy(ds: xr.Dataset) -> Figure:
    return quantile_boxes(ds, "entropy_quantile", "token entropy (nats)", skip_embedding=False)


def _by_checkpoint(ax, da: xr.DataArray, label: str) -> None:
    """One line over the checkpoints: by epoch, or by training step where there are no epochs (a
    published suite's checkpoints; symmetric-log scale)."""
    if np.isnan(da["epoch"].values).all():
        ax.plot(da["step"].values, da.values, marker=".", label=label)
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlabel("training step")
    else:
        ax.plot(da["epoch"].values, da.values, marker=".", label=label)
        ax.set_xlabel("epoch")


@recipe(study=KIT, id="ch4_fig3", reproduces=f"{SAPHRA}, Fig. 3", needs=("svcca_final", "cka_final"),
        title="Each checkpoint against the final one")
def versus_final(ds: xr.Dataset, networks: list[str] | None = None,
                 marks: Callable[[Axes, list[str]], None] | None = None) -> Figure:
    """SVCCA and CKA of each layer against the network's final checkpoint, one line per (network,
    layer), for ``networks`` (default: the first seed of each model) that have a value; ``marks(ax,
    networks)`` draws a study's own marks on each panel (where its learning rate changed, say)."""
    stats = [s for s in ("svcca", "cka") if f"{s}_final" in ds]
    networks = networks or [net for _, net in first_replicate(ds)]
    networks = [n for n in networks if np.isfinite(ds[f"{stats[0]}_final"].sel(network=n).values).any()] or networks
    fig = new_figure(5.0 * len(stats), 4.0)
    axes = np.atleast_1d(fig.subplots(1, len(stats), sharey=True))
    drawn = 0
    for ax, stat in zip(axes, stats, strict=True):
        da = ds[f"{stat}_final"]
        for net in networks:
            for layer in da["layer"].values:
                line = da.sel(network=net, layer=layer)
                if np.isfinite(line.values).any():
                    _by_checkpoint(ax, line, f"{net}: {layer}" if len(networks) > 1 else str(layer))
                    drawn += 1
        if marks is not None:
            marks(ax, networks)
        ax.set(ylabel=stat.upper(), ylim=(0, 1.02))
        legend_if_drawn(ax, fontsize="x-small")
    if not drawn:
        raise NotDrawable("no final similarity has been computed yet")
    return fig
