"""Figures of the STS-B readouts of Inoue et al. 2021: Fig. 3B (Pearson r of a readout of x_t),
3C (the handwriting task's NMSE grid and its best outputs) and A1 (LLE and N_eff per STS-B score
class). Registered with the depth study's recipes (:mod:`runner.studies.depth.figures`)."""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from runner.plugin.recipes import NotDrawable, recipe
from runner.plugin.plotting import first_replicate, mean_band, mean_legend, models, new_figure, of_model
from runner.studies.depth.measures.effective_dimension import SCORE_CLASSES

PAPER = "Inoue et al. 2021"
STUDY = "depth"
#: Outputs drawn per letter in Fig. 3C right (the paper: the five best).
BEST = 5


@recipe(study=STUDY, id="fig3b", reproduces=f"{PAPER}, Fig. 3B", needs=("sts_pearson",),
        title="Performance of STS-B along the trajectory")
def sts_performance(ds: xr.Dataset) -> Figure:
    """Pearson r of the STS-B readout of x_t against t, one line per model (the mean over its
    replicates, with a 95% bootstrap band over them and its n); models without values (maps) left
    out. With ``sts_finetune``, the fine-tuned network's r as dashed lines with markers, as in the
    paper (also the mean over replicates, with its band)."""
    fig = new_figure()
    ax = fig.subplots()
    drawn = False
    for j, m in enumerate(models(ds)):
        r = of_model(ds["sts_pearson"], m)
        if np.isfinite(r.values).any():
            mean_band(ax, r, ("network",), "sts_step", label=m, color=f"C{j}", gid=f"sts_pearson:{m}")
            drawn = True
        if "sts_finetuned_pearson" in ds:
            tuned = of_model(ds["sts_finetuned_pearson"], m)
            if np.isfinite(tuned.values).any():
                mean_band(ax, tuned, ("network",), "sts_finetune_step", label=f"{m} (fine-tuned f)", linestyle="--",
                          marker="o", color=f"C{j}", gid=f"sts_finetuned_pearson:{m}")
    if not drawn:
        raise NotDrawable("no STS-B Pearson score has been computed yet")
    ax.axhline(0, color="grey", linewidth=0.5)
    ax.set(xlabel="t", ylabel="Pearson r (STS-B)")
    mean_legend(ax, "replicates")
    return fig


@recipe(study=STUDY, id="fig3c", reproduces=f"{PAPER}, Fig. 3C",
        needs=("handwriting_nmse", "handwriting_output", "handwriting_target"), title="Handwriting task")
def handwriting(ds: xr.Dataset) -> Figure:
    """Per model (its first network), left: the NMSE over the grid of offsets t0 and lengths dT;
    right, for each letter: the pen positions p_t (cumulative sums of the outputs) of the
    ``BEST`` held-out pairs with the smallest error at the demonstration cell, and the letter
    (black, dashed)."""
    rows = [(m, n) for m, n in first_replicate(ds) if np.isfinite(ds["handwriting_nmse"].sel(network=n).values).any()]
    if not rows:
        raise NotDrawable("no handwriting NMSE has been computed yet")
    attrs = ds["handwriting_output"].attrs
    t0, dt = attrs.get("demo", [None, None])
    fig = new_figure(10.0, 3.4 * len(rows))
    axes = np.asarray(fig.subplots(len(rows), 3, squeeze=False))
    letters = [str(c) for c in ds["hw_letter"].values]
    for (model, net), (grid_ax, *letter_axes) in zip(rows, axes, strict=True):
        grid = ds["handwriting_nmse"].sel(network=net)
        t0s, dts = grid["hw_t0"].values, grid["hw_dt"].values
        image = grid_ax.imshow(grid.values.T, origin="lower", aspect="auto", cmap="viridis",
                               extent=(t0s[0] - 0.5, t0s[-1] + 0.5, dts[0] - 0.5, dts[-1] + 0.5))
        fig.colorbar(image, ax=grid_ax, label="NMSE")
        grid_ax.set(title=model, xlabel="$t_0$", ylabel=r"$\Delta T$")
        out = ds["handwriting_output"].sel(network=net).values  # (sample, point, pen)
        target = ds["handwriting_target"].sel(network=net).values  # (letter, point, pen)
        letter = _letters(ds)
        for k, ax in enumerate(letter_axes):
            d = target[k]
            mine = np.flatnonzero((letter == k) & np.isfinite(out).all(axis=(1, 2)))
            err = ((out[mine] - d) ** 2).sum(axis=(1, 2))
            for s in mine[np.argsort(err)][:BEST]:
                p = np.cumsum(out[s], axis=0)
                ax.plot(p[:, 0], p[:, 1], linewidth=0.8, gid=f"output:{model}:{s}")
            p = np.cumsum(d, axis=0)
            ax.plot(p[:, 0], p[:, 1], "k--", gid=f"target:{model}:{letters[k]}")
            ax.set(title=f"{letters[k]} (t0={t0}, dT={dt})", aspect="equal")
            ax.set_axis_off()
    return fig


def _letters(ds: xr.Dataset) -> np.ndarray:
    """The letter each sample writes (0, 1; -1: none), from its score and the measure's bounds."""
    attrs = ds["handwriting_output"].attrs
    score = ds["score"].values
    return np.where(score < attrs["low"], 0, np.where(score > attrs["high"], 1, -1))


@recipe(study=STUDY, id="figA1", reproduces=f"{PAPER}, Fig. A1", needs=("lyapunov_per_step", "effective_dimension_class"),
        title="Trajectory analysis for STS-B score classes")
def score_classes(ds: xr.Dataset) -> Figure:
    """Per model: lambda(t) per step averaged over its replicates and the samples of each score
    class (floor of the score, 5 in the last), and N_eff(t) of each class, with 95% bootstrap bands
    and each line's n.
    (The paper's left panel also shows the Wikipedia sentences' lambda(t): that is Fig. 2C of
    another store.)"""
    if "score" not in ds.coords:
        raise NotDrawable("the store has no sentence-pair scores ([input] score)")
    cls = score_class_of(ds["score"].values)
    cols = [m for m in models(ds) if np.isfinite(of_model(ds["effective_dimension_class"], m).values).any()]
    if not cols:
        raise NotDrawable("no N_eff per score class has been computed yet")
    fig = new_figure(4.2 * len(cols), 6.0)
    axes = np.asarray(fig.subplots(2, len(cols), squeeze=False, sharex=True))
    names = [str(c) for c in ds["score_class"].values]
    for k, m in enumerate(cols):
        for c, name in enumerate(names):
            samples = np.flatnonzero(cls == c)
            if samples.size:
                lam = of_model(ds["lyapunov_per_step"], m).isel(sample=samples)
                mean_band(axes[0, k], lam, ("network", "sample"), "lyapunov_step", label=f"score {name}", color=f"C{c}",
                          gid=f"lle:{m}:{name}")
            neff = of_model(ds["effective_dimension_class"], m).sel(score_class=name)
            if np.isfinite(neff.values).any():
                mean_band(axes[1, k], neff, ("network",), "neff_step", label=f"score {name}", color=f"C{c}",
                          gid=f"neff:{m}:{name}")
        axes[0, k].axhline(0, color="grey", linewidth=0.5)
        axes[0, k].set(title=m, ylabel=r"$\lambda(t)$ per step")
        axes[1, k].set(xlabel="t", ylabel=r"$N_\mathrm{eff}(t)$")
        mean_legend(axes[0, k], "replicates and samples")
        mean_legend(axes[1, k], "replicates")
    return fig


def score_class_of(scores: np.ndarray) -> np.ndarray:
    """The class index of each score, as :func:`~runner.studies.depth.measures.effective_dimension.score_class` bins it."""
    return np.clip(np.floor(scores), 0, len(SCORE_CLASSES) - 1).astype(int)
