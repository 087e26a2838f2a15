"""Figures of Inoue et al. 2021 ("Transient Chaos in BERT") drawn from a depth-dynamics store.

Fig. 2A (trajectories, attention maps, D(t)), 2B (synchronisation offsets), 2C (lambda(t) and
N_eff(t) with bootstrap bands), 3A (MLM accuracy of a readout of x_t), 4A (a perturbation's growth), 4B (a long run and its lambda(t)),
4C (principal components) and 4D (transient-chaos lengths, censored ones marked); Figs. 3B, 3C
and A1 (the STS-B readouts) are in :mod:`runner.studies.depth.readout_figures`. Each compares the
spec's models (pre-trained vs initial, or any others), one column or line per model.
"""

from __future__ import annotations


import numpy as np
import xarray as xr
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from runner.plugin.recipes import NotDrawable, recipe
from runner.plugin.plotting import (first_replicate, flag_code, mean_band, mean_legend, models, new_figure, not_applicable,
                              note_not_applicable, of_model, standard_error, thin)

PAPER = "Inoue et al. 2021"
STUDY = "depth"
#: Attention maps shown per network in Fig. 2A (the paper shows one every 50 steps).
MAX_MAPS = 10


def _with_data(ds: xr.Dataset, var: str, what: str) -> list[tuple[str, str]]:
    """(model, network) of each model's first network with values of ``var``; NotDrawable if none."""
    out = [(m, n) for m, n in first_replicate(ds) if np.isfinite(ds[var].sel(network=n).values).any()]
    if not out:
        raise NotDrawable(f"no {what} has been recorded yet")
    return out


def _traced(ds: xr.Dataset) -> list[tuple[str, str]]:
    return _with_data(ds, "trace", "trajectory")


@recipe(study=STUDY, id="fig2a", reproduces=f"{PAPER}, Fig. 2A", needs=("trace", "deviation"),
        title="Token-vector synchronisation")
def token_synchronisation(ds: xr.Dataset) -> Figure:
    """Per model: the first element of the traced token vectors, the attention maps at the
    recorded steps, and D(t) of the same sentence with its threshold."""
    cols = [(m, n) for m, n in _traced(ds) if (ds["deviation"].sel(network=n).values > 0).any()]
    if not cols:  # a map of one vector (a reservoir) has D(t) = 0: nothing synchronises
        raise NotDrawable("no network with several tokens has a trajectory and D(t) > 0 yet")
    has_attention = "attention" in ds
    fig = new_figure(4.2 * len(cols), 7.5)
    for sub, (model, net) in zip(np.atleast_1d(fig.subfigures(1, len(cols))), cols, strict=True):
        sub.suptitle(model)
        trace = ds["trace"].sel(network=net).isel(trace_sample=0, trace_element=0)
        sample = int(ds["trace_sample"].values[0])
        maps = _attention_maps(ds, net, sample) if has_attention else None
        heights = [3, 1.2, 3] if maps is not None else [3, 3]
        rows = sub.subfigures(len(heights), 1, height_ratios=heights)
        ax = rows[0].subplots()
        for tok in trace["trace_token"].values:
            ax.plot(trace["trace_step"].values, trace.sel(trace_token=tok).values, linewidth=0.8)
        ax.set(xlabel="t", ylabel="$x_t^i[0]$", title=f"sample {sample}: first element of {trace.sizes['trace_token']} tokens")
        if maps is not None:
            axes = np.atleast_1d(rows[1].subplots(1, maps.sizes["attention_step"]))
            for a, step in zip(axes, maps["attention_step"].values, strict=True):
                a.imshow(maps.sel(attention_step=step).values, vmin=0, cmap="viridis")
                a.set_title(f"t={int(step)}", fontsize="small")
                a.set_axis_off()
        ax = rows[-1].subplots()
        dev = ds["deviation"].sel(network=net, sample=sample)
        ax.semilogy(dev["deviation_step"].values, dev.values, color="k")
        ax.axhline(float(ds["deviation"].attrs.get("threshold", 1e-5)), color="r", linestyle="--", label="threshold")
        ax.set(xlabel="t", ylabel="D(t)")
        ax.legend(fontsize="small")
    return fig


def _attention_maps(ds: xr.Dataset, net: str, sample: int) -> xr.DataArray | None:
    if sample not in ds["attention_sample"].values:
        return None
    att = ds["attention"].sel(network=net, attention_sample=sample).mean("head")
    done = [s for s in att["attention_step"].values if np.isfinite(att.sel(attention_step=s).values).any()]
    if not done:
        return None
    keep = done[:: max(1, -(-len(done) // MAX_MAPS))]
    return att.sel(attention_step=keep)


#: Fig. 2B's median line and mean marker, in black and white: a model's colour is its box's only.
MEDIAN_LINE = {"color": "black", "linewidth": 1.5}
MEAN_MARK = {"marker": "^", "color": "black", "markerfacecolor": "white", "markeredgecolor": "black"}


@recipe(study=STUDY, id="fig2b", reproduces=f"{PAPER}, Fig. 2B", needs=("sync_offset",),
        title="Synchronisation offsets", sweeps=True)
def synchronisation_offsets(ds: xr.Dataset) -> Figure:
    """Synchronisation offsets of every sample and replicate, one box per model (black line: median,
    white triangle: mean, both in the legend; the label gives n, the offsets boxed; samples that never
    synchronised are left out and counted in the label; a model none of whose samples synchronised has
    no box and no legend entry, a note names it); against the swept parameter (the paper: N_w) when
    the store is a sweep."""
    swept = list(ds.attrs.get("sweep_dims", []))
    xdim = swept[0] if swept else None
    xs = ds[xdim].values.tolist() if xdim else [None]
    left_out = not_applicable(ds, "sync_outcome")
    names = [m for m in models(ds) if m not in left_out]
    if not names:
        raise NotDrawable(f"the token deviation does not apply to {', '.join(left_out)} (one token per sample)")
    fig = new_figure(max(6.4, 1.2 * len(xs) * len(names)), 4.0)
    ax = fig.subplots()
    width = 0.8 / len(names)
    found, empty = False, []
    for j, m in enumerate(names):
        data, never = [], 0
        for x in xs:
            off = of_model(ds["sync_offset"] if x is None else ds["sync_offset"].sel({xdim: x}), m).values.ravel()
            kept = off[np.isfinite(off)]  # NaN: never synchronised, diverged, or padding of a sweep's points
            if "sync_outcome" in ds:
                outcome = ds["sync_outcome"] if x is None else ds["sync_outcome"].sel({xdim: x})
                never += int(np.sum(of_model(outcome, m).values == flag_code(ds["sync_outcome"], "censored")))
            data.append(kept)
            found |= kept.size > 0
        pos = np.arange(len(xs)) + (j - (len(names) - 1) / 2) * width
        parts = ax.boxplot(data, positions=pos, widths=width * 0.9, showmeans=True, manage_ticks=False,
                           meanprops=MEAN_MARK, medianprops=MEDIAN_LINE, flierprops={"marker": "D"},
                           patch_artist=True, boxprops={"facecolor": f"C{j}", "alpha": 0.5})
        n = sum(d.size for d in data)
        if n:  # a model none of whose samples synchronised has no box: no legend entry, a note says so
            parts["boxes"][0].set_label(f"{m} (n={n}{f', {never} never' if never else ''})")
        else:
            empty.append(f"{m} ({never} never)" if never else m)
        for k, (median, mean) in enumerate(zip(parts["medians"], parts["means"], strict=True)):
            median.set_gid(f"median:{m}" + (f"@{xs[k]}" if xdim else ""))
            mean.set_gid(f"mean:{m}" + (f"@{xs[k]}" if xdim else ""))
    if not found:
        raise NotDrawable("no sample has synchronised yet")
    ax.set_xticks(np.arange(len(xs)), [str(x) for x in xs] if xdim else [""])
    ax.set_xlim(-0.5, len(xs) - 0.5)  # every model's slot, an empty one included
    tokens = ds.sizes.get("token")
    ax.set(ylabel="synchronisation offset (steps)",
           xlabel=("$N_w$" if xdim == "tokens" else xdim) if xdim else (f"N_w = {tokens}" if tokens else ""))
    handles = ax.get_legend_handles_labels()[0] + [  # the median and mean marks: black, no model's colour
        Line2D([], [], label="median", **MEDIAN_LINE),
        Line2D([], [], label="mean", linestyle="none", **MEAN_MARK)]
    ax.legend(handles=handles, fontsize="small", loc="upper right")
    note_not_applicable(ax, left_out, "one token per sample")
    if left_out or empty:
        ax.margins(y=0.08 * (bool(left_out) + bool(empty)))  # room above the boxes for the notes
    if empty:
        ax.text(0.01, 0.92 if left_out else 0.99, f"no sample synchronised: {', '.join(empty)}", transform=ax.transAxes,
                va="top", ha="left", fontsize="small", color="0.4", gid="never_synchronised")
    return fig


@recipe(study=STUDY, id="fig2c", reproduces=f"{PAPER}, Fig. 2C", needs=("lyapunov_per_step", "effective_dimension"),
        title="Local Lyapunov exponent and effective dimension")
def lyapunov_and_dimension(ds: xr.Dataset) -> Figure:
    """Mean lambda(t) per step over replicates and samples, and N_eff(t) over replicates, with 95%
    bootstrap bands; each label gives its n, and the samples whose exponent is not trusted
    (``lyapunov_twin`` other than stayed: unresolved, nonlinear, a twin that ran off) are left out."""
    fig = new_figure(6.4, 6.0)
    top, bottom = fig.subplots(2, 1, sharex=True)
    lam, flagged = _trusted_lyapunov(ds)
    for m in models(ds):
        out = int(of_model(flagged, m).sum())
        label = f"{m}, {out} left out" if out else m
        mean_band(top, of_model(lam, m), ("network", "sample"), "lyapunov_step", label=label)
        mean_band(bottom, of_model(ds["effective_dimension"], m), ("network",), "neff_step", label=m)
    top.axhline(0, color="grey", linewidth=0.5)
    top.set(ylabel=r"$\lambda(t)$ per step")
    bottom.set(xlabel="t", ylabel=r"$N_\mathrm{eff}(t)$")
    mean_legend(top, "replicates and samples")
    mean_legend(bottom, "replicates")
    return fig


@recipe(study=STUDY, id="fig4b", reproduces=f"{PAPER}, Fig. 4B", needs=("trace", "lyapunov_per_step"),
        title="Long-term sampling of one trajectory")
def long_run(ds: xr.Dataset) -> Figure:
    """Per model: the first element of the first traced token over the first steps and over the
    whole run, and lambda(t) of the same sample."""
    cols = _traced(ds)
    fig = new_figure(4.2 * len(cols), 7.0)
    axes = np.asarray(fig.subplots(3, len(cols), squeeze=False))
    sample = int(ds["trace_sample"].values[0])
    for k, (model, net) in enumerate(cols):
        x = ds["trace"].sel(network=net, trace_sample=sample).isel(trace_token=0, trace_element=0)
        early = x.isel(trace_step=slice(0, max(2, x.sizes["trace_step"] // 10)))
        axes[0, k].plot(early["trace_step"].values, early.values, linewidth=0.8)
        axes[0, k].set(title=model, ylabel="$x_t[0]$ (first steps)")
        x = thin(x, "trace_step")
        axes[1, k].plot(x["trace_step"].values, x.values, linewidth=0.5)
        axes[1, k].set(ylabel="$x_t[0]$")
        lam = thin(ds["lyapunov_per_step"].sel(network=net, sample=sample), "lyapunov_step")
        axes[2, k].plot(lam["lyapunov_step"].values, lam.values, linewidth=0.8)
        axes[2, k].axhline(0, color="grey", linewidth=0.5)
        _shade_regime(axes[2, k], ds, net, sample)
        axes[2, k].set(xlabel="t", ylabel=r"$\lambda(t)$ per step")
    return fig


def _trusted_lyapunov(ds: xr.Dataset) -> tuple[xr.DataArray, xr.DataArray]:
    """lambda(t) per step of the samples whose exponent is trusted (``lyapunov_twin`` stayed, or not
    written), and which samples were left out ``(network, sample)``."""
    lam = ds["lyapunov_per_step"]
    if "lyapunov_twin" not in ds:
        return lam, xr.zeros_like(lam.isel(lyapunov_step=0), dtype=bool)
    twin = ds["lyapunov_twin"]
    flagged = twin.notnull() & (twin != -1) & (twin != flag_code(twin, "stayed"))
    return lam.where(~flagged), flagged


def _shade_regime(ax, ds: xr.Dataset, net, sample) -> None:
    """Grey over the intervals of one sample whose lambda is not the map's (``lyapunov_regime``:
    unresolved or nonlinear)."""
    if "lyapunov_regime" not in ds:
        return
    regime = ds["lyapunov_regime"].sel(network=net, sample=sample)
    bad = (regime.notnull() & (regime != -1) & (regime != flag_code(regime, "resolved"))).values
    if bad.any():
        t = regime["lyapunov_step"].values
        ax.fill_between(t, 0, 1, where=bad, step="post", color="grey", alpha=0.3, linewidth=0,
                        transform=ax.get_xaxis_transform(), label="unresolved or nonlinear")
        ax.legend(fontsize="small", loc="upper right")


@recipe(study=STUDY, id="fig4c", reproduces=f"{PAPER}, Fig. 4C", needs=("pca_projection",),
        title="Principal components of the transient")
def principal_components(ds: xr.Dataset) -> Figure:
    """The traced sample's states over the PCA window, on their first two principal axes, per model."""
    proj = ds["pca_projection"]
    if proj.sizes["component"] < 2:
        raise NotDrawable("the PCA keeps fewer than two components")
    cols = _with_data(ds, "pca_projection", "PCA projection")
    fig = new_figure(3.6 * len(cols), 3.6)
    for ax, (model, net) in zip(np.atleast_1d(fig.subplots(1, len(cols))), cols, strict=True):
        p = proj.sel(network=net).isel(pca_sample=0)
        ax.plot(p.isel(component=0).values, p.isel(component=1).values, ".", markersize=2)
        ev = ds["pca_explained_variance"].sel(network=net).isel(pca_sample=0).values if "pca_explained_variance" in ds else None
        ax.set(title=model, xlabel=f"PC1{'' if ev is None else f' ({ev[0]:.0%})'}",
               ylabel=f"PC2{'' if ev is None else f' ({ev[1]:.0%})'}")
    return fig


@recipe(study=STUDY, id="fig4d", reproduces=f"{PAPER}, Fig. 4D", needs=("chaos_length", "chaos_censored"),
        title="Distribution of transient-chaos lengths")
def chaos_lengths(ds: xr.Dataset) -> Figure:
    """Histogram of chaos lengths per model over samples and replicates, the models' bars side by
    side in each bin (opaque: an overlap of translucent bars read as another model's colour);
    censored lengths (the run ended inside the transient: lower bounds) are stacked on top, hatched
    in the model's colour. With the ``orbit`` measure, each model's legend also says what its orbits
    settled on (recurrence classes)."""
    fig = new_figure()
    ax = fig.subplots()
    length = ds["chaos_length"].values
    finite = length[np.isfinite(length)]
    if finite.size == 0:
        raise NotDrawable("no chaos length has been computed yet")
    bins = np.histogram_bin_edges(finite, bins=30)
    names = models(ds)
    width = np.diff(bins) / len(names)
    for j, m in enumerate(names):
        lengths = of_model(ds["chaos_length"], m).values.ravel()
        censored = of_model(ds["chaos_censored"], m).values.ravel().astype(bool)
        ok = np.isfinite(lengths)
        plain = np.histogram(lengths[ok & ~censored], bins=bins)[0]
        left = bins[:-1] + j * width
        ax.bar(left, plain, width=width, align="edge", color=f"C{j}",
               label=f"{m} ({int(np.sum(ok & (lengths == 0)))} never chaotic{_orbits(ds, m)})")
        if (ok & censored).any():
            ax.bar(left, np.histogram(lengths[ok & censored], bins=bins)[0], width=width, bottom=plain, align="edge",
                   facecolor="white", edgecolor=f"C{j}", hatch="//", label=f"{m}: censored (lower bounds)")
    ax.set(xlabel="transient chaos length (steps)", ylabel="samples")
    ax.legend(fontsize="small")
    return fig


def _orbits(ds: xr.Dataset, model: str) -> str:
    """"; orbits: 60 quasi-periodic (lag 48), 4 chaotic": the orbit classes of a model's samples."""
    if "orbit_class" not in ds:
        return ""
    meanings = ds["orbit_class"].attrs["flag_meanings"].split()
    codes = of_model(ds["orbit_class"], model).values.ravel()
    periods = of_model(ds["orbit_period"], model).values.ravel() if "orbit_period" in ds else None
    parts = []
    for code, meaning in enumerate(meanings):
        here = codes == code
        if not here.any() or meaning == "not_applicable":
            continue
        lag = ""
        if periods is not None and np.isfinite(periods[here]).any():
            lag = f" ({'period' if meaning == 'periodic' else 'lag'} {np.nanmedian(periods[here]):g})"
        parts.append(f"{int(here.sum())} {meaning.replace('_', '-')}{lag}")
    return f"; orbits: {', '.join(parts)}" if parts else ""


@recipe(study=STUDY, id="fig4a", reproduces=f"{PAPER}, Fig. 4A", needs=("twin_distance", "twin_x", "twin_y"),
        title="Effect of a perturbation of the initial state")
def perturbation_growth(ds: xr.Dataset) -> Figure:
    """Per model: the first element of x_t (black) and of the perturbed y_t (red) for the first
    twin sample, and ||y_t - x_t|| with the growth at the sample's mean LLE (dotted; fitted to the
    growth phase when the store has no LLE)."""
    cols = _with_data(ds, "twin_distance", "twin distance")
    fig = new_figure(4.2 * len(cols), 6.0)
    axes = np.asarray(fig.subplots(2, len(cols), squeeze=False))
    sample = int(ds["twin_sample"].values[0])
    t = ds["twin_step"].values
    for k, (model, net) in enumerate(cols):
        cell = ds.sel(network=net, twin_sample=sample)
        axes[0, k].plot(t, cell["twin_x"].isel(twin_element=0).values, color="k", linewidth=0.8, label="$x_t$")
        axes[0, k].plot(t, cell["twin_y"].isel(twin_element=0).values, color="r", linewidth=0.8, label="$y_t$")
        axes[0, k].set(title=model, ylabel="first element")
        axes[0, k].legend(fontsize="small")
        d = cell["twin_distance"].values
        axes[1, k].semilogy(t, d, color="k", label=r"$\|y_t - x_t\|$")
        lam, how = _growth_rate(ds, net, sample, t, d)
        if lam is not None:
            reach = t[: int(np.nanargmax(d)) + 1]
            axes[1, k].semilogy(reach, d[0] * np.exp(lam * (reach - t[0])), ":", color="C0",
                                label=f"{how} {lam:.3g} per step")
        axes[1, k].set(xlabel="t", ylabel=r"$\|y_t - x_t\|$")
        axes[1, k].legend(fontsize="small")
    return fig


def _growth_rate(ds: xr.Dataset, net: str, sample: int, t: np.ndarray, d: np.ndarray) -> tuple[float | None, str]:
    """The sample's mean LLE per step over the twin's steps, or a least-squares slope of
    ln ||y_t - x_t|| up to its maximum."""
    if "lyapunov_per_step" in ds and sample in ds["sample"].values:
        lam = ds["lyapunov_per_step"].sel(network=net, sample=sample)
        lam = lam.where(lam["lyapunov_step"] < t[-1]).values
        if np.isfinite(lam).any():
            return float(np.nanmean(np.where(np.isfinite(lam), lam, np.nan))), "mean LLE"
    ok = np.isfinite(d) & (d > 0)
    stop = int(np.nanargmax(np.where(ok, d, np.nan))) + 1 if ok.any() else 0
    if ok[:stop].sum() < 2:
        return None, ""
    slope = np.polyfit(t[:stop][ok[:stop]], np.log(d[:stop][ok[:stop]]), 1)[0]
    return float(slope), "fitted slope"


@recipe(study=STUDY, id="fig3a", reproduces=f"{PAPER}, Fig. 3A", needs=("mlm_accuracy",),
        title="Performance of the MLM task along the trajectory")
def mlm_performance(ds: xr.Dataset) -> Figure:
    """Masked-token accuracy of a readout of x_t against t, one colour per model (the mean over
    its replicates, with a 95% bootstrap band over them): the fixed pre-trained MLM head solid, the
    decoder re-fitted at each step (``mlm_accuracy_refit``, when the store has it) dashed. Models
    without an MLM head (reference maps, all NaN) are left out."""
    fig = new_figure()
    ax = fig.subplots()
    drawn = False
    variants = [("mlm_accuracy", "-", "fixed")]
    if "mlm_accuracy_refit" in ds:
        variants.append(("mlm_accuracy_refit", "--", "fine-tuned"))
    for j, m in enumerate(models(ds)):
        for name, style, what in variants:
            acc = of_model(ds[name], m)
            if not np.isfinite(acc.values).any():
                continue
            mean_band(ax, acc, ("network",), acc.dims[-1], label=f"{m} ({what})", linestyle=style, color=f"C{j}",
                      gid=f"{name}:{m}")
            drawn = True
    if not drawn:
        raise NotDrawable("no MLM accuracy has been computed yet (or no network has an MLM head)")
    ax.set(xlabel="t", ylabel="MLM accuracy", ylim=(0, None))
    mean_legend(ax, "replicates")
    return fig


from runner.studies.depth import readout_figures as _readout_figures  # noqa: E402,F401  (registers Figs. 3B, 3C, A1)
from runner.studies.depth import spectrum_figures as _spectrum_figures  # noqa: E402,F401  (the Lyapunov spectrum's)


@recipe(study=STUDY, id="series", reproduces="beyond the papers",
        needs=("lyapunov_per_step", "effective_dimension"), title="Depth dynamics along a checkpoint series")
def along_training(ds: xr.Dataset) -> Figure:
    """Per ``[[model]]`` series (``revisions``): the time-mean lambda per step (the mean over samples
    of each sample's mean over the run, +-1 s.e. over samples) and the final N_eff of each
    checkpoint, against its training step."""
    if "training_step" not in ds.coords:
        raise NotDrawable("no [[model]] of this store is a checkpoint series (revisions)")
    fig = new_figure(6.4, 5.5)
    top, bottom = fig.subplots(2, 1, sharex=True)
    per_sample = ds["lyapunov_per_step"].where(np.isfinite(ds["lyapunov_per_step"])).mean("lyapunov_step")
    lam = per_sample.mean("sample")
    se = per_sample.reduce(standard_error, "sample")
    n = int(per_sample.notnull().sum("sample").max())
    neff = ds["effective_dimension"].isel(neff_step=-1)
    for name in dict.fromkeys(str(s) for s in ds["series"].values if s):
        nets = ds["network"].values[(ds["series"] == name).values & np.isfinite(ds["training_step"]).values]
        steps = ds["training_step"].sel(network=nets).values
        order = np.argsort(steps, kind="stable")
        top.errorbar(steps[order], lam.sel(network=nets).values[order], yerr=se.sel(network=nets).values[order],
                     marker="o", capsize=2, label=f"{name} (n={n})")
        bottom.plot(steps[order], neff.sel(network=nets).values[order], marker="o", label=name)
    top.axhline(0, color="grey", linewidth=0.5)
    top.set(ylabel=r"mean $\lambda$ per step")
    bottom.set(xlabel="training step of the checkpoint", ylabel=r"final $N_\mathrm{eff}$")
    mean_legend(top, "samples (of each sample's time mean)", band="se")
    bottom.legend(fontsize="small")
    return fig
