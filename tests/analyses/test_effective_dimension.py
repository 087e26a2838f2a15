"""Effective dimension N_eff (Eq. 6)."""

import pytest
import torch

from analyses.effective_dimension import (
    cloud_statistics,
    effective_dimension,
    effective_dimension_from_statistics,
    participation_spectrum,
)


def n_eff_from_feature_covariance(x):
    """Eq. 6 literally: eigenvalues of the feature covariance, normalised."""
    cov = torch.cov(x.reshape(x.shape[0], -1).T.double())
    s = torch.linalg.eigvalsh(cov).clamp(min=0)
    s = s / s.sum()
    return 1.0 / (s * s).sum()


def test_isotropic_gaussian_cloud():
    d, n = 10, 20000
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    # Finite-sample bias: E[N_eff] ~ d / (1 + d / n).
    assert abs(float(effective_dimension(x)) - d / (1 + d / n)) < 0.1


def test_isotropic_cloud_embedded_in_many_features():
    # More features than samples (the 32 x 1024 case): Gram path.
    d, n = 8, 1000
    g = torch.Generator().manual_seed(1)
    basis, _ = torch.linalg.qr(torch.randn(1200, d, generator=g, dtype=torch.float64))
    x = torch.randn(n, d, generator=g, dtype=torch.float64) @ basis.T
    assert abs(float(effective_dimension(x.reshape(n, 12, 100))) - d / (1 + d / n)) < 0.1


def test_single_axis_is_one():
    t = torch.randn(50, 1)
    x = t * torch.tensor([0.0, 3.0, 0.0, 4.0])
    torch.testing.assert_close(effective_dimension(x), torch.tensor(1.0, dtype=torch.float64))


@pytest.mark.parametrize("k", [2, 3, 5])
def test_k_equal_variance_orthogonal_axes(k):
    # Points +-e_i (i < k), scaled: covariance has k equal eigenvalues exactly.
    eye = torch.eye(k, 7, dtype=torch.float64)
    x = torch.cat([2.5 * eye, -2.5 * eye]) + 1.0
    torch.testing.assert_close(effective_dimension(x), torch.tensor(float(k), dtype=torch.float64))


@pytest.mark.parametrize("shape", [(7, 5), (5, 12), (6, 2, 3)])
def test_matches_feature_covariance_eigendecomposition(shape):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(2)) * torch.linspace(0.5, 2.0, shape[-1])
    n_eff = effective_dimension(x)
    assert n_eff.dtype == torch.float64 and n_eff.shape == ()
    torch.testing.assert_close(n_eff, n_eff_from_feature_covariance(x))


def test_non_finite_sample_is_excluded():
    x = torch.randn(9, 6, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    bad = x.clone()
    bad[2, 1] = float("nan")
    bad[5, 0] = float("inf")
    clean = x[[0, 1, 3, 4, 6, 7, 8]]
    torch.testing.assert_close(effective_dimension(bad), effective_dimension(clean))
    torch.testing.assert_close(effective_dimension(bad), n_eff_from_feature_covariance(clean))


def test_fewer_than_two_finite_samples_is_nan():
    x = torch.full((3, 4), float("nan"))
    x[1] = 1.0
    assert torch.isnan(effective_dimension(x))
    assert torch.isnan(effective_dimension(torch.randn(1, 4)))


def test_participation_spectrum():
    # Variances 4 : 1 : 0 along orthogonal axes: normalised eigenvalues 0.8, 0.2, 0.
    x = torch.tensor([[2.0, 0, 0], [-2.0, 0, 0], [0, 1.0, 0], [0, -1.0, 0]]) @ torch.eye(3)[[1, 2, 0]]
    x = torch.cat([x, x[:2]])  # 6 samples: 4 on the first axis, 2 on the second
    s = participation_spectrum(x)
    c = torch.cov(x.T.double())
    expected = torch.linalg.eigvalsh(c).flip(0)
    torch.testing.assert_close(s, expected / expected.sum(), atol=1e-12, rtol=0)
    assert s.shape == (3,)
    torch.testing.assert_close(1.0 / (s * s).sum(), effective_dimension(x))


def test_low_precision_input():
    x = torch.randn(20, 4, 8, generator=torch.Generator().manual_seed(4))
    torch.testing.assert_close(
        effective_dimension(x.to(torch.bfloat16)),
        n_eff_from_feature_covariance(x.to(torch.bfloat16).double()),
    )


def test_no_host_sync_on_meta_device():
    assert effective_dimension(torch.empty(10, 32, 64, device="meta")).shape == ()


def _combined(parts):
    """N_eff from the summed sufficient statistics of ``parts``."""
    stats = [cloud_statistics(p) for p in parts]
    return effective_dimension_from_statistics(*(sum(s[i] for s in stats) for i in range(3)))


@pytest.mark.parametrize("sizes", [(40,), (13, 27), (5, 1, 9, 25)])
def test_shards_combine_to_the_whole_cloud(sizes):
    # sharded equals unsharded to rounding, and both equal Eq. 6 on the feature covariance
    x = torch.randn(sum(sizes), 3, 4, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    x = x * torch.linspace(0.2, 3.0, 4) + 5.0  # an offset: centring must use the whole cloud's mean
    parts = torch.split(x, list(sizes))
    torch.testing.assert_close(_combined(parts), effective_dimension(x), rtol=1e-10, atol=0)
    torch.testing.assert_close(_combined(parts), n_eff_from_feature_covariance(x), rtol=1e-10, atol=0)


@pytest.mark.parametrize("k", [2, 3])
def test_shards_of_k_equal_variance_axes(k):
    eye = torch.eye(k, 7, dtype=torch.float64)
    x = torch.cat([2.5 * eye, -2.5 * eye]) + 1.0
    torch.testing.assert_close(_combined([x[:3], x[3:]]), torch.tensor(float(k), dtype=torch.float64))


def test_shards_leave_out_non_finite_samples_and_batch_over_steps():
    x = torch.randn(2, 10, 5, generator=torch.Generator().manual_seed(5), dtype=torch.float64)  # 2 steps
    x[1, 7, 2] = float("nan")
    stats = [[cloud_statistics(x[t, lo:hi]) for t in range(2)] for lo, hi in ((0, 4), (4, 10))]
    summed = [torch.stack([stats[0][t][i] + stats[1][t][i] for t in range(2)]) for i in range(3)]
    expected = torch.stack([effective_dimension(x[0]), effective_dimension(x[1])])
    torch.testing.assert_close(effective_dimension_from_statistics(*summed), expected, rtol=1e-10, atol=0)
    one = cloud_statistics(x[0, :1])
    assert torch.isnan(effective_dimension_from_statistics(*one))
