"""Whether two depth runs of the same seeds agree on the paper's statistics (Inoue et al. 2021).

A run that changes rounding (another precision, the reduced iteration) separates from the reference
trajectory by trajectory once chaos amplifies the difference, so runs are compared on statistics
over samples, each with its 95% percentile bootstrap interval (999 resamples): the chaotic
fraction (samples whose local exponent was ever positive, Fig. 4D), the mean local Lyapunov
exponent per step (Fig. 2C), the median synchronisation offset (Fig. 2B), the mean transient-chaos
length and the censored fraction (Fig. 4D), and the final N_eff (Eq. 6; one number per network,
agreeing within 5%). Two statistics agree when their intervals overlap.
"""

from __future__ import annotations

import numpy as np

Interval = tuple[float, float, float]
"""A statistic and the bounds of its 95% bootstrap interval."""

#: One number per network (no interval): agreement is a relative difference within this.
NEFF_TOLERANCE = 0.05


def interval(values: np.ndarray, statistic=np.mean) -> Interval:
    """``statistic`` of the finite ``values`` and its 95% percentile bootstrap interval (NaN bounds with
    fewer than two values, a zero-width interval when they are all equal)."""
    from scipy.stats import bootstrap  # lazy: scipy

    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size < 2:
        value = float(statistic(values)) if values.size else float("nan")
        return value, float("nan"), float("nan")
    value = float(statistic(values))
    if np.all(values == values[0]):
        return value, value, value
    ci = bootstrap((values,), statistic, n_resamples=999, method="percentile",
                   rng=np.random.default_rng(0)).confidence_interval
    return value, float(ci.low), float(ci.high)


def statistics(ds, network: str) -> dict[str, Interval]:
    """The statistics of one network of a depth store (opened with xarray) that its measures give."""
    d = ds.sel(network=network)
    out: dict[str, Interval] = {}
    if "lyapunov_per_step" in d:
        lam = d["lyapunov_per_step"].values.astype(np.float64)
        lam[~np.isfinite(lam)] = np.nan
        out["chaotic fraction"] = interval((np.nan_to_num(lam, nan=-1.0) > 0).any(axis=1).astype(np.float64))
        with np.errstate(all="ignore"):
            out["mean lambda per step"] = interval(np.nanmean(lam, axis=1))
    if "sync_offset" in d:
        out["median sync offset"] = interval(d["sync_offset"].values, np.median)
    if "chaos_length" in d:
        out["mean chaos length"] = interval(d["chaos_length"].values)
        out["censored fraction"] = interval(d["chaos_censored"].values.astype(np.float64))
    if "effective_dimension" in d:
        last = d["effective_dimension"].values[-1]
        out["final N_eff"] = (float(last), float(last), float(last))
    return out


def agrees(name: str, a: Interval, reference: Interval) -> bool:
    if name == "final N_eff":
        return abs(a[0] - reference[0]) <= NEFF_TOLERANCE * abs(reference[0])
    if not all(np.isfinite(v) for v in (*a, *reference)):
        return a[0] == reference[0] or (np.isnan(a[0]) and np.isnan(reference[0]))
    return a[1] <= reference[2] and reference[1] <= a[2]


def differing(ds, reference, networks) -> list[str]:
    """``"<network> <statistic>"`` for each statistic of ``ds`` that does not agree with ``reference``'s."""
    out = []
    for net in networks:
        mine, theirs = statistics(ds, net), statistics(reference, net)
        out += [f"{net} {name}" for name in theirs if not agrees(name, mine[name], theirs[name])]
    return out
