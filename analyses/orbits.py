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
not change when the orbit is translated or scaled; only "stopped" (and the floor of the noise level)
compares the orbit's extent with the rounding of its states. In order (the first that holds):

- **censored**: fewer than 8 states, or a drift (below) slowing down as a fixed point is approached
  whose way left, were its steps to go on shrinking at their rate of the last quarter, is longer than
  the way it went in the window (x -> sin x late in its approach): the window cannot tell where it stops;
- **diverged**: a state is not finite, or the orbit runs away: it drifts (below) and its second half
  goes ``growth`` (10) times farther from x_0 than its first half did;
- **fixed point**: stopped, the last quarter's RMS radius within ``rounding`` (64) units in the last
  place of its states (their RMS norm times the machine epsilon of the input's dtype), unless the states
  repeat with a period p > 1 (below) over more than ``RESOLVED`` (4) of those units (a radius-1 cycle at
  1e6 is 8 units of float32 wide; rounding about a fixed point, a unit or two); or approached,
  the steps D_1 shrink: D_1(t) < D_1(t - g) (g about a quarter window) at 95% of the states, by more
  than ``periodic_tol`` on average, at a rate that does not die out (the mean log-shrink of the later
  half of the states is at least a quarter of the earlier half's): a contraction onto a point, geometric
  or algebraic, whatever its rate (x -> sin x, a spiral shrinking by 0.9995 a step), not onto a circle;
- **drifting**: finite, but moving away: every state of the last quarter lies farther (by a factor
  1 + ``periodic_tol``) from the first quarter's mean than any state of the first half (x -> x + 1,
  x -> 1.001 x, a slowly growing spiral): unbounded as far as the window shows (in a bounded system,
  such as a network with layer normalisation, a transient still under way);
- **periodic**, period p <= W / ``repetitions`` (4, at least: the window holds 4 periods, the states
  classified 2, so that a period's first multiple is seen), the smaller lag of two rules:

  * noise-level returns: with r_p = RMS_t D_p(t) / s, the noise level is nu = min_p r_p (at the period
    and its multiples D_p is noise-sized, at other lags orbit-sized; nu no lower than a unit in the last
    place of the states, their RMS norm times eps, relative to s). The period is the smallest lag p with
    r_p <= ``KAPPA`` (1.5) nu, when the gap is clear: r_kp <= 1.5 nu at every multiple kp <= W / 2 (noise
    does not grow with k; the miss of a quasi-periodic near-return does, r_kp ~ k r_p), r_q >= ``GAP``
    (2) nu at every other lag, and nu <= ``NOISE`` (0.25: noise of RMS norm up to ~18% of s, since
    r_p = sqrt 2 times its share of s for independent additive noise). Noise of any level below that is
    estimated, never assumed: a cycle with noise at 1e-4 or 1e-1 of its size gets its fundamental period;
  * exact returns: the smallest lag p at which every state returns within the tolerance, max_t D_p(t)
    <= ``periodic_tol`` (1e-3) * s, or at which the orbit approaches a p-cycle (D_p shrinks as D_1 does
    for a fixed point: the slow approach below a period doubling, whose window looks like twice the
    period), reduced to its smallest divisor whose returns are within twice the tolerance. (So an
    irrational rotation that returns within the tolerance reads as periodic: by pi - 3 turns a step, it
    misses by 3e-5 turns every 113 steps, 2e-4 s, periodic 113 in a window of 4 * 113 steps or more.)

  Only lags at which the orbit went away in between count (some shorter lag q has max_t D_q(t) > 2
  ``recurrence`` * s: the Theiler window of recurrence analysis, Theiler 1986, Phys. Rev. A 34, 2427).
  A cycle with a period longer than W / ``repetitions`` reads as quasi-periodic or chaotic;
- **quasi-periodic**: bounded, no period, and regular by either of two independent indicators: some lag
  p <= W / 2 keeps max_t D_p(t) <= ``recurrence`` * s (0.1, Marwan et al.'s rule of thumb: a diagonal
  line spans the states classified, neighbours stay neighbours as on a torus), or the 0-1 test for
  chaos gives K < ``CHAOS_K`` (0.5) (a torus whose closest returns in the window are a little farther
  than that); ``period`` is the lag of the closest return;
- **chaotic**: bounded, no lag keeps the orbit within the recurrence threshold (close returns separate)
  and K >= 0.5 (or K undefined): chaos, or a transient still going, or noise larger than ``NOISE``
  allows. Chaos confined to p bands each narrower than that (the logistic map at r = 3.58) is as
  close to a noisy p-cycle as these statistics can tell, and may read as one.

The 0-1 test for chaos (Gottwald & Melbourne 2004, Proc. R. Soc. A 460, 603; as implemented in
Gottwald & Melbourne 2009, SIAM J. Appl. Dyn. Syst. 8, 129, Sec. 3) takes the scalar observable phi_j,
j = 1..N, the projection of all N = W states of the window on a fixed random direction (seeded),
centred (which does what the modified test's subtraction of V_osc = (E phi)^2 (1 - cos nc) / (1 - cos c)
does): for c in (pi/5, 4 pi/5), z_c(n) = sum_{j <= n} phi_j e^{ijc} (p_c + i q_c); the mean square
displacement D_c(n) = (1/J) sum_{j=1..J} |z_c(j + n) - z_c(j)|^2 for n <= n_cut = N / 10, J = N - n_cut;
K_c the correlation of D_c(n) with n; K the median of K_c over ``CHAOS_DRAWS`` (100) values of c drawn
with a fixed seed. z_c stays bounded for a regular orbit (K near 0) and diffuses for a chaotic one (K
near 1). The test wants many states (Gottwald & Melbourne use thousands): with the 200 states classified
in a window of 400, a 2-torus's K reached 0.96 for some draws of c, with all 400 at most 0.24, hence
the whole window (its first half may hold a transient, which reads as chaos). K is NaN for fewer than
``MIN_CHAOS_STATES`` (50) states or a constant observable.

A random projection of high-dimensional states (as the depth measure keeps) preserves the distances
compared up to a small factor (Johnson-Lindenstrauss).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from analyses._arrays import tensor

if TYPE_CHECKING:
    from torch import Tensor

#: Codes of :attr:`Orbits.kind`, in order (new classes are appended: a code keeps its meaning).
ORBIT_CLASSES = ("fixed_point", "periodic", "quasi_periodic", "chaotic", "diverged", "censored", "drifting")
MIN_WINDOW = 8
#: The defaults of :func:`classify_orbits`' tolerances (the orbit measure states them in its store).
PERIODIC_TOL, RECURRENCE, REPETITIONS, ROUNDING, GROWTH = 1e-3, 0.1, 4, 64, 10.0
#: The share of states whose step shrinks for a contraction, and how much its rate may die out
#: (this project's thresholds, no published source; the known-answer corpus of
#: tests/analyses/test_orbit_corpus.py is what they were chosen and checked on).
SHRINKING, RATE_KEPT = 0.95, 0.25
#: The noise-level period (module docstring): returns within KAPPA times the noise level nu, every other lag
#: GAP times above it, nu at most NOISE (this project's thresholds, chosen and checked on the known-answer
#: corpus tests/analyses/test_orbit_noise_corpus.py; KAPPA lies between 1, noise at every multiple, and 2,
#: the doubled miss of a quasi-periodic near-return at twice its lag).
KAPPA, GAP, NOISE = 1.5, 2.0, 0.25
#: A cycle within ``rounding`` ulps (stopped) is still a cycle when wider than RESOLVED ulps: rounding about a
#: fixed point jitters by a unit or two (this project's threshold, checked on the two corpora).
RESOLVED = 4
#: The 0-1 test for chaos (Gottwald & Melbourne 2009, Sec. 3): K below CHAOS_K is regular, c drawn
#: CHAOS_DRAWS times in (pi/5, 4 pi/5) by a generator seeded with CHAOS_SEED; NaN below MIN_CHAOS_STATES.
CHAOS_K, CHAOS_DRAWS, CHAOS_SEED, MIN_CHAOS_STATES = 0.5, 100, 2004, 50


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
    chaos_01: Tensor
    """float64 ``(samples,)``: K of the 0-1 test for chaos (:func:`chaos_01`) on the window's states:
    near 0 regular, near 1 chaotic; NaN where undefined (too few states, not finite, constant)."""


def classify_orbits(x: Tensor, *, periodic_tol: float = PERIODIC_TOL, recurrence: float = RECURRENCE,
                    repetitions: int = REPETITIONS, rounding: float = ROUNDING, growth: float = GROWTH) -> Orbits:
    """Classify each sample's orbit from its last states ``x``: ``(window, samples, ...)``, in time
    order (see the module docstring for the classes and tolerances). ``rounding`` counts units in the
    last place of ``x``'s own dtype (float32 states are rounded more coarsely than float64 ones)."""
    import torch  # lazy: torch

    x = tensor(x, "x", min_ndim=2)
    eps = torch.finfo(x.dtype if x.dtype.is_floating_point else torch.float64).eps
    x = x.to(torch.float64)
    x = x.reshape(*x.shape[:2], -1)
    W, S = x.shape[:2]
    kind = torch.full((S,), ORBIT_CLASSES.index("censored"), dtype=torch.int8, device=x.device)
    period = torch.full((S,), float("nan"), dtype=torch.float64, device=x.device)
    closest = period.clone()
    if W < MIN_WINDOW:
        return Orbits(kind, period, closest, period.clone())
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
    ratio, rms, settled = [], [], []
    for p in range(1, half + 1):
        g = p * max(1, quarter // p) if p <= P else 0
        d = (x[half - g :] - x[half - g - p : W - p]).norm(dim=-1)
        ratio.append(d[g:].amax(0))
        rms.append(d[g:].square().mean(0).sqrt())
        if p <= P:
            settled.append(_contracting(d, g, periodic_tol, 2 * eps * norm))
        if p == 1:  # the way left, were the steps to go on shrinking at their recent rate: sum_k D_1 e^{-k r}
            shrink = (d[:-g].clamp_min(tiny).log() - d[g:].clamp_min(tiny).log())[-(W - half) // 2 :].mean(0) / g
            way_left = torch.where(shrink > 0, d[-1] / torch.expm1(shrink.clamp_min(tiny)), float("inf"))
    # max_t D_p(t) / s and RMS_t D_p(t) / s for every lag p = 1..W/2: (lags, samples)
    ratio = torch.stack(ratio) / size.clamp_min(tiny)
    # a lag is a return only if the orbit went away in between (the Theiler window, Theiler 1986)
    went_away = torch.cat([torch.zeros_like(ratio[:1]), ratio[:-1].cummax(0).values]) > 2 * recurrence
    returns = torch.where(went_away, ratio, float("inf"))
    best, best_lag = returns.min(0)
    lags = torch.arange(1, half + 1, dtype=torch.float64, device=x.device)[:, None]
    # noise-level returns: the smallest lag within KAPPA of the noise level, its multiples too, every other lag
    # GAP above it (the noise level no lower than a unit in the last place of the states)
    rms = torch.where(went_away, torch.stack(rms) / size.clamp_min(tiny), float("inf"))
    rounded = eps * y.square().sum(-1).mean(0).sqrt() / size.clamp_min(tiny)
    nu = rms.min(0).values.maximum(rounded)
    within = rms <= KAPPA * nu
    noisy_lag = within[:P].double().argmax(0) + 1.0
    multiple = went_away & (torch.remainder(lags, noisy_lag) == 0)
    noisy = within[:P].any(0) & (nu <= NOISE) & (within | ~multiple).all(0) & (multiple | (rms >= GAP * nu)).all(0)
    # exact returns, or a contraction onto a p-cycle (p = 1: a point), at lags the window holds `repetitions` times
    settled = torch.stack(settled) | (returns[:P] <= periodic_tol)
    settled[1:] &= went_away[1:P]
    found = settled.any(0)
    lag = settled.double().argmax(0) + 1.0
    # the fundamental period: the smallest divisor of that lag whose returns are within twice the tolerance
    # (noise that brings one multiple of the period within the tolerance brings the period within twice it)
    near = (torch.remainder(lag, lags[:P]) == 0) & (returns[:P] <= 2 * periodic_tol)
    lag = torch.where(near.any(0), near.double().argmax(0) + 1.0, lag)
    # the period: the smaller lag of the two rules (an approach to a cycle is no noise)
    lag = torch.where(noisy & (~found | (noisy_lag < lag)), noisy_lag, lag)
    found |= noisy
    k01 = chaos_01(x)
    code = torch.full_like(kind, ORBIT_CLASSES.index("chaotic"))
    code = torch.where((best <= recurrence) | (k01 < CHAOS_K), ORBIT_CLASSES.index("quasi_periodic"), code)
    code = torch.where(found, ORBIT_CLASSES.index("periodic"), code)
    code = torch.where(drifting, ORBIT_CLASSES.index("drifting"), code)
    code = torch.where(found & (lag == 1), ORBIT_CLASSES.index("fixed_point"), code)
    # a drift slowing down that would go farther than it went in the window: where it stops, the window cannot tell
    unsure = found & (lag == 1) & drifting & (way_left > (x[-1] - x[0]).norm(dim=-1))
    code = torch.where(unsure, ORBIT_CLASSES.index("censored"), code)
    # stopped within the rounding, unless the states repeat with a period over more than RESOLVED ulps
    resolved = found & (lag > 1) & (spread > RESOLVED * eps * norm)
    code = torch.where(stopped & ~resolved, ORBIT_CLASSES.index("fixed_point"), code)
    code = torch.where(diverged, ORBIT_CLASSES.index("diverged"), code).to(torch.int8)
    period = torch.where(code == ORBIT_CLASSES.index("periodic"), lag, period)
    period = torch.where(code == ORBIT_CLASSES.index("quasi_periodic"), best_lag + 1.0, period)
    closest = torch.where(finite & (size > 0) & torch.isfinite(best), best, float("nan"))
    return Orbits(code, period, closest, torch.where(finite, k01, float("nan")))


def chaos_01(x: Tensor, *, draws: int = CHAOS_DRAWS, seed: int = CHAOS_SEED) -> Tensor:
    """K of the 0-1 test for chaos (Gottwald & Melbourne 2004; 2009, Sec. 3) per sample of ``x``:
    ``(time, samples, ...)``, on its projection on a fixed random direction (module docstring): near 0
    for a regular orbit, near 1 for a chaotic one; NaN with fewer than :data:`MIN_CHAOS_STATES` states
    or a constant projection. The draws of c and the direction come from a generator seeded with
    ``seed``: the same states give the same K.

    D_c(n) is computed exactly without z_c: |z_c(j + n) - z_c(j)|^2 = sum_{|m| < n} cos(cm) sum_i phi_i
    phi_{i+|m|} over the i in the block, so D_c(n) = (B_n(0) + 2 sum_{0 < m < n} cos(cm) B_n(m)) / J with
    B_n(m) the lagged products summed over the blocks (double prefix sums): O(n_cut N) per sample, then
    O(n_cut^2) per c, instead of a sum of length N per c and n."""
    import torch  # lazy: torch

    x = tensor(x, "x", min_ndim=2).to(torch.float64)
    x = x.reshape(*x.shape[:2], -1)
    N, S, dims = x.shape
    gen = torch.Generator().manual_seed(seed)
    c = (math.pi / 5 + 3 * math.pi / 5 * torch.rand(draws, generator=gen, dtype=torch.float64)).to(x.device)
    direction = torch.randn(dims, generator=gen, dtype=torch.float64).to(x.device)
    k = torch.full((S,), float("nan"), dtype=torch.float64, device=x.device)
    if N < MIN_CHAOS_STATES:
        return k
    phi = x @ (direction / direction.norm())
    phi = phi - phi.mean(0)
    cut, J = N // 10, N - N // 10
    n = torch.arange(1, cut + 1, device=x.device)
    m = torch.arange(cut, device=x.device)
    dn = (n - (cut + 1) / 2).to(torch.float64)
    budget = 1 << 23  # elements of the largest tensor
    chunk = max(1, budget // max(cut * cut, N))
    for lo in range(0, S, chunk):
        f = phi[:, lo : lo + chunk]
        blocks = torch.zeros(cut, cut, f.shape[1], dtype=torch.float64, device=x.device)  # B_n(m): (n, m, samples)
        for lag in range(cut):
            prefix = torch.cat([f.new_zeros(1, f.shape[1]), (f[: N - lag] * f[lag:]).cumsum(0)])  # C_m(k), k <= N - m
            twice = torch.cat([f.new_zeros(1, f.shape[1]), prefix.cumsum(0)])  # sum_{l < k} C_m(l)
            a = (n - lag).clamp_min(0)
            blocks[:, lag] = twice[J + 1 + a] - twice[1 + a] - twice[J + 1] + twice[1]
        kc, step = [], max(1, budget // (cut * max(cut, f.shape[1])))
        for first in range(0, draws, step):
            # D_c(n) = sum_m w_c(n, m) B_n(m) / J, w = 1 (m = 0), 2 cos(cm) (0 < m < n), 0 (m >= n)
            w = torch.where(m == 0, 1.0, 2 * torch.cos(c[first : first + step, None] * m)) * (m < n[:, None, None])
            msd = torch.einsum("ncm,nms->cns", w, blocks) / J
            # K_c = corr(n, D_c(n))
            dev = msd - msd.mean(1, keepdim=True)
            kc.append((dn[:, None] * dev).sum(1) / (dn.square().sum().sqrt() * dev.square().sum(1).sqrt()))
        k[lo : lo + chunk] = torch.cat(kc).nanmedian(0).values
    return k


def _contracting(d: Tensor, g: int, floor: float, slack: Tensor) -> Tensor:
    """Whether D_p shrinks, from ``d``: D_p(t) for the states classified and the ``g`` before them.
    D_p(t) < D_p(t - g) + ``slack`` (the rounding of a difference of states: steps a few units in the last
    place long are rounded to a few values, which a pointwise comparison would read as not shrinking; or
    both 0) at a share :data:`SHRINKING` of the states, by more than a
    fraction ``floor`` on average, and the mean log-shrink of the later half of them is at least
    :data:`RATE_KEPT` of the earlier half's (a contraction onto the p-cycle that does not die out, not
    onto a circle of nonzero steps)."""
    import torch  # lazy: torch

    now, before = d[g:], d[:-g]
    shrinks = ((now < before + slack) | (before == 0)).double().mean(0) >= SHRINKING
    tiny = torch.finfo(torch.float64).tiny
    rate = before.clamp_min(tiny).log() - now.clamp_min(tiny).log()
    n = len(rate) // 2
    return shrinks & (rate.mean(0) > -math.log1p(-floor)) & (rate[n:].mean(0) >= RATE_KEPT * rate[:n].mean(0))


__all__ = ["ORBIT_CLASSES", "Orbits", "chaos_01", "classify_orbits"]
