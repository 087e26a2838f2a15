"""A known-answer corpus for :func:`analyses.orbits.classify_orbits`: orbits whose class and period
are known by construction (a rotation by p/q turns, a contraction, a drift) or from the maps' theory
(the logistic map's period doublings at r = 3, 1 + sqrt 6 = 3.44949, 3.54409, 3.56441, its period-3
window from 1 + sqrt 8 = 3.82843, ...), the periodic ones also checked here by brute force on a long
run, never by the classifier. Each orbit is classified in float64 and, as the orbit measure keeps its
states, in float32. ``python -m tests.analyses.test_orbit_corpus`` prints the confusion matrix (true
class x reported class) and the period errors."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from analyses.orbits import ORBIT_CLASSES, classify_orbits

W = 400  # states classified, unless a case says otherwise


@dataclass(frozen=True)
class Case:
    name: str
    states: np.ndarray
    """float64 ``(window, dims)``."""
    kind: str
    period: int | None = None
    dtypes: tuple[str, ...] = ("float64", "float32")


def orbit(f, x0, steps: int) -> np.ndarray:
    """x_0 .. x_steps of the map ``f``, as ``(steps + 1, dims)``."""
    x = x0 if np.isscalar(x0) else np.asarray(x0, dtype=np.float64)  # a scalar map iterates on floats (fast)
    xs = [x]
    for _ in range(steps):
        x = f(x)
        xs.append(x)
    return np.array(xs, dtype=np.float64).reshape(steps + 1, -1)


def last(f, x0, burn: int, window: int = W) -> np.ndarray:
    return orbit(f, x0, burn + window - 1)[-window:]


def logistic(r):
    return lambda x: r * x * (1 - x)


def henon(a, b=0.3):
    return lambda v: np.array([1 - a * v[0] ** 2 + v[1], b * v[0]])


def rotation(theta, rho=1.0):
    c, s = math.cos(theta), math.sin(theta)
    return lambda v: rho * np.array([c * v[0] - s * v[1], s * v[0] + c * v[1]])


def settled_period(f, x0, burn: int, max_period: int = 64, tol: float = 1e-9) -> int | None:
    """The smallest p with |x_{t+p} - x_t| < tol for 4 max_period steps after ``burn``: brute force."""
    xs = orbit(f, x0, burn + 5 * max_period)[burn:]
    for p in range(1, max_period + 1):
        if np.abs(xs[p : 4 * max_period + p] - xs[: 4 * max_period]).max() < tol:
            return p
    return None


def settle_step(f, x0, period: int, steps: int, tol: float = 1e-9) -> int:
    """The first step from which the orbit repeats with ``period`` to ``tol`` up to ``steps``."""
    xs = orbit(f, x0, steps + period)
    far = np.abs(xs[period:] - xs[:-period]).max(-1) >= tol
    return int(np.nonzero(far)[0][-1]) + 1


def noisy(states: np.ndarray, level: float, seed: int) -> np.ndarray:
    """``states`` plus Gaussian noise of standard deviation ``level`` times the orbit's RMS radius."""
    size = np.sqrt(((states - states.mean(0)) ** 2).sum(-1).mean())
    return states + level * size * np.random.default_rng(seed).standard_normal(states.shape)


def rounding_noise(point, ulps: int, dtype, seed: int) -> np.ndarray:
    """A fixed point in ``dtype`` jittered by up to ``ulps`` units in the last place: a noise orbit."""
    p = np.asarray(point, dtype=dtype)
    k = np.random.default_rng(seed).integers(-ulps, ulps + 1, (W, p.size))
    return (p + k * np.spacing(p)).astype(dtype)


#: Known periods of maps, with the burn-in after which the window starts. The logistic map's
#: bifurcation points (Feigenbaum 1978): period 2 on (3, 3.44949), 4 on (3.44949, 3.54409), 8 on
#: (3.54409, 3.56441); period 5 on (3.73817, 3.74112) and 3 on (3.82843, 3.84150). The Hénon map
#: (b = 0.3) has a stable fixed point for a < 0.3675, period 2 up to a = 0.9125, then 4, and period 7
#: at a = 1.25 (Hénon 1976's parameter 1.4 is chaotic). Just below a doubling the cycle's multiplier
#: is near -1 and the approach is slow: a short burn-in leaves the window converging onto the cycle.
MAP_PERIODS = [
    ("logistic r=2.8", logistic(2.8), 0.3, 500, 1),
    ("logistic r=3.2", logistic(3.2), 0.3, 500, 2),
    ("logistic r=3.4494 short burn-in", logistic(3.4494), 0.3, 2000, 2),
    ("logistic r=3.4494 long burn-in", logistic(3.4494), 0.3, 200_000, 2),
    ("logistic r=3.5", logistic(3.5), 0.3, 500, 4),
    ("logistic r=3.544 short burn-in", logistic(3.544), 0.3, 2000, 4),
    ("logistic r=3.544 long burn-in", logistic(3.544), 0.3, 100_000, 4),
    ("logistic r=3.56", logistic(3.56), 0.3, 2000, 8),
    ("logistic r=3.5644 short burn-in", logistic(3.5644), 0.3, 5000, 8),
    ("logistic r=3.5644 long burn-in", logistic(3.5644), 0.3, 200_000, 8),
    ("logistic r=3.74", logistic(3.74), 0.3, 5000, 5),
    ("logistic r=3.83", logistic(3.83), 0.3, 2000, 3),
    ("henon a=0.2", henon(0.2), (0.0, 0.0), 500, 1),
    ("henon a=0.5", henon(0.5), (0.0, 0.0), 1000, 2),
    ("henon a=1.0", henon(1.0), (0.0, 0.0), 2000, 4),
    ("henon a=1.25", henon(1.25), (0.0, 0.0), 5000, 7),
]
#: For the brute-force check: a burn-in long enough to settle to 1e-9 (the slow cases need more).
SETTLE = 1_000_000


def cases() -> list[Case]:
    out = []
    for name, f, x0, burn, p in MAP_PERIODS:
        out.append(Case(name, last(f, x0, burn), "fixed_point" if p == 1 else "periodic", None if p == 1 else p))
    # noisy periodic orbits: observation noise relative to the orbit's RMS radius, below periodic_tol
    bases = [("logistic r=3.5", last(logistic(3.5), 0.3, 500), 4), ("henon a=1.25", last(henon(1.25), (0, 0), 5000), 7),
             ("rotation 1/5", last(rotation(2 * math.pi / 5), (1.0, 0.0), 0), 5)]
    for i, (name, states, p) in enumerate(bases):
        for j, level in enumerate((1e-6, 1e-5, 1e-4)):
            out.append(Case(f"{name} + noise {level:g}", noisy(states, level, 10 * i + j), "periodic", p))
    # noise near the tolerance (max_t D_p about periodic_tol * s) brings multiples of the period within it too
    for seed in range(3):
        out.append(Case(f"rotation 3/11 + noise 2e-4 (seed {seed})",
                        noisy(last(rotation(6 * math.pi / 11), (1.0, 0.0), 0), 2e-4, 100 + seed), "periodic", 11))
    # rotations of the circle: p/q turns is periodic q; an irrational number of turns is quasi-periodic
    for p, q in [(1, 3), (2, 5), (3, 7), (1, 20), (5, 48), (1, 48), (7, 100)]:
        out.append(Case(f"rotation {p}/{q} turn", last(rotation(2 * math.pi * p / q), (1.0, 0.0), 0), "periodic", q))
    out.append(Case("rotation by pi/10", last(rotation(math.pi / 10), (1.0, 0.0), 0), "periodic", 20))
    # (``period``: the lag of the closest return, at most half the window: where p turns is nearest an integer)
    golden = (math.sqrt(5) - 1) / 2
    for name, turns, window in [("golden", golden, W), ("sqrt 2 - 1", math.sqrt(2) - 1, W),
                                ("1 radian", 0.5 / math.pi, W), ("golden", golden, 1024)]:
        lags = np.arange(1, window // 2 + 1)
        closest = int(lags[np.argmin(np.abs(lags * turns - np.round(lags * turns)))])
        states = last(rotation(2 * math.pi * turns), (1.0, 0.0), 0, window)
        out.append(Case(f"rotation by {name} turn, window {window}", states, "quasi_periodic", closest))
    # contractions onto a fixed point, fast and slow (geometric), and algebraic (x -> sin x: x_t ~ sqrt(3 / t))
    for rho, theta, burn in [(0.9995, 2 * math.pi / 7, 0), (0.9995, math.pi / 10, 0), (0.9995, 2 * math.pi * golden, 0),
                             (0.9995, 2 * math.pi / 7, 3000), (0.99, 1.0, 0)]:
        states = last(rotation(theta, rho), (1.0, 0.0), burn)
        out.append(Case(f"spiral rho={rho} theta={theta:.3f} burn-in {burn}", states, "fixed_point"))
    out.append(Case("sine map x -> sin x", last(np.sin, 1.0, 200), "fixed_point"))
    # a directed approach that has most of its way still to go (x_t = sqrt(3 / t) travels 0.0009 in the window
    # and has 0.024 left; 0.999^t travels 330 of its 1000): where it stops, the window cannot tell
    out.append(Case("sine map x -> sin x, burn-in 5000", last(np.sin, 1.0, 5000), "censored"))
    out.append(Case("decelerating drift x_t = sum 0.999^k", np.cumsum(0.999 ** np.arange(W))[:, None], "censored"))
    out.append(Case("decelerating drift x_t = sum 0.98^k", np.cumsum(0.98 ** np.arange(W))[:, None], "fixed_point"))
    out.append(Case("halving x -> x / 2", last(lambda x: x / 2, 1.0, 0, 200), "fixed_point"))
    out.append(Case("x -> 0.97 tanh x", last(lambda x: 0.97 * np.tanh(x), 1.0, 100), "fixed_point"))
    out.append(Case("constant", np.tile([0.5, -2.0, 3.0], (W, 1)), "fixed_point"))
    out.append(Case("rounding noise around a fixed point (float64)", rounding_noise([0.7, 0.2], 4, np.float64, 1),
                    "fixed_point", dtypes=("float64",)))
    out.append(Case("rounding noise around a fixed point (float32)", rounding_noise([0.7, 0.2], 4, np.float32, 2)
                    .astype(np.float64), "fixed_point", dtypes=("float32",)))
    # unbounded drift, finite: neither chaotic nor diverged
    out.append(Case("drift x -> x + 1", last(lambda x: x + 1, 0.0, 0), "drifting"))
    out.append(Case("drift x -> x + 1e-3", last(lambda x: x + 1e-3, 0.0, 0), "drifting"))
    out.append(Case("drift x -> 1.001 x", last(lambda x: 1.001 * x, 1.0, 0), "drifting"))
    helix = last(lambda v: np.array([*rotation(1.0)(v[:2]), v[2] + 0.01]), (1.0, 0.0, 0.0), 0)
    out.append(Case("drift with a rotation", helix, "drifting"))
    out.append(Case("spiral out rho=1.001", last(rotation(2 * math.pi / 7, 1.001), (1.0, 0.0), 0), "drifting"))
    # divergence: non-finite, or running away geometrically
    out.append(Case("x -> x^2 from 2 (inf)", orbit(lambda x: x * x, 2.0, 20), "diverged", dtypes=("float64",)))
    out.append(Case("x -> 1.5 x", last(lambda x: 1.5 * x, 1.0, 0, 200), "diverged"))
    out.append(Case("spiral out rho=1.05", last(rotation(1.0, 1.05), (1.0, 0.0), 0), "diverged"))
    # translation and scale: the tolerances are relative to the orbit's own extent
    cycle7 = last(rotation(2 * math.pi / 7), (1.0, 0.0), 0)
    out.append(Case("7-cycle of radius 1 at (1e6, 0)", cycle7 + [1e6, 0.0], "periodic", 7, dtypes=("float64",)))
    out.append(Case("7-cycle of radius 1 at (1e3, 0)", cycle7 + [1e3, 0.0], "periodic", 7))
    out.append(Case("7-cycle of radius 1e-6 at (1, 1)", 1e-6 * cycle7 + [1.0, 1.0], "periodic", 7, dtypes=("float64",)))
    period4 = last(logistic(3.5), 0.3, 500)
    out.append(Case("logistic r=3.5 scaled by 1e-8", 1e-8 * period4, "periodic", 4))
    out.append(Case("logistic r=3.5 scaled by 1e8", 1e8 * period4, "periodic", 4))
    out.append(Case("logistic r=4 at 1e6", last(logistic(4.0), 0.3, 100) + 1e6, "chaotic", dtypes=("float64",)))
    # chaos, bounded
    out.append(Case("logistic r=4", last(logistic(4.0), 0.3, 100), "chaotic"))
    out.append(Case("logistic r=3.9", last(logistic(3.9), 0.3, 100), "chaotic"))
    out.append(Case("tent map slope 1.99", last(lambda x: 1.99 * np.minimum(x, 1 - x), 0.3, 100), "chaotic"))
    out.append(Case("henon a=1.4 b=0.3", last(henon(1.4), (0.0, 0.0), 1000), "chaotic"))
    projection = np.random.default_rng(7).standard_normal((2, 16)) / 4
    out.append(Case("henon a=1.4 in 16 random dimensions", last(henon(1.4), (0.0, 0.0), 1000) @ projection, "chaotic"))
    out.append(Case("logistic r=3.83 window 1024", last(logistic(3.83), 0.3, 2000, 1024), "periodic", 3))
    # long transients: the window's first 150 states are still settling
    for name, f, x0, p in [("logistic r=3.8285", logistic(3.8285), 0.3, 3),
                           ("henon a=1.25", henon(1.25), (0.0, 0.0), 7)]:
        start = settle_step(f, x0, p, 20_000) - 150
        assert start > 0, name
        out.append(Case(f"{name} with a {150}-step transient", last(f, x0, start), "periodic", p))
    out.append(Case("too short (5 states)", last(logistic(3.2), 0.3, 500, 5), "censored"))
    return out


CASES = cases()
RUNS = [(c, dtype) for c in CASES for dtype in c.dtypes]


def classify(case: Case, dtype: str, fn=classify_orbits, names=ORBIT_CLASSES) -> tuple[str, float]:
    x = torch.from_numpy(case.states.astype(dtype)).reshape(len(case.states), 1, -1)
    got = fn(x)
    return names[int(got.kind[0])], float(got.period[0])


def report(fn=classify_orbits, names=ORBIT_CLASSES) -> tuple[Counter, list[str]]:
    """The confusion counts ``(true, reported)`` and the cases whose class or period is wrong."""
    matrix, wrong = Counter(), []
    for case, dtype in RUNS:
        kind, period = classify(case, dtype, fn, names)
        matrix[case.kind, kind] += 1
        want = float("nan") if case.period is None else float(case.period)
        if kind != case.kind or not (period == want or math.isnan(period) and math.isnan(want)):
            wrong.append(f"{case.name} ({dtype}): {kind} {period:g}, expected {case.kind} {case.period}")
    return matrix, wrong


def table(matrix: Counter) -> str:
    true = sorted({t for t, _ in matrix})
    got = sorted({g for _, g in matrix})
    rows = [f"{'true / reported':>16} " + " ".join(f"{g:>14}" for g in got)]
    rows += [f"{t:>16} " + " ".join(f"{matrix[t, g]:>14}" for g in got) for t in true]
    return "\n".join(rows)


def test_the_corpus_is_large_and_covers_every_class():
    assert len(RUNS) >= 60
    assert {c.kind for c in CASES} == set(ORBIT_CLASSES)


@pytest.mark.parametrize(("name", "f", "x0", "burn", "period"), MAP_PERIODS, ids=[m[0] for m in MAP_PERIODS])
def test_the_maps_known_periods_hold_on_a_long_run(name, f, x0, burn, period):
    # brute force, not the classifier: the orbit repeats with this period, and no shorter one
    assert settled_period(f, x0, SETTLE if "burn-in" in name else 20_000) == period


@pytest.mark.parametrize(("case", "dtype"), RUNS, ids=[f"{c.name} ({d})" for c, d in RUNS])
def test_a_known_orbit_gets_its_class_and_fundamental_period(case, dtype):
    kind, period = classify(case, dtype)
    assert kind == case.kind
    if case.period is None:
        assert math.isnan(period)
    else:
        assert period == case.period


def test_the_confusion_matrix_is_diagonal(capsys):
    matrix, wrong = report()
    with capsys.disabled():
        print(f"\n{len(RUNS)} classifications of {len(CASES)} orbits\n{table(matrix)}")
    assert not wrong, "\n".join(wrong)
    assert all(t == g for t, g in matrix)


if __name__ == "__main__":
    import importlib.util
    import sys

    fn, names = classify_orbits, ORBIT_CLASSES
    if len(sys.argv) > 1:  # another implementation of the module, e.g. a previous version
        spec = importlib.util.spec_from_file_location("other_orbits", sys.argv[1])
        module = sys.modules["other_orbits"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        fn, names = module.classify_orbits, module.ORBIT_CLASSES
    matrix, wrong = report(fn, names)
    print(f"{len(RUNS)} classifications of {len(CASES)} orbits\n{table(matrix)}\n")
    print(f"{len(wrong)} wrong:\n" + "\n".join(wrong))
