"""A second known-answer corpus for :func:`analyses.orbits.classify_orbits` (issue 49): what the first
(tests/analyses/test_orbit_corpus.py) did not cover, noise. Every class and period comes by construction,
never from the classifier: a cycle of p distinct points repeated, plus Gaussian noise whose RMS norm is a
given fraction of the cycle's RMS radius (periodic, period p); a rotation by p/q turns (periodic q) or by
an irrational number of turns (quasi-periodic); a 2-torus sampled from a flow with two incommensurate
frequencies (quasi-periodic); chaotic maps (the logistic map at r = 4 and 3.9, Hénon at a = 1.4, the
tent map, the Lozi and Ikeda maps); slow contractions (fixed point), drifts (drifting), cycles far from
the origin, and x -> sin x (fixed point early in its approach, censored late, as in the first corpus).
Each orbit is classified in float64 and in float32 (the orbit measure's dtype), batched per window.
``python -m tests.analyses.test_orbit_noise_corpus [orbits.py]`` prints the confusion matrix (true class x
reported class) and the wrong periods, for this module or another implementation of it."""

from __future__ import annotations

import importlib.util
import math
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from analyses.orbits import ORBIT_CLASSES, classify_orbits

W = 400  # states classified, unless a case says otherwise
#: Noise RMS norms, as fractions of the cycle's RMS radius.
LEVELS = (1e-4, 3e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 1e-1)
#: The band in which a noisy cycle must get its fundamental period (>= 95% of the cases).
BAND = (1e-3, 1e-1)
DTYPES = ("float64", "float32")


@dataclass(frozen=True)
class Case:
    name: str
    states: np.ndarray
    """float64 ``(window, dims)``, or the dtype the orbit was computed in."""
    kind: str
    period: int | None = None
    noise: float | None = None
    """The noise level of a noisy cycle."""
    family: str = ""
    states32: np.ndarray | None = None
    """The orbit computed in float32 (None: ``states`` rounded to float32)."""

    def x(self, dtype: str) -> np.ndarray:
        return self.states32 if dtype == "float32" and self.states32 is not None else self.states.astype(dtype)


def orbit(f, x0, steps: int, dtype=np.float64) -> np.ndarray:
    """x_0 .. x_steps of the map ``f`` iterated in ``dtype``, as ``(steps + 1, dims)``."""
    x = dtype(x0) if np.isscalar(x0) else np.asarray(x0, dtype=dtype)
    xs = [x]
    for _ in range(steps):
        x = f(x)
        xs.append(x)
    return np.array(xs, dtype=dtype).reshape(steps + 1, -1)


def last(f, x0, burn: int, window: int = W, dtype=np.float64) -> np.ndarray:
    return orbit(f, x0, burn + window - 1, dtype)[-window:]


def logistic(r):
    return lambda x: r * x * (1 - x)


def henon(a, b=0.3):
    return lambda v: np.array([1 - a * v[0] ** 2 + v[1], b * v[0]])


def lozi(a=1.7, b=0.5):
    return lambda v: np.array([1 - a * abs(v[0]) + v[1], b * v[0]])


def ikeda(u=0.9):
    def f(v):
        t = 0.4 - 6 / (1 + v[0] ** 2 + v[1] ** 2)
        c, s = math.cos(t), math.sin(t)
        return np.array([1 + u * (v[0] * c - v[1] * s), u * (v[0] * s + v[1] * c)])
    return f


def rotation(theta, rho=1.0, dtype=np.float64):
    m = (rho * np.array([[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]])).astype(dtype)
    return lambda v: m @ v


def size(states: np.ndarray) -> float:
    """The RMS radius sqrt(mean_t ||x_t - mean x||^2)."""
    return float(np.sqrt(((states - states.mean(0)) ** 2).sum(-1).mean()))


def noisy(states: np.ndarray, level: float, seed: int) -> np.ndarray:
    """``states`` plus isotropic Gaussian noise whose RMS norm is ``level`` times their RMS radius."""
    sigma = level * size(states) / math.sqrt(states.shape[1])
    return states + sigma * np.random.default_rng(seed).standard_normal(states.shape)


def cycle(points: np.ndarray, window: int, phase: int = 0) -> np.ndarray:
    """The cycle through ``points`` (``(p, dims)``, distinct), ``window`` states from ``phase``."""
    return points[(phase + np.arange(window)) % len(points)]


def turns(p: int, q: int, window: int = W, radius: float = 1.0) -> np.ndarray:
    """A rotation by p/q turns, exactly: angle 2 pi (p t mod q) / q."""
    angle = 2 * math.pi * ((p * np.arange(window)) % q) / q
    return radius * np.stack([np.cos(angle), np.sin(angle)], -1)


def torus(w1: float, w2: float, window: int, embed: str, phase=(0.3, 1.1)) -> np.ndarray:
    """A 2-torus sampled from the flow theta_i(t) = w_i t + phase_i, once a step: a ring in 3-D (radii 2
    and 1) or the product of two circles in 4-D (radii 1 and 0.5)."""
    t = np.arange(window, dtype=np.float64)
    a, b = w1 * t + phase[0], w2 * t + phase[1]
    if embed == "ring":
        return np.stack([(2 + np.cos(b)) * np.cos(a), (2 + np.cos(b)) * np.sin(a), np.sin(b)], -1)
    return np.stack([np.cos(a), np.sin(a), 0.5 * np.cos(b), 0.5 * np.sin(b)], -1)


def noisy_cycles() -> list[Case]:
    """Cycles of random distinct points (periods 2-13, and long ones with a window of 4 periods or more),
    and the cycles of maps (the logistic 4-cycle, Hénon's 7-cycle, rotations), at every noise level."""
    rng = np.random.default_rng(49)
    bases = []
    for p in [*range(2, 14), 50, 137, 256, 401, 500]:
        points = rng.standard_normal((p, 3))
        bases.append((f"random {p}-cycle", points, p))
    bases.append(("logistic r=3.5 4-cycle", last(logistic(3.5), 0.3, 500, 4), 4))
    bases.append(("henon a=1.25 7-cycle", last(henon(1.25), (0.0, 0.0), 5000, 7), 7))
    bases += [(f"rotation {p}/{q}", turns(p, q, q), q) for p, q in [(1, 5), (3, 11), (1, 20), (2, 13)]]
    out = []
    for i, (name, points, p) in enumerate(bases):
        clean = cycle(points, max(W, 4 * p), phase=i)
        for j, level in enumerate(LEVELS):
            out.append(Case(f"{name} + noise {level:g}", noisy(clean, level, 1000 * i + j), "periodic", p,
                            level, "noisy cycle"))
    return out


def cases() -> list[Case]:
    out = noisy_cycles()
    # rotations: p/q turns is periodic q (exactly, and iterated in the dtype: rounding accumulates);
    # an irrational number of turns is quasi-periodic
    for p, q in [(1, 3), (2, 5), (3, 7), (1, 20), (5, 48), (7, 100), (13, 64)]:
        out.append(Case(f"rotation {p}/{q} turn", turns(p, q), "periodic", q, family="rotation"))
    for name, theta in [("pi/10", math.pi / 10), ("2 pi 3/7", 2 * math.pi * 3 / 7)]:
        run = [last(rotation(theta, dtype=d), (1.0, 0.0), 20_000, W, d) for d in (np.float64, np.float32)]
        out.append(Case(f"rotation by {name} iterated 20000 steps", run[0], "periodic", round(2 * math.pi / theta)
                        if name == "pi/10" else 7, family="rotation", states32=run[1]))
    irrational = [("golden", (math.sqrt(5) - 1) / 2), ("sqrt 2 - 1", math.sqrt(2) - 1), ("1 radian", 0.5 / math.pi),
                  ("e - 2", math.e - 2), ("sqrt 3 - 1", math.sqrt(3) - 1)]
    for window in (W, 1024):
        for name, turn in irrational:
            states = last(rotation(2 * math.pi * turn), (1.0, 0.0), 0, window)
            out.append(Case(f"rotation by {name} turn, window {window}", states, "quasi_periodic", family="rotation"))
    # 2-tori sampled from flows: two incommensurate frequencies (radians per step)
    for window in (W, 1024):
        for w1, w2 in [(1.0, math.sqrt(2)), (0.7, 0.7 * (1 + math.sqrt(5)) / 2), (2.0, math.e), (1.3, 0.3 * math.pi),
                       (2 * math.pi * (math.sqrt(5) - 1) / 2, 2 * math.pi * (math.sqrt(2) - 1))]:
            for embed in ("ring", "product"):
                out.append(Case(f"2-torus w = ({w1:.3f}, {w2:.3f}) {embed}, window {window}",
                                torus(w1, w2, window, embed), "quasi_periodic", family="torus"))
    # chaotic maps
    for window in (W, 1024):
        for x0 in (0.1, 0.3, 0.7):
            out.append(Case(f"logistic r=4 from {x0}, window {window}", last(logistic(4.0), x0, 100, window),
                            "chaotic", family="chaos"))
        for name, f, x0 in [("logistic r=3.9", logistic(3.9), 0.3), ("henon a=1.4", henon(1.4), (0.0, 0.0)),
                            ("henon a=1.4 from (0.1, 0.1)", henon(1.4), (0.1, 0.1)),
                            ("tent map slope 1.99", lambda x: 1.99 * min(x, 1 - x), 0.3),
                            ("lozi a=1.7 b=0.5", lozi(), (0.1, 0.1)), ("ikeda u=0.9", ikeda(), (0.1, 0.1))]:
            out.append(Case(f"{name}, window {window}", last(f, x0, 1000, window), "chaotic", family="chaos"))
    # slow contractions onto a fixed point, and slow drifts
    for rho, theta in [(0.999, 2 * math.pi / 7), (0.9995, math.pi / 10), (0.999, 2 * math.pi * (math.sqrt(5) - 1) / 2)]:
        out.append(Case(f"spiral rho={rho} theta={theta:.3f}", last(rotation(theta, rho), (1.0, 0.0), 0), "fixed_point",
                        family="contraction"))
    out.append(Case("x -> 0.99 x", last(lambda x: 0.99 * x, 1.0, 0), "fixed_point", family="contraction"))
    out.append(Case("x -> 0.995 tanh x", last(lambda x: 0.995 * math.tanh(x), 1.0, 100), "fixed_point",
                    family="contraction"))
    out.append(Case("drift x -> x + 1e-4", last(lambda x: x + 1e-4, 0.0, 0), "drifting", family="drift"))
    out.append(Case("drift x -> 1.0005 x", last(lambda x: 1.0005 * x, 1.0, 0), "drifting", family="drift"))
    helix = last(lambda v: np.array([*rotation(2 * math.pi / 7)(v[:2]), v[2] + 5e-3]), (1.0, 0.0, 0.0), 0)
    out.append(Case("drift 5e-3 a step with a 7-cycle of radius 1", helix, "drifting", family="drift"))
    # cycles far from the origin: the tolerances are relative to the orbit's own extent (a radius-1 cycle at
    # 1e6 is 16 units in the last place of float32 wide, and exactly periodic there too)
    seven = turns(1, 7)
    for centre in ((1e6, 0.0), (1e3, 0.0), (-5e5, 5e5)):
        out.append(Case(f"7-cycle of radius 1 at {centre}", seven + centre, "periodic", 7, family="far"))
    out.append(Case("7-cycle of radius 1e-6 at (1, 1)", 1e-6 * seven + 1.0, "periodic", 7, family="far"))
    out.append(Case("11-cycle of radius 1 at (1e6, 0) + noise 1e-2", noisy(turns(3, 11) + (1e6, 0.0), 1e-2, 7),
                    "periodic", 11, 1e-2, family="far"))
    # x -> sin x: x_t ~ sqrt(3 / t); early in its approach a fixed point, late a drift with more way left than it
    # went in the window (censored), computed in float64 and in float32
    for burn, kind in [(200, "fixed_point"), (5000, "censored"), (100_000, "censored")]:
        run = [last(np.sin, 1.0, burn, W, d) for d in (np.float64, np.float32)]
        out.append(Case(f"sine map x -> sin x, burn-in {burn}", run[0], kind, family="sine", states32=run[1]))
    return out


CASES = cases()


def classify_all(fn=classify_orbits, names=ORBIT_CLASSES) -> dict[tuple[int, str], tuple[str, float, float]]:
    """``(case index, dtype) -> (class, period, K)``: the cases batched by window shape and dtype."""
    groups = defaultdict(list)
    for i, case in enumerate(CASES):
        for dtype in DTYPES:
            groups[case.states.shape, dtype].append(i)
    out = {}
    for (_, dtype), index in groups.items():
        x = torch.from_numpy(np.stack([CASES[i].x(dtype) for i in index], 1))
        got = fn(x)
        k = getattr(got, "chaos_01", torch.full((len(index),), float("nan")))
        for j, i in enumerate(index):
            out[i, dtype] = names[int(got.kind[j])], float(got.period[j]), float(k[j])
    return out


def report(fn=classify_orbits, names=ORBIT_CLASSES):
    """The confusion counts ``(true, reported)``, the wrong classifications, and the results."""
    results = classify_all(fn, names)
    matrix, wrong = Counter(), []
    for (i, dtype), (kind, period, _) in sorted(results.items()):
        case = CASES[i]
        matrix[case.kind, kind] += 1
        right = kind == case.kind and (case.period is None or period == case.period)
        if not right:
            wrong.append(f"{case.name} ({dtype}): {kind} {period:g}, expected {case.kind} {case.period or ''}")
    return matrix, wrong, results


def table(matrix: Counter) -> str:
    true = sorted({t for t, _ in matrix})
    got = sorted({g for _, g in matrix})
    rows = [f"{'true / reported':>16} " + " ".join(f"{g:>14}" for g in got)]
    rows += [f"{t:>16} " + " ".join(f"{matrix[t, g]:>14}" for g in got) for t in true]
    return "\n".join(rows)


def band_score(results) -> tuple[int, int]:
    """(right, all) for the noisy cycles in :data:`BAND`: periodic with the fundamental period."""
    runs = [(i, d) for (i, d) in results if CASES[i].noise is not None and BAND[0] <= CASES[i].noise <= BAND[1]]
    right = sum(results[r][0] == "periodic" and results[r][1] == CASES[r[0]].period for r in runs)
    return right, len(runs)


@pytest.fixture(scope="module")
def results():
    return report()


def test_the_corpus_covers_what_broke():
    families = Counter(c.family for c in CASES)
    assert families["noisy cycle"] >= 150 and families["torus"] >= 10 and families["chaos"] >= 10
    periods = {c.period for c in CASES if c.family == "noisy cycle"}
    assert set(range(2, 14)) <= periods and max(periods) >= 500
    assert all(len(c.states) >= 4 * c.period for c in CASES if c.period)  # the window holds 4 periods


def test_noisy_cycles_get_their_fundamental_period(results):
    right, n = band_score(results[2])
    assert right >= 0.95 * n, f"{right} of {n} noisy cycles in the band {BAND} got their fundamental period"


def test_noisy_cycles_never_get_a_multiple_of_their_period(results):
    multiples = [f"{CASES[i].name} ({d}): {p:g}" for (i, d), (k, p, _) in results[2].items()
                 if CASES[i].period and k == "periodic" and p != CASES[i].period and p % CASES[i].period == 0]
    assert not multiples


def test_2_tori_and_irrational_rotations_are_never_chaotic(results):
    chaotic = [f"{CASES[i].name} ({d})" for (i, d), (k, _, _) in results[2].items()
               if CASES[i].kind == "quasi_periodic" and k == "chaotic"]
    assert not chaotic


def test_the_0_1_test_separates_regular_from_chaotic_orbits(results):
    # K (Gottwald & Melbourne 2004): near 0 for the tori and rotations, near 1 for the chaotic maps
    k = {(i, d): r[2] for (i, d), r in results[2].items()}
    regular = [k[i, d] for i, d in k if CASES[i].kind == "quasi_periodic"]
    chaotic = [k[i, d] for i, d in k if CASES[i].kind == "chaotic"]
    assert max(regular) < 0.5 < min(chaotic)


@pytest.mark.parametrize("family", ["rotation", "chaos", "contraction", "drift", "far", "sine"])
def test_every_orbit_of_a_family_gets_its_class_and_period(results, family):
    wrong = [w for w in results[1] if any(w.startswith(c.name + " (") for c in CASES if c.family == family)]
    assert not wrong, "\n".join(wrong)


def test_the_confusion_matrix(results, capsys):
    matrix, wrong, res = results
    right, n = band_score(res)
    with capsys.disabled():
        print(f"\n{len(res)} classifications of {len(CASES)} orbits\n{table(matrix)}\n"
              f"noisy cycles in the band {BAND}: {right} of {n} with the fundamental period")
    assert sum(matrix.values()) == len(CASES) * len(DTYPES)


def main(argv: list[str]) -> None:
    fn, names = classify_orbits, ORBIT_CLASSES
    if argv:  # another implementation of the module, e.g. a previous version
        spec = importlib.util.spec_from_file_location("other_orbits", argv[0])
        module = sys.modules["other_orbits"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        fn, names = module.classify_orbits, module.ORBIT_CLASSES
    matrix, wrong, results = report(fn, names)
    right, n = band_score(results)
    print(f"{len(results)} classifications of {len(CASES)} orbits\n{table(matrix)}\n")
    print(f"noisy cycles in the band {BAND}: {right} of {n} with the fundamental period")
    for lo, hi in [(0, 1e-3), BAND]:
        runs = [(i, d) for (i, d) in results if CASES[i].noise is not None and lo <= CASES[i].noise <= hi and
                (lo > 0 or CASES[i].noise < hi)]
        print(f"noise in [{lo:g}, {hi:g}]: {sum(results[r][1] == CASES[r[0]].period for r in runs)} of {len(runs)}")
    print(f"\n{len(wrong)} wrong:\n" + "\n".join(wrong))


if __name__ == "__main__":
    main(sys.argv[1:])
