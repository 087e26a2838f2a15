"""Figures of Saphra's thesis (2021) drawn from a training-dynamics store.

Chapter 4 (SVCCA paper): Fig. 2 (the LM's validation perplexity), 3 (each epoch vs the final LM),
4 (vs an LM of another seed), 5 (between layers), 6-7 (diagnostic classifiers) and 8-11 (vs the
taggers; dotted: taggers trained on shuffled tags); each similarity figure shows SVCCA and CKA side
by side. Chapter 6 (sparsity paper): Fig. 2 (chi of the gradient h-bar^2 per target word and
epoch), 3 (rho<- over training), 4 (rho<-(h-bar^2) over open and closed classes) and 5 (chi
against word frequency after training). Grey vertical lines mark where the step size was
rescaled, as in the thesis. Chapter 5 (interdependence paper): Fig. 3 (mean DI of word pairs by
sequential distance) and 4 (by syntactic distance, per sequential distance and open/closed class;
a mean is drawn only over at least ``min_cases`` pairs, 100 in the paper), and on the scaffold
corpora Fig. 7 (P(omega), in-domain and random scaffolds), 8 (P(omega) from alpha by CD) and 10
(DI(alpha, scaffold), in-domain): one line per scaffold length and setting, the mean over seeds,
dashed for familiar scaffolds; from Appendices B and C, Fig. 11 (P(omega) by CD from alpha and from
the scaffold against the rule's occurrences n, from a sweep over ``rules``) and Fig. 12 (the error
gradient at omega by distance from alpha).
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter, NullLocator

from runner.checkpointed.measures import figures as kit_figures  # the kit's figures, which this study draws too
from runner.plugin.recipes import NotDrawable, recipe
from runner.plugin.plotting import legend_if_drawn, mean_legend, new_figure, pair_counts, standard_error, stat_note

STUDY = "training"
CH4 = "Saphra 2021, Ch. 4"
CH6 = "Saphra 2021, Ch. 6"
#: The layer and quantity of Ch. 6 Figs. 2, 4 and 5: the gradient into the second LSTM layer.
SPARSE_LAYER, SPARSE_QUANTITY = "lstm2", "gradient"


def _lms(ds: xr.Dataset) -> list[str]:
    kinds = ds["network_kind"].values if "network_kind" in ds.coords else ["lm"] * ds.sizes["network"]
    return [str(n) for n, k in zip(ds["network"].values, kinds, strict=True) if k in ("lm", "suite")]


def _finite(da: xr.DataArray) -> bool:
    return bool(np.isfinite(da.values).any())


def _rescales(ax: Axes, ds: xr.Dataset, network: str) -> None:
    """Grey vertical lines at the epochs after which the learning rate changed."""
    if "epoch_learning_rate" not in ds:
        return
    lr = ds["epoch_learning_rate"].sel(network=network).values
    for e in ds["training_epoch"].values[1:][np.diff(lr) != 0]:
        ax.axvline(e - 1, color="grey", linewidth=0.6, linestyle=":")


def _suite(da: xr.DataArray | xr.Dataset) -> bool:
    """A store of published checkpoint suites: no epochs, the training step is the time axis."""
    return bool(np.isnan(da["epoch"].values).all())


def _by_epoch(ax: Axes, da: xr.DataArray, label: str, **kw) -> None:
    """One line over the checkpoints: by epoch, or for a suite by training step (symmetric-log scale)."""
    if _suite(da):
        ax.plot(da["step"].values, da.values, marker=".", label=label, **kw)
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlabel("training step")
    else:
        ax.plot(da["epoch"].values, da.values, marker=".", label=label, **kw)


#: Labelled ticks of a log axis at most (:func:`_log_y`).
MAX_LOG_TICKS = 8


def _log_y(ax: Axes, values: np.ndarray) -> None:
    """A log y axis whose labelled ticks are plain numbers (30, 40; 20, 50, 100; 10, 100, 1000) at
    any range, the limits widened to the labelled ticks around ``values`` (at least two show): every
    integer multiple of the powers of ten, else 1, 2 and 5 times them, else the powers of ten, the
    first of these with at most ``MAX_LOG_TICKS`` labels; minor ticks unlabelled. (matplotlib's
    default labels a range within a decade with minor ticks such as 3.35 x 10^1.)"""
    v = values[np.isfinite(values) & (values > 0)]
    ax.set_yscale("log")
    if not v.size:
        return
    lo, hi = float(v.min()), float(v.max())
    decades = range(int(np.floor(np.log10(lo))) - 1, int(np.ceil(np.log10(hi))) + 2)
    for subs in (tuple(np.arange(1.0, 10.0)), (1.0, 2.0, 5.0), (1.0,)):
        ticks = np.array([s * 10.0 ** k for k in decades for s in subs])
        bottom, top = ticks[ticks <= lo * (1 + 1e-9)].max(), ticks[ticks >= hi * (1 - 1e-9)].min()
        if bottom == top:  # one value, on a tick: the ticks either side
            bottom, top = ticks[ticks < bottom].max(), ticks[ticks > top].min()
        if ((ticks >= bottom) & (ticks <= top)).sum() <= MAX_LOG_TICKS:
            break
    ax.set_ylim(bottom, top)
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs, numticks=40))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
    ax.yaxis.set_minor_locator(LogLocator(base=10, subs=np.arange(1.0, 10.0), numticks=40))
    ax.yaxis.set_minor_formatter(NullFormatter())


@recipe(study=STUDY, id="ch4_fig2", reproduces=f"{CH4}, Fig. 2", needs=("val_perplexity",),
        title="Validation perplexity of the LM")
def perplexity(ds: xr.Dataset) -> Figure:
    """Each LM's validation perplexity per epoch, on a log axis with plainly labelled ticks."""
    fig = new_figure()
    ax = fig.subplots()
    lms = _lms(ds)
    for net in lms:
        ppl = ds["val_perplexity"].sel(network=net)
        ax.plot(ds["training_epoch"].values, ppl.values, marker=".", label=net)
    _rescales(ax, ds, lms[0])
    _log_y(ax, ds["val_perplexity"].sel(network=lms).values)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs: whole numbers
    ax.set(xlabel="epoch", ylabel="validation perplexity")
    ax.legend(fontsize="small")
    return fig


def _similarity(ds: xr.Dataset, compare: str, networks: list[str], split: str | None = None) -> Figure:
    """SVCCA and CKA against epoch, one line per (network, layer[, other])."""
    stats = [s for s in ("svcca", "cka") if f"{s}_{compare}" in ds]
    fig = new_figure(5.0 * len(stats), 4.0)
    axes = np.atleast_1d(fig.subplots(1, len(stats), sharey=True))
    drawn = 0
    networks = [n for n in networks if _finite(ds[f"{stats[0]}_{compare}"].sel(network=n))] or networks
    for ax, stat in zip(axes, stats, strict=True):
        da = ds[f"{stat}_{compare}"]
        for net in networks:
            for layer in da["layer"].values:
                cell = da.sel(network=net, layer=layer)
                others = cell[split].values if split else [None]
                for other in others:
                    line = cell.sel({split: other}) if split else cell
                    if not _finite(line):
                        continue
                    style = {"linestyle": ":"} if split == "tagger" and _shuffled(ds, str(other)) else {}
                    what = f"{layer}-{other}" if split else str(layer)
                    _by_epoch(ax, line, f"{net}: {what}" if len(networks) > 1 else what, **style)
                    drawn += 1
        _rescales(ax, ds, networks[0])
        ax.set(xlabel="training step" if _suite(ds) else "epoch", ylabel=stat.upper(), ylim=(0, 1.02))
        legend_if_drawn(ax, fontsize="x-small")
    if not drawn:
        raise NotDrawable(f"no {compare} similarity has been computed yet")
    return fig


def _shuffled(ds: xr.Dataset, network: str) -> bool:
    return "shuffled" in ds.coords and bool(ds["shuffled"].sel(network=network))


@recipe(study=STUDY, id="ch4_fig3", reproduces=f"{CH4}, Fig. 3", needs=("svcca_final", "cka_final"),
        title="Each epoch against the final LM")
def versus_final(ds: xr.Dataset) -> Figure:
    """The kit's Fig. 3 of every LM, with the epochs after which the learning rate changed marked."""
    return kit_figures.versus_final(ds, _lms(ds), marks=lambda ax, networks: _rescales(ax, ds, networks[0]))


@recipe(study=STUDY, id="ch4_fig4", reproduces=f"{CH4}, Fig. 4", needs=("svcca_seed", "cka_seed"),
        title="Against an LM with another initialisation")
def versus_seed(ds: xr.Dataset) -> Figure:
    return _similarity(ds, "seed", _lms(ds)[:1])


@recipe(study=STUDY, id="ch4_fig5", reproduces=f"{CH4}, Fig. 5", needs=("svcca_layers", "cka_layers"),
        title="Between layers of the LM")
def between_layers(ds: xr.Dataset) -> Figure:
    sub = ds[["svcca_layers", "cka_layers"]]
    layers = list(sub["layer"].values)  # each unordered pair once: h2-h1, not also h1-h2
    keep = xr.DataArray([[layers.index(a) > layers.index(b) for b in sub["layer_other"].values] for a in layers],
                        dims=("layer", "layer_other"), coords={"layer": layers, "layer_other": sub["layer_other"].values})
    return _similarity(ds.assign({k: sub[k].where(keep) for k in sub}), "layers", _lms(ds)[:1], split="layer_other")


@recipe(study=STUDY, id="ch4_fig6_7", reproduces=f"{CH4}, Figs. 6-7", needs=("probe_accuracy",),
        title="Diagnostic classifiers: input tag (left) and next tag (right)")
def diagnostic(ds: xr.Dataset) -> Figure:
    """Held-out probe accuracy per tag set and layer over training, shaded: its 95% Wilson interval
    (``probe_accuracy_low``/``_high``, on ``probe_n`` held-out tokens; the legend says at how many
    checkpoints it contains the baseline, where the probe cannot be told from the majority class);
    black dashed, per tag set: the majority class's accuracy (``probe_majority``: always predicting
    the most frequent tag of the training split), the baseline a probe must beat (the thesis, Ch. 4,
    after Zhang and Bowman 2018: probes may only memorise each word's most frequent tag)."""
    acc = ds["probe_accuracy"]
    net = _lms(ds)[0]
    fig = new_figure(10, 4)
    axes = fig.subplots(1, acc.sizes["tag_target"], sharey=True)
    drawn = 0
    for ax, target in zip(np.atleast_1d(axes), acc["tag_target"].values, strict=True):
        for tagset in acc["tagset"].values:
            for layer in acc["layer"].values:
                where = dict(network=net, tag_target=target, tagset=tagset, layer=layer)
                line = acc.sel(where)
                if _finite(line):
                    _by_epoch(ax, line, f"{tagset} {layer}" + _indistinct(ds, where))
                    _interval(ax, ds, where)
                    drawn += 1
        for k, tagset in enumerate(acc["tagset"].values):
            if "probe_majority" in ds:
                _majority(ax, ds["probe_majority"].sel(network=net, tag_target=target, tagset=tagset), str(tagset),
                          ("--", "-.", ":")[k % 3])
        _rescales(ax, ds, net)
        ax.set(xlabel="training step" if _suite(ds) else "epoch", ylabel="probe accuracy", title=f"tag of {'x_t' if target == 'current' else 'x_t+1'}")
        ax.legend(fontsize="x-small")
    if not drawn:
        raise NotDrawable("no diagnostic classifier has been trained yet")
    return fig


def _interval(ax: Axes, ds: xr.Dataset, where: dict) -> None:
    """The probe accuracy's 95% interval, shaded in its line's colour (stores before it was kept: none)."""
    if "probe_accuracy_low" not in ds:
        return
    low, high = ds["probe_accuracy_low"].sel(where), ds["probe_accuracy_high"].sel(where)
    x = low["step"].values if _suite(low) else low["epoch"].values
    ax.fill_between(x, low.values, high.values, color=ax.lines[-1].get_color(), alpha=0.15, linewidth=0,
                    gid=f"interval:{where['tagset']} {where['layer']}")


def _indistinct(ds: xr.Dataset, where: dict) -> str:
    """What the legend adds where the interval contains the majority class's accuracy."""
    if "probe_against_majority" not in ds:
        return ""
    verdict = ds["probe_against_majority"].sel(where).values
    done = int(np.isfinite(verdict).sum())
    same = int((verdict == 1).sum())  # cannot_tell_from_majority
    if not same:
        return ""
    return (" (cannot be told from the majority class)" if same == done else
            f" (cannot be told from the majority class at {same} of {done} checkpoints)")


def _majority(ax: Axes, majority: xr.DataArray, tagset: str, linestyle: str) -> None:
    """The majority-class accuracy of ``tagset``: a horizontal line with its value when it is the same
    at every checkpoint and layer (the same labels and split), else its line over the checkpoints."""
    values = majority.values[np.isfinite(majority.values)]
    if not values.size:
        return
    style = {"color": "k", "linestyle": linestyle, "linewidth": 1.0, "gid": f"majority:{tagset}"}
    if np.ptp(values) <= 1e-12:
        ax.axhline(values[0], label=f"majority class ({tagset}): {values[0]:.3f}", **style)
    else:
        per_checkpoint = majority.mean("layer")
        _by_epoch(ax, per_checkpoint, f"majority class ({tagset})", **style)


@recipe(study=STUDY, id="ch4_fig8_11", reproduces=f"{CH4}, Figs. 8-11", needs=("svcca_tagger", "cka_tagger"),
        title="LM layers against the taggers (dotted: shuffled tags)")
def versus_taggers(ds: xr.Dataset) -> Figure:
    return _similarity(ds, "tagger", _lms(ds)[:1], split="tagger")


def _sparse(ds: xr.Dataset, name: str) -> xr.DataArray:
    da = ds[name]
    if SPARSE_LAYER not in da["layer"].values:
        raise NotDrawable(f"{name} has no layer {SPARSE_LAYER} (the thesis plots the gradient into h^2)")
    return da.sel(network=_lms(ds)[0], layer=SPARSE_LAYER, quantity=SPARSE_QUANTITY)


@recipe(study=STUDY, id="ch6_fig2", reproduces=f"{CH6}, Fig. 2", needs=("word_chi",),
        title="Sparsity chi of the gradient into h^2 per target word")
def word_sparsity(ds: xr.Dataset) -> Figure:
    chi = _sparse(ds, "word_chi").sortby("word_count", ascending=False).transpose("word", "checkpoint")
    if not _finite(chi):
        raise NotDrawable("no word sparsity has been computed yet")
    fig = new_figure(6.4, 0.5 + 0.18 * chi.sizes["word"])
    ax = fig.subplots()
    mesh = ax.pcolormesh(chi["epoch"].values, np.arange(chi.sizes["word"]), chi.values, shading="nearest")
    ax.set_yticks(np.arange(chi.sizes["word"]), [str(w) for w in chi["word"].values], fontsize="x-small")
    ax.set(xlabel="epoch", ylabel="target word (most frequent at the bottom)")
    fig.colorbar(mesh, ax=ax, label=r"$\chi$")
    return fig


@recipe(study=STUDY, id="ch6_fig3", reproduces=f"{CH6}, Fig. 3", needs=("rho_target",),
        title="Correlation of sparsity with target-word frequency")
def frequency_correlation(ds: xr.Dataset) -> Figure:
    rho = ds["rho_target"].sel(network=_lms(ds)[0], word_class_split="all")
    fig = new_figure(10, 4)
    axes = fig.subplots(1, rho.sizes["quantity"], sharey=True)
    for ax, q in zip(np.atleast_1d(axes), rho["quantity"].values, strict=True):
        for layer in rho["layer"].values:
            _by_epoch(ax, rho.sel(quantity=q, layer=layer), str(layer))
        _rescales(ax, ds, _lms(ds)[0])
        ax.set(xlabel="training step" if _suite(ds) else "epoch", ylabel=r"$\rho_\leftarrow$", title=str(q))
        ax.legend(fontsize="small")
    if not _finite(rho):
        raise NotDrawable("no frequency correlation has been computed yet")
    return fig


@recipe(study=STUDY, id="ch6_fig4", reproduces=f"{CH6}, Fig. 4", needs=("rho_target",),
        title="rho<- of the gradient into h^2 over open and closed classes")
def open_closed(ds: xr.Dataset) -> Figure:
    rho = _sparse(ds, "rho_target")
    if not _finite(rho):
        raise NotDrawable("no frequency correlation has been computed yet")
    fig = new_figure()
    ax = fig.subplots()
    for split in rho["word_class_split"].values:
        _by_epoch(ax, rho.sel(word_class_split=split), str(split))
    _rescales(ax, ds, _lms(ds)[0])
    ax.set(xlabel="training step" if _suite(ds) else "epoch", ylabel=r"$\rho_\leftarrow(\bar h^2)$")
    ax.legend(fontsize="small")
    return fig


@recipe(study=STUDY, id="ch6_fig5", reproduces=f"{CH6}, Fig. 5", needs=("word_chi", "word_class"),
        title="Sparsity of the gradient into h^2 against word frequency, after training")
def sparsity_by_frequency(ds: xr.Dataset) -> Figure:
    chi = _sparse(ds, "word_chi")
    done = [c for c in chi["checkpoint"].values if _finite(chi.sel(checkpoint=c))]
    if not done:
        raise NotDrawable("no word sparsity has been computed yet")
    chi = chi.sel(checkpoint=done[-1])
    classes = ds["word_class"].sel(vocab=chi["word_id"].values).values
    fig = new_figure()
    ax = fig.subplots()
    for cls in sorted(set(classes) - {""}) or [""]:
        pick = classes == cls
        ax.scatter(chi["word_count"].values[pick], chi.values[pick], s=12, label=cls or "words")
    ax.set(xscale="log", xlabel="training frequency", ylabel=r"$\chi(\bar h^2)$",
           title=f"epoch {float(chi['epoch']):.3g}")
    ax.legend(fontsize="small")
    return fig


# --------------------------------------------------------------------------- Ch. 5: interdependence

CH5 = "Saphra 2021, Ch. 5"


def _scaffold_groups(ds: xr.Dataset) -> list[tuple[str, int, bool, list[str]]]:
    """(label, k, familiar, networks) per scaffold length and setting; seeds are averaged."""
    if "scaffold_length" not in ds.coords or "familiar_scaffold" not in ds.coords:
        raise NotDrawable("the store's networks were not trained on scaffold corpora (source = \"scaffold:\")")
    groups: dict[tuple[int, bool], list[str]] = {}
    for net, k, fam in zip(ds["network"].values, ds["scaffold_length"].values, ds["familiar_scaffold"].values,
                           strict=True):
        groups.setdefault((int(k), bool(fam)), []).append(str(net))
    return [(f"k={k} {'familiar' if fam else 'unfamiliar'}", k, fam, nets)
            for (k, fam), nets in sorted(groups.items())]


def scaffold_mean(da: xr.DataArray, networks: list[str]) -> xr.DataArray:
    """The mean over the networks (seeds) of one scaffold length and setting, per checkpoint."""
    return da.sel(network=networks).mean("network", skipna=False)


def _scaffold_curves(ds: xr.Dataset, da: xr.DataArray, ax: Axes, ylabel: str) -> int:
    """One line per (k, setting): colour by k, solid unfamiliar, dashed familiar (as in the paper)."""
    groups = _scaffold_groups(ds)
    lengths = sorted({k for _, k, _, _ in groups})
    colours = {k: f"C{i}" for i, k in enumerate(lengths)}
    drawn = 0
    for label, k, fam, nets in groups:
        line = scaffold_mean(da, nets)
        if _finite(line):
            _mean_with_band(ax, line["epoch"].values, line.values, scaffold_se(da, nets), len(nets), label,
                            marker=".", color=colours[k], linestyle="--" if fam else "-")
            drawn += 1
    ax.set(xlabel="epoch", ylabel=ylabel)
    mean_legend(ax, "seeds", band="se", fontsize="x-small")
    return drawn


def scaffold_se(da: xr.DataArray, networks: list[str]) -> np.ndarray:
    """The standard error over the seeds of :func:`scaffold_mean` (NaN with one seed)."""
    return standard_error(da.sel(network=networks).transpose("network", ...).values, axis=0)


def _mean_with_band(ax: Axes, x, mean, se, n: int, label: str, **style) -> None:
    """A mean line labelled with its n, and its +-1 s.e. band where there is one."""
    line = ax.plot(x, mean, label=f"{label} (n={n})", **style)[0]
    if np.isfinite(se).any():
        ax.fill_between(x, mean - se, mean + se, color=line.get_color(), alpha=0.2, linewidth=0)


@recipe(study=STUDY, id="ch5_fig7", reproduces=f"{CH5}, Fig. 7", needs=("rule_target_probability",),
        title="Marginal probability of the close symbol: in-domain (left) and random (right) scaffolds")
def rule_probability(ds: xr.Dataset) -> Figure:
    p = ds["rule_target_probability"]
    fig = new_figure(10, 4)
    axes = fig.subplots(1, 2, sharey=True)
    drawn = sum(_scaffold_curves(ds, p.sel(test_domain=d), ax, "P(omega)") for ax, d in
                zip(axes, ("in_domain", "out_domain"), strict=True))
    for ax, d in zip(axes, ("in-domain scaffolds", "random scaffolds"), strict=True):
        ax.set_title(d)
    if not drawn:
        raise NotDrawable("no rule probability has been computed yet")
    return fig


@recipe(study=STUDY, id="ch5_fig8", reproduces=f"{CH5}, Fig. 8", needs=("rule_cd_probability",),
        title="Probability of omega from alpha alone (CD, alpha in focus), random scaffolds")
def rule_cd_probability(ds: xr.Dataset) -> Figure:
    p = ds["rule_cd_probability"]
    if "alpha" not in p["cd_focus"].values:
        raise NotDrawable("rule_cd_probability was computed without alpha in focus (focus = [\"alpha\", ...])")
    fig = new_figure()
    if not _scaffold_curves(ds, p.sel(test_domain="out_domain", cd_focus="alpha"), fig.subplots(),
                            "P(omega | alpha) by CD"):
        raise NotDrawable("no CD probability has been computed yet")
    return fig


@recipe(study=STUDY, id="ch5_fig9", reproduces=f"{CH5}, Fig. 9", needs=("rule_cd_prefix_probability",),
        title="P(omega | alpha q_1 .. q_i) by CD as the scaffold prefix grows (last measured checkpoint, "
              "largest k): in-domain (left) and random (right) scaffolds")
def rule_cd_prefix(ds: xr.Dataset) -> Figure:
    """The paper draws k = 8 (its largest); solid unfamiliar, dashed familiar, seeds averaged."""
    groups = _scaffold_groups(ds)
    k = max(g[1] for g in groups)
    fig, axes, drawn = _domain_panels(ds, ds["rule_cd_prefix_probability"], "prefix_length",
                                      [g for g in groups if g[1] == k], lambda _k: "C0")
    for ax in axes:
        ax.set(xlabel="i (scaffold words after alpha in focus)")
    axes[0].set_ylabel("P(omega | alpha q_1..q_i) by CD")
    if not drawn:
        raise NotDrawable(f"no prefix CD probability has been computed yet for k = {k}")
    return fig


def _domain_panels(ds: xr.Dataset, var: xr.DataArray, dim: str, groups: list, colour) -> tuple[Figure, list, int]:
    """Two panels sharing y, in-domain (left) and random (right) scaffolds: each group's ``var`` over
    ``dim`` at its last measured checkpoint (:func:`_at_last_checkpoint`, ``colour(k)``); the number drawn."""
    fig = new_figure(10, 4)
    axes = fig.subplots(1, 2, sharey=True)
    drawn = 0
    for ax, domain, title in zip(axes, ("in_domain", "out_domain"), ("in-domain scaffolds", "random scaffolds"),
                                 strict=True):
        for label, k, fam, nets in groups:
            drawn += _at_last_checkpoint(ax, ds, var.sel(test_domain=domain), dim, k, label, fam, nets, colour(k))
        ax.set(title=title)
        mean_legend(ax, "seeds", band="se", fontsize="x-small")
    return fig, axes, drawn


def _at_last_checkpoint(ax, ds: xr.Dataset, var: xr.DataArray, dim: str, k: int, label: str, familiar: bool,
                        nets: list[int], colour: str) -> bool:
    """``var`` over ``dim`` = 0 .. k at its group's last measured checkpoint, seeds averaged with a
    band (dashed: familiar scaffolds); False when nothing is measured yet."""
    mean = scaffold_mean(var, nets)
    c = last_measured(mean)
    if c is None:
        return False
    line = mean.sel(checkpoint=c, **{dim: slice(0, k)})
    se = scaffold_se(var.sel(checkpoint=c, **{dim: slice(0, k)}), nets)
    _mean_with_band(ax, line[dim].values, line.values, se, len(nets), f"{label}, epoch {float(ds['epoch'].values[c]):.3g}",
                    marker="o", color=colour, linestyle="--" if familiar else "-")
    return True


@recipe(study=STUDY, id="ch5_fig10", reproduces=f"{CH5}, Fig. 10", needs=("rule_di",),
        title="DI(alpha, scaffold) on the in-domain test set")
def rule_di(ds: xr.Dataset) -> Figure:
    fig = new_figure()
    if not _scaffold_curves(ds, ds["rule_di"].sel(test_domain="in_domain"), fig.subplots(), "DI(alpha, scaffold)"):
        raise NotDrawable("no DI(alpha, scaffold) has been computed yet")
    return fig


@recipe(study=STUDY, id="ch5_fig12", reproduces=f"{CH5}, Fig. 12", needs=("rule_gradient_norm",),
        title="Mean error-gradient magnitude at omega by distance d from alpha (last measured checkpoint): "
              "in-domain (left) and random (right) scaffolds")
def rule_gradient(ds: xr.Dataset) -> Figure:
    """||d e_omega / d h_{alpha+d}|| against d = 0 .. k, one line per (k, setting): solid unfamiliar
    (unpredictable) scaffolds, dashed familiar (predictable), as in App. C; seeds averaged."""
    groups = _scaffold_groups(ds)
    lengths = sorted({k for _, k, _, _ in groups})
    colours = {k: f"C{i}" for i, k in enumerate(lengths)}
    fig, axes, drawn = _domain_panels(ds, ds["rule_gradient_norm"], "gradient_distance", groups, colours.get)
    for ax in axes:
        ax.set(xlabel="d (steps after alpha)", yscale="log", xticks=range(max(lengths) + 1))
    axes[0].set_ylabel("||d e_omega / d h_(alpha+d)||")
    if not drawn:
        raise NotDrawable("no gradient magnitude has been computed yet")
    return fig


#: The scaffold generator's key that Fig. 11 sweeps (n, the rule's occurrences in training).
RULES = "rules"


@recipe(study=STUDY, id="ch5_fig11", reproduces=f"{CH5}, Fig. 11", needs=("rule_cd_probability",), sweeps=True,
        title="P(omega) by CD from alpha (top) and from the scaffold (bottom) against the rule's occurrences n "
              "(last measured checkpoint): in-domain (left) and random (right) scaffolds")
def rule_cd_by_rules(ds: xr.Dataset) -> Figure:
    """App. B: the CD probability of omega against n, from a sweep over ``[corpus.scaffold] rules``;
    one line per (k, setting), colour by k, dashed familiar, seeds averaged, each point at its run's
    last measured checkpoint (the thesis: 40 epochs)."""
    if RULES not in ds.attrs.get("sweep_dims", []):
        raise NotDrawable("Fig. 11 compares runs with different numbers of rules: sweep them "
                          "([sweep.corpus.scaffold] rules = [...], as specs/scaffold_rules.toml does)")
    p = ds["rule_cd_probability"]
    focus = [f for f in ("alpha", "scaffold") if f in p["cd_focus"].values]
    if not focus:
        raise NotDrawable("rule_cd_probability was computed without alpha or the scaffold in focus")
    groups = _scaffold_groups(ds)
    colours = {k: f"C{i}" for i, k in enumerate(sorted({k for _, k, _, _ in groups}))}
    ns = [int(n) for n in ds[RULES].values]
    fig = new_figure(10, 3.6 * len(focus))
    axes = np.atleast_2d(fig.subplots(len(focus), 2, sharex=True, sharey=True, squeeze=False))
    drawn = 0
    for row, f in zip(axes, focus, strict=True):
        for ax, domain, title in zip(row, ("in_domain", "out_domain"), ("in-domain scaffolds", "random scaffolds"),
                                     strict=True):
            for label, k, fam, nets in groups:
                ys, ses = [], []
                for n in ns:
                    da = p.sel({RULES: n, "test_domain": domain, "cd_focus": f})
                    c = last_measured(scaffold_mean(da, nets))
                    ys.append(np.nan if c is None else float(scaffold_mean(da, nets).sel(checkpoint=c)))
                    ses.append(np.nan if c is None else float(scaffold_se(da.sel(checkpoint=c), nets)))
                if np.isfinite(ys).any():
                    _mean_with_band(ax, ns, np.asarray(ys), np.asarray(ses), len(nets), label, marker="o",
                                    color=colours[k], linestyle="--" if fam else "-")
                    drawn += 1
            ax.set(xscale="log", title=f"{title}, {f} in focus")
            ax.set_xticks(ns, [str(n) for n in ns], minor=False)
            ax.xaxis.set_minor_locator(NullLocator())
            mean_legend(ax, "seeds", band="se", fontsize="x-small")
        row[0].set_ylabel(f"P(omega | {f}) by CD")
    for ax in axes[-1]:
        ax.set_xlabel("n (occurrences of the rule in training)")
    if not drawn:
        raise NotDrawable("no CD probability has been computed yet")
    return fig


def last_measured(da: xr.DataArray) -> int | None:
    """The last checkpoint with a finite value in ``da`` (dims network-free), or None."""
    done = [c for c in da["checkpoint"].values if _finite(da.sel(checkpoint=c))]
    return int(done[-1]) if done else None


def enough(mean: xr.DataArray, count: xr.DataArray) -> xr.DataArray:
    """The mean where at least ``min_cases`` pairs were averaged (paper: 100), else NaN."""
    return mean.where(count >= int(mean.attrs.get("min_cases", 100)))


@recipe(study=STUDY, id="ch5_fig3", reproduces=f"{CH5}, Fig. 3", needs=("di_sequential", "di_sequential_count"),
        title="Mean DI of word pairs by sequential distance (last measured checkpoint)")
def di_by_distance(ds: xr.Dataset) -> Figure:
    fig = new_figure()
    ax = fig.subplots()
    drawn = 0
    counts = []
    for net in _lms(ds):
        da = ds["di_sequential"].sel(network=net)
        c = last_measured(da)
        if c is None:
            continue
        count = ds["di_sequential_count"].sel(network=net, checkpoint=c)
        line = enough(da.sel(checkpoint=c), count)
        counts.append(count.where(np.isfinite(line)))
        if _finite(line):
            ax.plot(line["seq_distance"].values, line.values, marker="o",
                    label=f"{net}, epoch {float(ds['epoch'].values[c]):.3g}")
            drawn += 1
    if not drawn:
        raise NotDrawable("no word pair has enough cases yet (min_cases) at any sequential distance")
    ax.set(xlabel="sequential distance r - l", ylabel="mean DI")
    ax.legend(fontsize="small")
    stat_note(ax, f"each point: the mean over its word pairs, {pair_counts(xr.concat(counts, 'network'))} "
                  "(no band: the store keeps means and counts)")
    return fig


@recipe(study=STUDY, id="ch5_fig4", reproduces=f"{CH5}, Fig. 4", needs=("di_syntactic", "di_syntactic_count"),
        title="Mean DI by syntactic distance, per sequential distance and open/closed class")
def di_by_syntax(ds: xr.Dataset) -> Figure:
    net = next((n for n in _lms(ds) if _finite(ds["di_syntactic"].sel(network=n))), None)
    if net is None:
        raise NotDrawable("no syntactic DI has been computed yet")
    da = ds["di_syntactic"].sel(network=net)
    c = last_measured(da)
    count = ds["di_syntactic_count"].sel(network=net, checkpoint=c)
    mean = enough(da.sel(checkpoint=c), count)
    panels = [d for d in mean["seq_distance"].values if _finite(mean.sel(seq_distance=d))]
    if not panels:
        raise NotDrawable("no (sequential, syntactic) distance has enough cases (min_cases) to plot a mean")
    fig = new_figure(3.2 * len(panels), 3.2)
    axes = np.atleast_1d(fig.subplots(1, len(panels), sharex=True))
    for ax, d in zip(axes, panels, strict=True):
        for pair in mean["pos_pair"].values:
            line = mean.sel(seq_distance=d, pos_pair=pair)
            if _finite(line):
                ax.plot(line["syn_distance"].values, line.values, marker="o", label=str(pair))
        ax.set(xlabel="syntactic distance", title=f"sequential distance {int(d)}")
        ax.legend(fontsize="x-small")
    axes[0].set_ylabel(f"mean DI ({net}, epoch {float(ds['epoch'].values[c]):.3g})")
    stat_note(axes[0], f"each point: the mean over its word pairs, {pair_counts(count.where(np.isfinite(mean)))} "
                       "(no band: the store keeps means and counts)")
    return fig
