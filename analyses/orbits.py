"""What an orbit settled on, by recurrence: fixed point, periodic (with its period), quasi-periodic,
chaotic, diverged or censored.

The paper's transient-chaos length (Inoue et al. 2021, Sec. II.B) is a sign criterion on the local
Lyapunov exponent; it cannot tell a smooth oscillation, whose exponent hovers around 0, from chaos.
This module looks at the orbit itself, in the last ``window`` states, with the close-returns test
of Lathrop & Kostelich (1989, Phys. Rev. A 40, 4028) read as lines of a recurrence plot (Marwan,
Romano, Thiel & Kurths 2007, Phys. Rep. 438, 237, Sec. 3.2: a diagonal line at lag p means the
orbit revisits, p steps later, where it was). With D_p(t) = ||x_t - x_{t-p}|| over the last half
of the window (t - p inside the window, p <= window / 2) and the orbit's size
s = sqrt(mean_t ||x_t - mean x||^2) over the window:

- **diverged**: a state in the window is not finite, or the largest norm grew more than ``growth``
  (10) times from the first half of the window to the second (running away, still finite);
- **fixed point**: the steps D_1 in the last quarter of the window are below ``fixed_tol`` times
  the state's RMS norm (the orbit stopped moving to within rounding), or it is converging: the
  steps shrink at 95% of the steps of the last half, and by half from the first quarter of the
  window to the last (a contracting map, whatever its rate);
- **periodic**, period p: the smallest p with max_t D_p(t) <= ``periodic_tol`` * s (every state of
  the last half recurs exactly, to rounding, p steps later). Only lags at which the orbit went away
  in between count as returns (some shorter lag q has max_t D_q(t) > 2 ``recurrence`` * s: the
  Theiler window of recurrence analysis, Theiler 1986, Phys. Rev. A 34, 2427), so that a slow
  drift, whose D_1 is small, is not read as a return;
- **quasi-periodic**: no exact period, but some lag p keeps max_t D_p(t) <= ``recurrence`` * s,
  i.e. a diagonal line of the recurrence plot at threshold ``recurrence`` * s spans the whole last
  half (10% of the attractor's size, Marwan et al.'s rule of thumb): neighbouring states stay
  neighbours, as on a torus; ``period`` is that lag (the closest return, an approximate period);
- **chaotic**: bounded, but no lag keeps the orbit within that threshold: close returns separate,
  as in chaos (or a transient still going at the end of the run);
- **censored**: the window is too short to decide (fewer than 8 states).

The thresholds are relative to the orbit's own size, so the criterion holds whatever the scale of
the states; a random projection of high-dimensional states (as the depth measure keeps) preserves
the distances it compares up to a small factor (Johnson-Lindenstrauss).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from analyses._arrays import tensor

#: Codes of :attr:`Orbits.kind`, in order.
ORBIT_CLASSES = ("fixed_point", "periodic", "quasi_periodic", "chaotic", "diverged", "censored")
MIN_WINDOW = 8


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


def classify_orbits(x: Tensor, *, max_period: int | None = None, periodic_tol: float = 1e-3,
                    recurrence: float = 0.1, fixed_tol: float = 1e-5, growth: float = 10.0) -> Orbits:
    """Classify each sample's orbit from its last states ``x``: ``(window, samples, ...)``, in time
    order. ``max_period`` defaults to half the window (longer lags cannot be seen twice)."""
    x = tensor(x, "x", min_ndim=2).to(torch.float64)
    x = x.reshape(*x.shape[:2], -1)
    W, S = x.shape[:2]
    kind = torch.full((S,), ORBIT_CLASSES.index("censored"), dtype=torch.int8, device=x.device)
    period = torch.full((S,), float("nan"), dtype=torch.float64, device=x.device)
    closest = period.clone()
    if W < MIN_WINDOW:
        return Orbits(kind, period, closest)
    half = W // 2
    P = min(max_period or half, half)
    finite = torch.isfinite(x).all(-1).all(0)
    x = torch.where(finite[None, :, None], x, 0.0)
    norms = x.norm(dim=-1)
    finite &= ~(norms[half:].amax(0) > growth * norms[:half].amax(0))  # still finite, but running away
    size = (x - x.mean(0)).square().sum(-1).mean(0).sqrt()
    steps = (x[1:] - x[:-1]).norm(dim=-1)
    q = max(1, (W - 1) // 4)
    rms_norm = norms.square().mean(0).sqrt()
    stopped = steps[-q:].amax(0) <= fixed_tol * rms_norm.clamp_min(torch.finfo(torch.float64).tiny)
    late = steps[half:]
    shrinking = (late[1:] <= late[:-1]).double().mean(0) >= 0.95
    converging = shrinking & (steps[-q:].mean(0) < 0.5 * steps[:q].mean(0))
    # max over the last half of ||x_t - x_{t-p}|| / s, for every lag p = 1..P: (P, samples)
    ratio = torch.stack([(x[W - half:] - x[W - half - p : W - p]).norm(dim=-1).amax(0) for p in range(1, P + 1)])
    ratio = ratio / size.clamp_min(torch.finfo(torch.float64).tiny)
    # a lag is a return only if the orbit went away in between (the Theiler window: tangential
    # neighbours are no recurrence, Theiler 1986): some shorter lag is farther than twice the threshold
    went_away = torch.cat([torch.zeros_like(ratio[:1]), ratio[:-1].cummax(0).values]) > 2 * recurrence
    returns = torch.where(went_away, ratio, float("inf"))
    best, best_lag = returns.min(0)
    exact = returns <= periodic_tol
    first_exact = torch.where(exact.any(0), exact.float().argmax(0), -1)
    code = torch.full_like(kind, ORBIT_CLASSES.index("chaotic"))
    code = torch.where(best <= recurrence, ORBIT_CLASSES.index("quasi_periodic"), code)
    code = torch.where(first_exact >= 0, ORBIT_CLASSES.index("periodic"), code)
    code = torch.where(stopped | converging | (size == 0), ORBIT_CLASSES.index("fixed_point"), code)
    code = torch.where(finite, code, ORBIT_CLASSES.index("diverged")).to(torch.int8)
    lag = torch.where(first_exact >= 0, first_exact + 1, best_lag + 1).to(torch.float64)
    recurrent = (code == ORBIT_CLASSES.index("periodic")) | (code == ORBIT_CLASSES.index("quasi_periodic"))
    period = torch.where(recurrent, lag, float("nan"))
    closest = torch.where(finite & (size > 0) & torch.isfinite(best), best, float("nan"))
    return Orbits(code, period, closest)


__all__ = ["ORBIT_CLASSES", "Orbits", "classify_orbits"]
