"""Orbit classification by recurrence, on maps whose orbits are known."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from analyses.orbits import ORBIT_CLASSES, classify_orbits


def iterate(f, x0: float, steps: int) -> np.ndarray:
    xs = [x0]
    for _ in range(steps):
        xs.append(f(xs[-1]))
    return np.array(xs)


def logistic(r: float, steps: int = 600, x0: float = 0.3) -> torch.Tensor:
    """The last 400 states of the logistic map x -> r x (1 - x), as (window, 1 sample, 1)."""
    return torch.from_numpy(iterate(lambda x: r * x * (1 - x), x0, steps)[-400:]).reshape(-1, 1, 1)


def rotation(alpha: float, steps: int = 400) -> torch.Tensor:
    """The rotation theta -> theta + 2 pi alpha on the unit circle, embedded in the plane."""
    t = torch.arange(steps, dtype=torch.float64)
    return torch.stack([torch.cos(2 * math.pi * alpha * t), torch.sin(2 * math.pi * alpha * t)], -1)[:, None, :]


def classes(orbits) -> list[str]:
    return [ORBIT_CLASSES[int(k)] for k in orbits.kind]


@pytest.mark.parametrize(("r", "period"), [(3.2, 2), (3.5, 4), (3.56, 8)])
def test_the_logistic_maps_period_doubling_cascade(r, period):
    orbits = classify_orbits(logistic(r))
    assert classes(orbits) == ["periodic"] and orbits.period.tolist() == [period]


def test_the_logistic_map_at_r_3_9_is_chaotic():
    orbits = classify_orbits(logistic(3.9))
    assert classes(orbits) == ["chaotic"] and math.isnan(orbits.period.item())
    assert orbits.closest_return.item() > 0.1


def test_an_irrational_rotation_is_quasi_periodic_and_a_rational_one_periodic():
    golden = classify_orbits(rotation((math.sqrt(5) - 1) / 2))
    assert classes(golden) == ["quasi_periodic"]
    assert golden.period.item() == 144  # the closest return within 200 steps: a Fibonacci number
    rational = classify_orbits(rotation(1 / 48))
    assert classes(rational) == ["periodic"] and rational.period.item() == 48


def test_contracting_maps_reach_a_fixed_point():
    halving = torch.from_numpy(iterate(lambda x: x / 2, 1.0, 200)).reshape(-1, 1, 1)
    slow = torch.from_numpy(iterate(lambda x: 0.97 * math.tanh(x), 1.0, 300)[-200:]).reshape(-1, 1, 1)
    constant = torch.ones(100, 1, 1)
    assert classes(classify_orbits(torch.cat([halving[-100:], slow[-100:], constant], 1))) == ["fixed_point"] * 3


def test_diverged_and_censored():
    blowup = torch.from_numpy(iterate(lambda x: x * x, 2.0, 20)).reshape(-1, 1, 1)  # inf by step 11
    assert classes(classify_orbits(blowup)) == ["diverged"]
    running_away = torch.from_numpy(iterate(lambda x: 1.5 * x, 1.0, 300)[-200:]).reshape(-1, 1, 1)  # finite, ~1e35
    assert classes(classify_orbits(running_away)) == ["diverged"]
    assert classes(classify_orbits(logistic(3.2)[:5])) == ["censored"]


def test_samples_are_classified_each_on_its_own_and_float32_states_are_read_in_float64():
    x = torch.cat([logistic(3.2), logistic(3.9), rotation(1 / 48)[:, :, :1]], 1).float()
    orbits = classify_orbits(x)
    assert classes(orbits) == ["periodic", "chaotic", "periodic"]
    assert orbits.period[0].item() == 2 and orbits.period[2].item() == 48
    assert orbits.kind.dtype == torch.int8 and orbits.period.dtype == torch.float64
