"""What an orbit settled on, by recurrence: fixed point, periodic (with its fundamental period),
quasi-periodic, chaotic, drifting, diverged or censored.

The paper's transient-chaos length (Inoue et al. 2021, Sec. II.B) is a sign criterion on the local
Lyapunov exponent; it cannot tell a smooth oscillation, whose exponent hovers around 0, from chaos.
This module looks at the orbit itself, in its last ``W`` states x_0 .. x_{W-1}, with the close-returns
test of Lathrop & Kostelich (1989, Phys. Rev. A 40, 4028) read as lines of a recurrence plot (Marwan,
Romano, Thiel & Kurths 2007, Phys. Rep. 438, 237, Sec. 3.2: a diagonal line at lag p means the orbit
revisits, p steps later, where it was). The states classified are the last half of the window (the
first half may still be a transient); there D_p(t) = ||x_t - x_{t-p}||, and the orbit's extent is its
RMS radius s = sqrt(mean_t ||x_t - mean x||^2). Every tolerance is a fraction of s, so the classes do
not change when the orbit is translated or scaled; only "stopped" compares the orbit's extent with the
rounding of its states. In order (the first that holds):

- **censored**: fewer than 8 states, or a drift (below) slowing down as a fixed point is approached
  whose way left, were its steps to go on shrinking at their rate of the last quarter, is longer than
  the way it went in the window (x -> sin x late in its approach): the window cannot tell where it stops;
- **diverged**: a state is not finite, or the orbit runs away: it drifts (below) and its second half
  goes ``growth`` (10) times farther from x_0 than its first half did;
- **fixed point**: stopped, the last quarter's RMS radius within ``rounding`` (64) units in the last
  place of its states (their RMS norm times the machine epsilon of the input's dtype); or approached,
  the steps D_1 shrink: D_1(t) < D_1(t - g) (g about a quarter window) at 95% of the states, by more
  than ``periodic_tol`` on average, at a rate that does not die out (the mean log-shrink of the later
  half of the states is at least a quarter of the earlier half's): a contraction onto a point, geometric
  or algebraic, whatever its rate (x -> sin x, a spiral shrinking by 0.9995 a step), not onto a circle;
- **drifting**: finite, but moving away: every state of the last quarter lies farther (by a factor
  1 + ``periodic_tol``) from the first quarter's mean than any state of the first half (x -> x + 1,
  x -> 1.001 x, a slowly growing spiral): unbounded as far as the window shows (in a bounded system,
  such as a network with layer normalisation, a transient still under way);
- **periodic**, period p: the smallest lag p <= W / ``repetitions`` (4, at least: the window holds 4
  periods, the states classified 2) at which every state returns within the tolerance, max_t D_p(t) <=
  ``periodic_tol`` (1e-3) * s, or at which the orbit approaches a p-cycle (D_p shrinks as D_1 does for
  a fixed point: the slow approach below a period doubling, whose window looks like twice the period).
  Only lags at which the orbit went away in between count (some shorter lag q has max_t D_q(t) >
  2 ``recurrence`` * s: the Theiler window of recurrence analysis, Theiler 1986, Phys. Rev. A 34, 2427).
  The period is then the smallest divisor of that lag within twice the tolerance: noise of amplitude
  below ``periodic_tol`` * s / 2 cannot hide the period, and noise that brings a multiple of it within
  the tolerance does not multiply it;
- **quasi-periodic**: bounded, no period, but some lag p <= W / 2 keeps max_t D_p(t) <= ``recurrence`` * s
  (0.1, Marwan et al.'s rule of thumb): a diagonal line spans the states classified, neighbours stay
  neighbours as on a torus; ``period`` is that lag (the closest return). A cycle longer than
  W / ``repetitions`` reads as quasi-periodic;
- **chaotic**: bounded, and no lag keeps the orbit within that threshold: close returns separate, as in
  chaos (or a transient still going at the end of the run).

A random projection of high-dimensional states (as the depth measure keeps) preserves the distances
compared up to a small factor (Johnson-Lindenstrauss).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from analyses._arrays import tensor

#: Codes of :attr:`Orbits.kind`, in order (new classes are appended: a code keeps its meaning).
ORBIT_CLASSES = ("fixed_point", "periodic", "quasi_periodic", "chaotic", "diverged", "censored", "drifting")
MIN_WINDOW = 8
#: The defaults of :func:`classify_orbits`' tolerances (the orbit measure states them in its store).
PERIODIC_TOL, RECURRENCE, REPETITIONS, ROUNDING, GROWTH = 1e-3, 0.1, 4, 64, 10.0
#: The share of states whose step shrinks for a contraction, and how much its rate may die out
#: (this project's thresholds, no published source; the known-answer corpus of
#: tests/analyses/test_orbit_corpus.py is what they were chosen and checked on).
SHRINKING, RATE_KEPT = 0.95, 0.25


@dataclass
class Orbits:
    kind: Tensor
    """int8 ``(samples,)``: an index into :data:`ORBIT_CLASSES`."""
    period: Tensor
    """float64 ``(samples,)``: the period (periodic), the lag of the closest return (quasi-periodic),
    NaN otherwise."""
    closest_return: Tensor
    """float64 ``(samples,)``: min over lags of max_t D_p(t) / s (NaN where undefined): how far from
    periodic (0) the orbit is."""


def classify_orbits(x: Tensor, *, periodic_tol: float = PERIODIC_TOL, recurrence: float = RECURRENCE,
                    repetitions: int = REPETITIONS, rounding: float = ROUNDING, growth: float = GROWTH) -> Orbits:
    """Classify each sample's orbit from its last states ``x``: ``(window, samples, ...)``, in time
    order (see the module docstring for the classes and tolerances). ``rounding`` counts units in the
    last place of ``x``'s own dtype (float32 states are rounded more coarsely than float64 ones)."""
    x = tensor(x, "x", min_ndim=2)
    eps = torch.finfo(x.dtype if x.dtype.is_floating_point else torch.float64).eps
    x = x.to(torch.float64)
    x = x.reshape(*x.shape[:2], -1)
    W, S = x.shape[:2]
    kind = torch.full((S,), ORBIT_CLASSES.index("censored"), dtype=torch.int8, device=x.device)
    period = torch.full((S,), float("nan"), dtype=torch.float64, device=x.device)
    closest = period.clone()
    if W < MIN_WINDOW:
        return Orbits(kind, period, closest)
    tiny = torch.finfo(torch.float64).tiny
    half, quarter = W // 2, W // 4
    finite = torch.isfinite(x).all(-1).all(0)
    x = torch.where(finite[None, :, None], x, 0.0)
    y = x[half:]
    size = (y - y.mean(0)).square().sum(-1).mean(0).sqrt()
    # drifting: the last quarter lies outside the ball about the first quarter's mean that holds the first half
    from_start = (x - x[:quarter].mean(0)).norm(dim=-1)
    drifting = from_start[W - quarter:].amin(0) > (1 + periodic_tol) * from_start[:half].amax(0)
    away = (x - x[:1]).norm(dim=-1)
    diverged = ~finite | (drifting & (away[half:].amax(0) > growth * away[:half].amax(0)))
    tail = x[W - quarter:]
    spread, norm = (tail - tail.mean(0)).square().sum(-1).mean(0).sqrt(), tail.square().sum(-1).mean(0).sqrt()
    stopped = spread <= rounding * eps * norm
    # D_p(t) over the states classified (t >= half) and, for the lags P a period may have, g steps
    # before them (g: the multiple of p nearest below a quarter window) to see whether D_p shrinks
    P = max(1, min(W // max(repetitions, 1), quarter))
    ratio, settled = [], []
    for p in range(1, half + 1):
        g = p * max(1, quarter // p) if p <= P else 0
        d = (x[half - g :] - x[half - g - p : W - p]).norm(dim=-1)
        ratio.append(d[g:].amax(0))
        if p <= P:
            settled.append(_contracting(d, g, periodic_tol))
        if p == 1:  # the way left, were the steps to go on shrinking at their recent rate: sum_k D_1 e^{-k r}
            shrink = (d[:-g].clamp_min(tiny).log() - d[g:].clamp_min(tiny).log())[-(W - half) // 2 :].mean(0) / g
            way_left = torch.where(shrink > 0, d[-1] / torch.expm1(shrink.clamp_min(tiny)), float("inf"))
    # max_t D_p(t) / s for every lag p = 1..W/2: (lags, samples)
    ratio = torch.stack(ratio) / size.clamp_min(tiny)
    # a lag is a return only if the orbit went away in between (the Theiler window, Theiler 1986)
    went_away = torch.cat([torch.zeros_like(ratio[:1]), ratio[:-1].cummax(0).values]) > 2 * recurrence
    returns = torch.where(went_away, ratio, float("inf"))
    best, best_lag = returns.min(0)
    # exact returns, or a contraction onto a p-cycle (p = 1: a point), at lags the window holds `repetitions` times
    settled = torch.stack(settled) | (returns[:P] <= periodic_tol)
    settled[1:] &= went_away[1:P]
    found = settled.any(0)
    lag = settled.double().argmax(0) + 1.0
    # the fundamental period: the smallest divisor of that lag whose returns are within twice the tolerance
    # (noise that brings one multiple of the period within the tolerance brings the period within twice it)
    divisors = torch.arange(1, P + 1, dtype=torch.float64, device=x.device)[:, None]
    near = (torch.remainder(lag, divisors) == 0) & (returns[:P] <= 2 * periodic_tol)
    lag = torch.where(near.any(0), near.double().argmax(0) + 1.0, lag)
    code = torch.full_like(kind, ORBIT_CLASSES.index("chaotic"))
    code = torch.where(best <= recurrence, ORBIT_CLASSES.index("quasi_periodic"), code)
    code = torch.where(found, ORBIT_CLASSES.index("periodic"), code)
    code = torch.where(drifting, ORBIT_CLASSES.index("drifting"), code)
    code = torch.where(found & (lag == 1), ORBIT_CLASSES.index("fixed_point"), code)
    # a drift slowing down that would go farther than it went in the window: where it stops, the window cannot tell
    unsure = found & (lag == 1) & drifting & (way_left > (x[-1] - x[0]).norm(dim=-1))
    code = torch.where(unsure, ORBIT_CLASSES.index("censored"), code)
    code = torch.where(stopped, ORBIT_CLASSES.index("fixed_point"), code)
    code = torch.where(diverged, ORBIT_CLASSES.index("diverged"), code).to(torch.int8)
    period = torch.where(code == ORBIT_CLASSES.index("periodic"), lag, period)
    period = torch.where(code == ORBIT_CLASSES.index("quasi_periodic"), best_lag + 1.0, period)
    closest = torch.where(finite & (size > 0) & torch.isfinite(best), best, float("nan"))
    return Orbits(code, period, closest)


def _contracting(d: Tensor, g: int, floor: float) -> Tensor:
    """Whether D_p shrinks, from ``d``: D_p(t) for the states classified and the ``g`` before them.
    D_p(t) < D_p(t - g) (or both 0) at a share :data:`SHRINKING` of the states, by more than a
    fraction ``floor`` on average, and the mean log-shrink of the later half of them is at least
    :data:`RATE_KEPT` of the earlier half's (a contraction onto the p-cycle that does not die out, not
    onto a circle of nonzero steps)."""
    now, before = d[g:], d[:-g]
    shrinks = ((now < before) | (before == 0)).double().mean(0) >= SHRINKING
    tiny = torch.finfo(torch.float64).tiny
    rate = before.clamp_min(tiny).log() - now.clamp_min(tiny).log()
    n = len(rate) // 2
    return shrinks & (rate.mean(0) > -math.log1p(-floor)) & (rate[n:].mean(0) >= RATE_KEPT * rate[:n].mean(0))


__all__ = ["ORBIT_CLASSES", "Orbits", "classify_orbits"]
