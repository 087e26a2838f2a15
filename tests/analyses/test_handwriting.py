"""Handwriting task (Inoue et al. 2021, Fig. 3C, Appendix E) on known answers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from analyses.handwriting import letter_path, nmse, nmse_grid, pen_directions


def test_letters_come_from_the_named_font_and_fall_back_to_dejavu():
    path, used = letter_path("U", "DejaVu Sans")
    assert used == "DejaVu Sans"
    assert np.ptp(path[:, 1]) == pytest.approx(1.0) and path.min() == pytest.approx(0.0)
    assert letter_path("S", "No Such Font Family")[1] == "DejaVu Sans"


def test_pen_directions_retrace_the_letter_at_equal_arc_length_steps():
    path = np.array([[0.0, 1.0], [0.0, 0.0], [1.0, 0.0], [1.0, 1.0]])  # a square "U", length 3
    v = pen_directions(path, 7)
    assert v.shape == (7, 2) and (v[0] == 0).all()
    np.testing.assert_allclose(np.cumsum(v, axis=0)[-1], path[-1] - path[0], atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(v[1:], axis=1), 0.5)  # 7 points, 6 steps of 3 / 6


def _targets(dts):
    paths = [letter_path(c, "DejaVu Sans")[0] for c in "US"]
    return {d: torch.from_numpy(np.stack([pen_directions(p, d + 1) for p in paths])) for d in dts}


def test_a_trajectory_that_encodes_the_path_linearly_writes_it():
    t0, dt, n = 3, 10, 40
    targets = _targets([dt])
    letter = torch.arange(n) % 2
    g = torch.Generator().manual_seed(0)
    a = torch.randn(2, 6, generator=g, dtype=torch.float64)
    x = torch.randn(t0 + dt + 1, n, 6, generator=g, dtype=torch.float64)
    x[t0:] = torch.einsum("ntc,ch->tnh", targets[dt][letter], a) + 0.3  # x_t = A^T d(t) + b
    train = torch.arange(n) < 30
    grid, kept = nmse_grid(x, letter, train, targets, [t0], [dt], first=0, keep=(t0, dt))
    assert grid.item() < 1e-8
    assert nmse(kept[~train], targets[dt][letter[~train]]) == pytest.approx(grid.item(), abs=1e-12)


def test_a_constant_trajectory_writes_the_mean_direction():
    """y = c for every t: least squares gives c = mean of the training targets, so
    NMSE = sum ||c - d||^2 / sum ||d||^2 over the held-out rows (Appendix E's formula)."""
    t0, dt, n = 0, 12, 20
    targets = _targets([dt])
    letter = torch.arange(n) % 2
    train = torch.arange(n) < 10
    x = torch.ones(dt + 1, n, 4, dtype=torch.float64)
    grid, _ = nmse_grid(x, letter, train, targets, [t0], [dt], first=0)
    d = targets[dt][letter].numpy()
    c = d[train.numpy()].reshape(-1, 2).mean(axis=0)
    held = d[~train.numpy()]
    assert grid.item() == pytest.approx(((held - c) ** 2).sum() / (held ** 2).sum(), rel=1e-4)
    assert grid.item() == pytest.approx(1.0, abs=0.1)  # the letters' mean direction is small
