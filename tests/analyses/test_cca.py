"""Known answers for CCA, SVCCA, PWCCA and linear CKA."""

import math

import numpy as np
import pytest
import torch

from analyses.cca import cca, linear_cka, pwcca, svcca


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _rotation(d: int, seed: int) -> torch.Tensor:
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=_gen(seed), dtype=torch.float64))
    return q


def _anisotropic(n: int, d: int, seed: int) -> torch.Tensor:
    g = _gen(seed)
    scales = torch.logspace(0, -1.5, d, dtype=torch.float64)
    return torch.randn(n, d, generator=g, dtype=torch.float64) * scales @ _rotation(d, seed + 1)


def _all_three(x, y):
    return svcca(x, y).mean, pwcca(x, y), linear_cka(x, y)


def test_identical_views_score_one():
    x = _anisotropic(2000, 12, 0)
    for value in _all_three(x, x):
        assert value.item() == pytest.approx(1.0, abs=1e-9)
    assert torch.allclose(cca(x, x).correlations, torch.ones(12, dtype=torch.float64), atol=1e-9)


def test_rotation_translation_and_isotropic_scaling_invariance():
    x = _anisotropic(2000, 12, 1)
    rotated = x @ _rotation(12, 7)
    for value in _all_three(x, rotated):
        assert value.item() == pytest.approx(1.0, abs=1e-9)
    y = 0.5 * x[:, :8] + torch.randn(2000, 8, generator=_gen(2), dtype=torch.float64)
    base = _all_three(x, y)
    moved = _all_three(3.7 * x + 5.0, y * 0.01 - 2.0)
    for a, b in zip(base, moved):
        assert b.item() == pytest.approx(a.item(), abs=1e-10)


def test_independent_noise_is_near_zero():
    n, d = 4000, 10
    x = torch.randn(n, d, generator=_gen(3))
    y = torch.randn(n, d, generator=_gen(4))
    # Null CCA: E[sum rho_i^2] ~ d1 d2 / n, largest rho ~ sqrt(d1/n) + sqrt(d2/n).
    edge = 2 * math.sqrt(d / n)
    rho = cca(x, y).correlations
    assert rho.max().item() < 1.5 * edge
    assert svcca(x, y).mean.item() < 1.5 * math.sqrt(d / n)
    assert pwcca(x, y).item() < 1.5 * edge
    assert linear_cka(x, y).item() < 3 * d / n  # ~ sqrt(d1 d2) / n


def test_shared_signal_with_known_snr():
    n, d, sigma2 = 20000, 5, 0.5
    s = torch.randn(n, d, generator=_gen(5), dtype=torch.float64)
    x = (s + math.sqrt(sigma2) * torch.randn(n, d, generator=_gen(6), dtype=torch.float64)) @ _rotation(d, 8)
    y = (s + math.sqrt(sigma2) * torch.randn(n, d, generator=_gen(7), dtype=torch.float64)) @ _rotation(d, 9)
    rho = 1.0 / (1.0 + sigma2)
    corr = cca(x, y).correlations
    assert torch.allclose(corr, torch.full((d,), rho, dtype=torch.float64), atol=0.03)
    result = svcca(x, y)
    assert (result.x_dims, result.y_dims) == (d, d)
    assert result.mean.item() == pytest.approx(rho, abs=0.01)
    assert pwcca(x, y).item() == pytest.approx(rho, abs=0.01)
    # X^T X ~ n (1 + sigma^2) I and Y^T X ~ n I give CKA = 1 / (1 + sigma^2)^2.
    assert linear_cka(x, y).item() == pytest.approx(rho**2, abs=0.01)


def test_cca_matches_textbook_numpy():
    g = np.random.default_rng(10)
    n, d1, d2 = 300, 6, 4
    z = g.standard_normal((n, 3))
    x = z @ g.standard_normal((3, d1)) + g.standard_normal((n, d1))
    y = z @ g.standard_normal((3, d2)) + g.standard_normal((n, d2))
    xc, yc = x - x.mean(0), y - y.mean(0)
    cxx, cyy, cxy = xc.T @ xc, yc.T @ yc, xc.T @ yc
    eig = np.linalg.eigvals(np.linalg.solve(cxx, cxy) @ np.linalg.solve(cyy, cxy.T))
    expected = np.sqrt(np.sort(eig.real)[::-1][:d2])

    res = cca(torch.from_numpy(x), torch.from_numpy(y))
    np.testing.assert_allclose(res.correlations.numpy(), expected, atol=1e-10)
    # Variates: unit variance, mutually uncorrelated, paired correlation rho_i.
    u = (torch.from_numpy(x) - res.x_mean) @ res.x_weights
    v = (torch.from_numpy(y) - res.y_mean) @ res.y_weights
    eye = torch.eye(d2, dtype=torch.float64)
    assert torch.allclose(u.T @ u / (n - 1), eye, atol=1e-10)
    assert torch.allclose(v.T @ v / (n - 1), eye, atol=1e-10)
    assert torch.allclose(u.T @ v / (n - 1), torch.diag(res.correlations), atol=1e-10)


def test_rank_deficiency_is_dropped():
    x = torch.randn(500, 6, generator=_gen(11))
    y = torch.randn(500, 5, generator=_gen(12))
    y[:, 4] = y[:, 0] + y[:, 1]  # float32 dependent column
    res = cca(x, y)
    assert res.correlations.shape == (4,)
    assert res.y_weights.shape == (5, 4)
    x_dup = torch.cat([x, x[:, :2] * 2.0], dim=1)
    assert torch.allclose(cca(x_dup, x).correlations, torch.ones(6, dtype=torch.float64), atol=1e-6)
    assert svcca(x_dup, x).mean.item() == pytest.approx(1.0, abs=1e-6)


def test_svcca_is_symmetric():
    x = _anisotropic(1500, 8, 13)
    y = torch.cat([x[:, :3], torch.randn(1500, 9, generator=_gen(14), dtype=torch.float64)], dim=1)
    a, b = svcca(x, y), svcca(y, x)
    assert (a.x_dims, a.y_dims) == (b.y_dims, b.x_dims)
    assert torch.allclose(a.correlations, b.correlations, atol=1e-12)
    assert a.mean.item() == pytest.approx(b.mean.item(), abs=1e-12)
    assert linear_cka(x, y).item() == pytest.approx(linear_cka(y, x).item(), abs=1e-12)


def test_variance_truncation_keeps_known_dims():
    n = 1000
    variances = torch.tensor([50, 30, 10, 5, 3.5, 0.8, 0.4, 0.2, 0.05, 0.05], dtype=torch.float64)
    a = torch.randn(n, 10, generator=_gen(15), dtype=torch.float64)
    q, _ = torch.linalg.qr(a - a.mean(0))  # centred orthonormal columns
    x = q * variances.sqrt() @ _rotation(10, 16)  # singular values sqrt(variances)
    # Cumulative share: .50 .80 .90 .95 .985 .993 ... -> 99% needs 6 directions.
    for keep, dims in [(0.99, 6), (0.85, 3), (0.45, 1), (1.0, 10)]:
        assert svcca(x, x, keep_variance=keep).x_dims == dims


def test_degenerate_view_gives_nan():
    x = torch.ones(100, 4)
    y = torch.randn(100, 3, generator=_gen(17))
    assert cca(x, y).correlations.numel() == 0
    assert math.isnan(svcca(x, y).mean.item())
    assert math.isnan(pwcca(x, y).item())
    assert math.isnan(linear_cka(x, y).item())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu():
    x = _anisotropic(5000, 20, 18).float()
    y = x[:, :10] + torch.randn(5000, 10, generator=_gen(19))
    cpu = _all_three(x, y)
    gpu = _all_three(x.cuda(), y.cuda())
    for a, b in zip(cpu, gpu):
        assert b.device.type == "cuda"
        assert b.item() == pytest.approx(a.item(), abs=1e-8)
