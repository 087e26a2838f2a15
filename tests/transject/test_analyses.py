"""Known answers of the TransJect measures' pure functions (analyses/token_geometry.py, isomap.py)."""

from __future__ import annotations

import math

import numpy as np
import torch

from analyses.isomap import isomap_2d
from analyses.token_geometry import (activation_ratios, cosine_distance, euclidean_distance, pair_distances,
                                     quantiles, sample_pairs)


def test_distances_of_known_vectors():
    a, b = np.array([3.0, 0.0]), np.array([0.0, 4.0])
    assert float(euclidean_distance(a, b)) == 5.0
    assert float(cosine_distance(a, b)) == 1.0  # orthogonal
    assert abs(float(cosine_distance(a, 2 * a))) < 1e-15  # parallel
    assert float(cosine_distance(a, -a)) == 2.0
    assert math.isnan(float(cosine_distance(a, np.zeros(2))))


def test_pair_distances_per_layer():
    h = torch.tensor([[[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]], [[0.0, 0.0], [2.0, 0.0], [0.0, 4.0]]])  # layer 1 = 2 x layer 0
    eu, cos = pair_distances(h, [[0, 1], [1, 2]])
    np.testing.assert_allclose(eu.numpy(), [[1.0, math.sqrt(5)], [2.0, 2 * math.sqrt(5)]])
    np.testing.assert_allclose(cos[:, 1].numpy(), [1.0, 1.0])  # (1,0) and (0,2) are orthogonal
    assert math.isnan(float(cos[0, 0]))  # token 0 is the zero vector


def test_bound_ratio_of_an_orthogonal_map_is_one_and_of_a_scaling_its_factor():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(20, 8, generator=g, dtype=torch.float64)
    q, _ = torch.linalg.qr(torch.randn(8, 8, generator=g, dtype=torch.float64))
    pairs = sample_pairs(20, 1000)
    assert len(pairs) == 190 and (pairs[:, 0] < pairs[:, 1]).all()
    np.testing.assert_allclose(activation_ratios(x, x @ q.T + 3.0, pairs).numpy(), 1.0, rtol=1e-12)
    np.testing.assert_allclose(activation_ratios(x, 0.5 * x, pairs).numpy(), 0.5, rtol=1e-12)
    r = activation_ratios(x, torch.tanh(x), pairs)  # tanh is 1-Lipschitz: every ratio <= 1
    assert (r <= 1 + 1e-12).all()


def test_sample_pairs_caps_and_is_seeded():
    a = sample_pairs(50, 30, torch.Generator().manual_seed(1))
    b = sample_pairs(50, 30, torch.Generator().manual_seed(1))
    assert a.shape == (30, 2) and torch.equal(a, b) and len({tuple(p) for p in a.tolist()}) == 30


def test_quantiles_skip_nonfinite():
    np.testing.assert_allclose(quantiles([1.0, 2.0, 3.0, np.nan, -np.inf], [0, 0.5, 1]), [1, 2, 3])
    assert np.isnan(quantiles([np.nan], [0.5])).all()


def test_isomap_recovers_a_line_and_a_plane():
    t = np.linspace(0, 1, 12)
    line = np.stack([t, 2 * t, -t, 0 * t], axis=1)  # a straight line in R^4: isometric to [0, sqrt(6)]
    y = isomap_2d(line, n_neighbors=3)
    assert y.shape == (12, 2)
    gaps = np.abs(np.diff(y[:, 0]))
    np.testing.assert_allclose(gaps, gaps[0], rtol=1e-6)
    np.testing.assert_allclose(abs(y[-1, 0] - y[0, 0]), math.sqrt(6), rtol=1e-6)
    grid = np.array([[i, j, 0.0] for i in range(4) for j in range(4)])
    z = isomap_2d(grid, n_neighbors=4)
    d_in = np.linalg.norm(grid[:, None] - grid[None], axis=-1)
    d_out = np.linalg.norm(z[:, None] - z[None], axis=-1)
    assert np.corrcoef(d_in.ravel(), d_out.ravel())[0, 1] > 0.95  # graph geodesics on a grid approximate the plane
    assert np.isnan(isomap_2d(np.ones((5, 3)))).all() and np.isnan(isomap_2d(np.zeros((2, 3)))).all()
