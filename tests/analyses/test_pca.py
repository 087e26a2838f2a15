"""PCA projection of a trajectory (Fig. 4C)."""

import pytest
import torch

from analyses.pca import pca_projection


def test_points_on_a_line():
    g = torch.Generator().manual_seed(0)
    u = torch.tensor([0.1, -0.3, 0.9, 0.2, -0.1, 0.2], dtype=torch.float64)
    u = u / u.norm()  # largest |coordinate| (0.9) is positive
    t = torch.randn(40, generator=g, dtype=torch.float64)
    points = (5.0 + t[:, None] * u).reshape(40, 2, 3)
    proj, ratio = pca_projection(points)
    assert proj.shape == (40, 2) and ratio.shape == (2,)
    torch.testing.assert_close(ratio, torch.tensor([1.0, 0.0], dtype=torch.float64), atol=1e-12, rtol=0)
    torch.testing.assert_close(proj[:, 0], t - t.mean())
    torch.testing.assert_close(proj[:, 1], torch.zeros(40, dtype=torch.float64), atol=1e-7, rtol=0)
    # Flipping the line's direction does not flip the projection.
    proj_neg, _ = pca_projection((5.0 - t[:, None] * u).reshape(40, 2, 3))
    torch.testing.assert_close(proj_neg[:, 0], -(t - t.mean()))


def exact_cloud(n, f, singular, seed):
    """Centred points X = U diag(s) V^T with known U (orthonormal, orthogonal to 1) and V."""
    g = torch.Generator().manual_seed(seed)
    c = len(singular)
    a = torch.cat([torch.ones(n, 1, dtype=torch.float64), torch.randn(n, c, generator=g, dtype=torch.float64)], 1)
    u = torch.linalg.qr(a)[0][:, 1:]
    v = torch.linalg.qr(torch.randn(f, c, generator=g, dtype=torch.float64))[0]
    s = torch.tensor(singular, dtype=torch.float64)
    return u * s @ v.T + 2.0, u * s, v


@pytest.mark.parametrize("n, f", [(30, 50), (50, 6)])  # Gram path, feature-covariance path
def test_known_variances_and_projection(n, f):
    singular = [3.0, 2.0, 1.0]
    x, scores, v = exact_cloud(n, f, singular, seed=n)
    proj, ratio = pca_projection(x.float(), n_components=3)
    torch.testing.assert_close(ratio, torch.tensor([9.0, 4.0, 1.0], dtype=torch.float64) / 14, atol=1e-6, rtol=0)
    # Sign convention: each axis' largest-|loading| coordinate is positive.
    sign = torch.sign(v.gather(0, v.abs().argmax(0, keepdim=True)))
    torch.testing.assert_close(proj, scores * sign, atol=1e-5, rtol=0)


def test_too_many_components():
    with pytest.raises(ValueError):
        pca_projection(torch.randn(3, 10), n_components=4)
