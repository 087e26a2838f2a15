"""Small plotting helpers the figure recipes share (matplotlib's object interface, no pyplot state)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import numpy as np
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from runner.core.layout import counted

#: Points drawn per line at most: a 1e6-step run is thinned before it is plotted or bootstrapped.
MAX_POINTS = 2000


def new_figure(width: float = 6.4, height: float = 4.0) -> Figure:
    return Figure(figsize=(width, height), layout="constrained")


def models(ds: xr.Dataset) -> list[str]:
    """The models of a store, in the order of their networks."""
    if "model" not in ds.coords:
        return [str(n) for n in ds["network"].values]
    return list(dict.fromkeys(str(m) for m in ds["model"].values))


def of_model(da: xr.DataArray, model: str) -> xr.DataArray:
    """``da``'s networks that belong to ``model`` (its replicates)."""
    if "model" not in da.coords:
        return da.sel(network=[model])
    return da.isel(network=np.flatnonzero(da["model"].values == model))


def flag_code(da: xr.DataArray, meaning: str) -> int | None:
    """The code of ``meaning`` in a CF flag variable (None when it has no such flag)."""
    meanings = str(da.attrs.get("flag_meanings", "")).split()
    return list(da.attrs["flag_values"])[meanings.index(meaning)] if meaning in meanings else None


def not_applicable(ds: xr.Dataset, flag: str) -> list[str]:
    """The models whose every value of the outcome variable ``flag`` is ``not_applicable`` (a
    measure that does not apply to them: figures leave them out and say so)."""
    if flag not in ds:
        return []
    code = flag_code(ds[flag], "not_applicable")
    return [] if code is None else [m for m in models(ds) if bool((of_model(ds[flag], m) == code).all())]


def note_not_applicable(ax, names: list[str], why: str = "") -> None:
    """Say on the axes which models a figure leaves out because its measure does not apply to them."""
    if names:
        ax.text(0.01, 0.99, f"not applicable{f' ({why})' if why else ''}: {', '.join(names)}", transform=ax.transAxes,
                va="top", ha="left", fontsize="small", color="0.4", gid="not_applicable")


def first_replicate(ds: xr.Dataset) -> Iterator[tuple[str, str]]:
    """(model, network label) of each model's first network."""
    for m in models(ds):
        yield m, str(of_model(ds["network"], m).values[0])


def thin(da: xr.DataArray, dim: str, max_points: int = MAX_POINTS) -> xr.DataArray:
    """Every k-th value along ``dim`` so that at most ``max_points`` remain."""
    k = max(1, -(-da.sizes[dim] // max_points))
    return da.isel({dim: slice(None, None, k)}) if k > 1 else da


#: The bands :func:`mean_band` draws, as a figure states them.
BANDS = {"ci": "{confidence:.0%} bootstrap CI of the mean", "se": "\u00b11 s.e. of the mean"}


def band_text(band: str = "ci", confidence: float = 0.95) -> str:
    return BANDS[band].format(confidence=confidence)


def legend_if_drawn(ax: Axes, **legend) -> None:
    """A legend of what ``ax`` has labelled, none on a panel with nothing drawn (matplotlib warns)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**legend)


def mean_legend(ax: Axes, over: str, band: str = "ci", confidence: float = 0.95, **legend) -> None:
    """A legend that states the statistic of its lines: the mean over ``over`` (e.g. "replicates
    and samples"; each label carries its n, see :func:`mean_band`) and what the band is (the range
    where a line's band is over fewer than ``MIN_INTERVAL_N`` series)."""
    labels = [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]
    ranged = [label for label in labels if "band: range" in label]
    said = band_text(band, confidence)
    if ranged:
        said = f"range (n < {MIN_INTERVAL_N})" if len(ranged) == len(labels) else \
            f"{said}; range where n < {MIN_INTERVAL_N}"
    ax.legend(title=f"mean over {over}\nband: {said}", title_fontsize="x-small", **{"fontsize": "small", **legend})


def finite_series(values: np.ndarray) -> int:
    """n of a (x, series) array: the series with at least one finite value."""
    return int(np.isfinite(values).any(axis=0).sum())


#: A band over fewer series than this is drawn as their range: an interval from two or three
#: values says little, and a bootstrap over them less.
MIN_INTERVAL_N = 5


def mean_band(ax: Axes, da: xr.DataArray, over: tuple[str, ...], x: str, *, label: str, band: str = "ci",
              confidence: float = 0.95, seed: int = 0, replicates: str = "network", **style) -> int:
    """The mean of ``da`` over the dims ``over`` against ``x``, with a band: a bootstrap confidence
    interval of the mean (``band="ci"``) or +-1 standard error (``"se"``); ``style``: keywords of the
    mean's line, e.g. ``color``, ``linestyle``, ``gid``. The line's label gets `` (n=N)``: the
    series the band is over that have any finite value. Returns n. State the band with :func:`mean_legend`.

    Where ``over`` holds ``replicates`` (networks) and another dim (samples) and there are several
    replicates, each replicate's values are averaged first and the band is over the replicates: the
    samples of one network are not independent replicates of the model. A band over fewer than
    ``MIN_INTERVAL_N`` series is their range. Values that are not finite (diverged samples, collapsed
    perturbations) are left out of the mean and the band. With fewer than two finite values at a
    point, no band is drawn there.
    """
    da = thin(da, x)
    unit = "series"
    if replicates in over and len(over) > 1 and da.sizes[replicates] > 1:
        with warnings.catch_warnings(action="ignore", category=RuntimeWarning):  # a replicate with no value
            da = da.where(np.isfinite(da)).mean([d for d in over if d != replicates])
        over, unit = (replicates,), f"{replicates}s"
    da = da.stack(_draw=over).transpose(x, "_draw")
    values = da.values.astype(np.float64)
    values[~np.isfinite(values)] = np.nan
    n = finite_series(values)
    with warnings.catch_warnings(action="ignore", category=RuntimeWarning):  # points with no finite value
        mean = np.nanmean(values, axis=1)
    line = ax.plot(da[x].values, mean, label=f"{label} (n={n}{'' if unit == 'series' else ' ' + unit})", **style)[0]
    finite = np.isfinite(values).sum(axis=1)
    if values.shape[1] < 2 or not (finite >= 2).any():
        return n
    if n < MIN_INTERVAL_N:
        with warnings.catch_warnings(action="ignore", category=RuntimeWarning):
            lo, hi = np.nanmin(values, axis=1), np.nanmax(values, axis=1)
        line.set_label(line.get_label().replace(")", ", band: range)"))
    elif band == "se":
        se = standard_error(values, axis=1)
        lo, hi = mean - se, mean + se
    else:
        lo, hi = _bootstrap(values, finite, confidence, seed)
    ax.fill_between(da[x].values, lo, hi, alpha=0.25, color=line.get_color(), linewidth=0)
    return n


def standard_error(values: np.ndarray, axis: int = 0) -> np.ndarray:
    """s / sqrt(n) of the finite values along ``axis`` (s: the sample standard deviation, ddof 1);
    NaN where fewer than two values are finite."""
    values = np.where(np.isfinite(values), values, np.nan).astype(np.float64)
    finite = np.isfinite(values).sum(axis=axis)
    with warnings.catch_warnings(action="ignore", category=RuntimeWarning):
        se = np.nanstd(values, axis=axis, ddof=1) / np.sqrt(finite)
    return np.where(finite >= 2, se, np.nan)


def _bootstrap(values: np.ndarray, finite: np.ndarray, confidence: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap interval of each row's mean (rows with at least two finite values)."""
    from scipy.stats import bootstrap  # lazy: scipy

    lo, hi = np.full(len(values), np.nan), np.full(len(values), np.nan)
    rows = np.flatnonzero(finite >= 2)
    full = rows[finite[rows] == values.shape[1]]
    if full.size:  # one vectorised bootstrap for every point without missing values
        ci = bootstrap((values[full],), np.mean, axis=1, confidence_level=confidence, n_resamples=999,
                       method="percentile", rng=np.random.default_rng(seed)).confidence_interval
        lo[full], hi[full] = ci.low, ci.high
    for r in np.setdiff1d(rows, full):
        v = values[r][np.isfinite(values[r])]
        ci = bootstrap((v,), np.mean, confidence_level=confidence, n_resamples=999, method="percentile",
                       rng=np.random.default_rng(seed)).confidence_interval
        lo[r], hi[r] = ci.low, ci.high
    return lo, hi


def stat_note(ax: Axes, text: str) -> None:
    """State a figure's statistic on its axes (bottom left, small grey), e.g. the n of stored means."""
    ax.text(0.01, 0.01, text, transform=ax.transAxes, va="bottom", ha="left", fontsize="x-small", color="0.35",
            gid="statistic")


def pair_counts(count: xr.DataArray) -> str:
    """``n=a..b`` (or ``n=a``) over the positive, finite counts of ``count``."""
    c = count.values[np.isfinite(count.values) & (count.values > 0)]
    lo, hi = (int(c.min()), int(c.max())) if c.size else (0, 0)
    return f"n={lo}" if lo == hi else f"n={lo}..{hi}"


def axis_label(da: xr.DataArray) -> str:
    """``long_name [units]`` from a variable's or coordinate's CF attributes (its name without a
    long_name; no units for a pure number, ``"1"``, or where none are set); a coordinate that counts
    steps or epochs (:func:`runner.core.layout.counted`) says what it counts, ``[steps]``."""
    name = str(da.attrs.get("long_name") or da.name)
    units = counted(da.attrs) or str(da.attrs.get("units", ""))
    return f"{name} [{units}]" if units and units != "1" else name
