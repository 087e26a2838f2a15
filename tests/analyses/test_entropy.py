"""Differential entropy estimators of analyses/entropy.py on distributions of known entropy.

Tolerances. Over many seeds the k = 3 Kozachenko-Leonenko estimate from N samples has a standard
deviation of about 1.1 / sqrt(N) (normal) and 0.8 / sqrt(N) (uniform), and a bias below 0.004 for
N >= 512. The tests average R independent estimates and allow 4 standard errors -- the standard
error measured from those R estimates themselves -- plus 0.01 for the bias; for the Gaussian
estimator the standard deviation of 0.5 ln s^2 is 1 / sqrt(2 (N - 1)).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from analyses.entropy import differential_entropy, layer_entropy, token_entropy

GAUSS = lambda sigma: 0.5 * math.log(2 * math.pi * math.e * sigma**2)  # noqa: E731


def _close_on_average(estimates: torch.Tensor, truth: float, bias: float = 0.01) -> None:
    se = estimates.std().item() / math.sqrt(estimates.numel())
    assert abs(estimates.mean().item() - truth) <= 4 * se + bias, (estimates.mean().item(), truth, se)


@pytest.mark.parametrize("sigma", [0.05, 1.0, 3.0])
def test_knn_on_normal_samples(sigma):
    g = torch.Generator().manual_seed(0)
    x = sigma * torch.randn(64, 1000, generator=g, dtype=torch.float64)
    _close_on_average(differential_entropy(x, dim=-1), GAUSS(sigma))
    one = differential_entropy(sigma * torch.randn(20000, generator=g, dtype=torch.float64)).item()
    assert abs(one - GAUSS(sigma)) < 5 * 1.1 / math.sqrt(20000) + 0.01


@pytest.mark.parametrize("a, b", [(-1.5, 0.5), (0.0, 0.1), (3.0, 10.0)])
def test_knn_on_uniform_samples(a, b):
    g = torch.Generator().manual_seed(1)
    x = a + (b - a) * torch.rand(64, 1000, generator=g, dtype=torch.float64)
    _close_on_average(differential_entropy(x, dim=-1), math.log(b - a))


def test_gaussian_estimator():
    g = torch.Generator().manual_seed(2)
    n = 5000
    x = 0.3 * torch.randn(16, n, generator=g, dtype=torch.float64)
    h = differential_entropy(x, -1, method="gaussian")
    torch.testing.assert_close(h, 0.5 * torch.log(2 * math.pi * math.e * x.var(dim=-1)))
    assert (h - GAUSS(0.3)).abs().max() < 5 / math.sqrt(2 * (n - 1))
    # an upper bound for a non-normal law of the same variance: uniform on [0, 1], variance 1/12
    u = torch.rand(20000, generator=g, dtype=torch.float64)
    assert differential_entropy(u, method="gaussian") > 0.1 > abs(differential_entropy(u).item())


def test_knn_distance_against_brute_force():
    from analyses.entropy import _knn_distance

    x = torch.randn(3, 40, dtype=torch.float64).sort(dim=-1).values  # the result is in sorted order
    for k in (1, 2, 5):
        brute = (x[:, :, None] - x[:, None, :]).abs().sort(dim=-1).values[..., k]  # index 0: the point itself
        torch.testing.assert_close(_knn_distance(x[:, torch.randperm(40)], k), brute, rtol=0, atol=0)


def test_shift_and_scale():
    x = torch.randn(5, 300, dtype=torch.float64)
    for method in ("knn", "gaussian"):
        h = differential_entropy(x, -1, method=method)
        torch.testing.assert_close(differential_entropy(-2.5 * x + 7.0, -1, method=method), h + math.log(2.5))


def test_numpy_and_torch_agree_and_dim():
    x = np.random.default_rng(0).normal(size=(4, 200, 3))
    h_np = differential_entropy(x, dim=1)
    h_t = differential_entropy(torch.from_numpy(x), dim=1)
    assert isinstance(h_np, np.ndarray) and isinstance(h_t, torch.Tensor)
    assert h_np.shape == h_t.shape == (4, 3) and h_t.dtype == torch.float64
    np.testing.assert_allclose(h_np, h_t.numpy(), rtol=0, atol=0)
    np.testing.assert_allclose(differential_entropy(x.astype(np.float32), dim=1), h_np, atol=1e-5)


def test_atoms_and_bad_arguments():
    assert differential_entropy(torch.ones(10)).item() == -math.inf
    assert differential_entropy(torch.ones(10), method="gaussian").item() == -math.inf
    with pytest.raises(ValueError):
        differential_entropy(torch.randn(3), k=3)
    with pytest.raises(ValueError):
        differential_entropy(torch.randn(10), method="histogram")
    with pytest.raises(TypeError):
        differential_entropy([1.0, 2.0, 3.0])


def test_token_and_layer_entropy():
    g = torch.Generator().manual_seed(3)
    # layer l: every token's components ~ N(0, s_l^2), so entropy^(l) = 0.5 ln(2 pi e s_l^2)
    scales = [0.1, 1.0, 2.0]
    states = [s * torch.randn(4, 6, 512, generator=g, dtype=torch.float64) for s in scales]
    mask = torch.ones(4, 6, dtype=torch.long)
    mask[0, 4:] = 0
    tok = token_entropy(states[1], mask)
    assert tok.shape == (4, 6) and tok[0, 4:].isnan().all() and not tok[mask.bool()].isnan().any()
    torch.testing.assert_close(tok[mask.bool()], differential_entropy(states[1][mask.bool()], dim=-1))
    per_layer = layer_entropy(states, mask)
    assert per_layer.shape == (3, 22)
    torch.testing.assert_close(per_layer[1], tok[mask.bool()])
    for row, s in zip(per_layer, scales):
        _close_on_average(row, GAUSS(s), bias=0.02)
    # padding excluded: changing padded states changes nothing
    states[2][0, 4:] = 1e6
    torch.testing.assert_close(layer_entropy(states, mask)[2], per_layer[2])
    # per hidden unit over tokens
    assert layer_entropy(states, mask, over="tokens").shape == (3, 512)
    # one stacked numpy array with a leading layer axis
    stacked = np.stack([s.numpy() for s in states])
    out = layer_entropy(stacked, mask.numpy(), method="gaussian")
    assert isinstance(out, np.ndarray) and out.shape == (3, 22)
    with pytest.raises(ValueError):
        layer_entropy(states, over="layers")


def test_a_2d_sample_must_say_which_dimension_holds_the_samples():
    x = torch.randn(200, 8, dtype=torch.float64)  # 200 samples of 8 units, or 8 rows of 200?
    with pytest.raises(ValueError, match=r"shape \(200, 8\): say which dimension holds the samples"):
        differential_entropy(x)
    assert differential_entropy(x, dim=0).shape == (8,) and differential_entropy(x, dim=-1).shape == (200,)
