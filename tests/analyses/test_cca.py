"""Known answers for CCA, SVCCA, PWCCA, linear CKA (biased and debiased) and RBF CKA."""

import math
import warnings

import numpy as np
import pytest
import torch

from analyses.cca import FewDatapointsWarning, cca, linear_cka, pwcca, rbf_cka, svcca


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


def _google_pwcca(acts1: np.ndarray, acts2: np.ndarray, flip: float | None = None) -> float:
    """google/svcca compute_pwcca (epsilon = 0, second branch reading acts2 as in its PR #9),
    written out from its algorithm: acts are (neurons, datapoints) there. ``flip`` signs the
    singular vectors (largest-magnitude entry times ``flip`` positive) instead of LAPACK."""
    d1 = acts1.shape[0]
    cov = np.cov(acts1, acts2)
    s_xx, s_xy, s_yy = cov[:d1, :d1], cov[:d1, d1:], cov[d1:, d1:]
    x_max, y_max = np.abs(s_xx).max(), np.abs(s_yy).max()
    s_xx, s_yy, s_xy = s_xx / x_max, s_yy / y_max, s_xy / np.sqrt(x_max * y_max)

    def inverse_sqrt(m):
        w, v = np.linalg.eigh(np.linalg.pinv(m))
        return v @ np.diag(np.sqrt(w)) @ v.T

    u, rho, vh = np.linalg.svd(inverse_sqrt(s_xx) @ s_xy @ inverse_sqrt(s_yy))
    coef, acts = (u.T, acts1) if acts1.shape[0] <= acts2.shape[0] else (vh, acts2)
    if flip is not None:
        rows = np.arange(len(coef))
        coef = coef * (flip * np.sign(coef[rows, np.abs(coef).argmax(axis=1)]))[:, None]
    means = acts.mean(axis=1, keepdims=True)
    directions = coef @ (acts - means) + means
    q, _ = np.linalg.qr(directions.T)
    weights = np.abs(q.T @ acts.T).sum(axis=1)
    weights = weights / weights.sum()
    return float((weights * np.abs(rho)).sum())


def test_pwcca_google_convention_matches_svcca_code():
    g = np.random.default_rng(20)
    n = 400
    z = g.standard_normal((n, 4))
    views = [z @ g.standard_normal((4, d)) + 0.7 * g.standard_normal((n, d)) + g.normal(3.0, 1.0, d)
             for d in (5, 8, 6, 6)]
    for x, y in [(views[0], views[1]), (views[1], views[0]), (views[2], views[3])]:
        # Centred views: the value is pwcca.py's, whatever signs LAPACK picks.
        xc, yc = x - x.mean(0), y - y.mean(0)
        got = pwcca(xc, yc, convention="google")
        assert got.dtype == torch.float64
        assert got.item() == pytest.approx(_google_pwcca(xc.T, yc.T), abs=1e-10)
        # Raw views: pwcca.py adds the neuron means back to the directions, so the singular
        # vectors' signs matter; with the same signs the values agree.
        expected = _google_pwcca(x.T, y.T, flip=1.0)
        assert pwcca(x, y, convention="google").item() == pytest.approx(expected, abs=1e-10)
        assert abs(_google_pwcca(x.T, y.T, flip=-1.0) - expected) > 1e-3
        assert pwcca(torch.from_numpy(x).float(), torch.from_numpy(y).float(), convention="google").item() == \
            pytest.approx(expected, abs=1e-5)
    # The smaller view weights by default; naming it gives the same number.
    x, y = views[1], views[0]
    assert pwcca(x, y, convention="google").item() == pytest.approx(
        pwcca(x, y, convention="google", weights_from="y").item(), abs=1e-14)
    # The conventions differ: not centred, and no whitening of the directions.
    assert abs(pwcca(x, y, convention="google").item() - pwcca(x, y, weights_from="y").item()) > 1e-3
    assert pwcca(x, x, convention="google").item() == pytest.approx(1.0, abs=1e-9)
    with pytest.raises(ValueError, match="convention"):
        pwcca(x, y, convention="svcca")


def _song_hsic(k: np.ndarray, l: np.ndarray) -> float:
    """Unbiased HSIC estimator (Song et al. 2012, Eq. 5), with (n x n) kernels."""
    n = len(k)
    kt, lt = k - np.diag(np.diag(k)), l - np.diag(np.diag(l))
    one = np.ones(n)
    return ((np.trace(kt @ lt) + (one @ kt @ one) * (one @ lt @ one) / ((n - 1) * (n - 2))
             - 2.0 / (n - 2) * (one @ kt @ lt @ one)) / (n * (n - 3)))


def _song_cka(k: np.ndarray, l: np.ndarray) -> float:
    return _song_hsic(k, l) / math.sqrt(_song_hsic(k, k) * _song_hsic(l, l))


def _rbf(x: np.ndarray, fraction: float) -> np.ndarray:
    d2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    return np.exp(-d2 / (2 * fraction**2 * np.median(d2)))


def _centred_cka(k: np.ndarray, l: np.ndarray) -> float:
    n = len(k)
    h = np.eye(n) - np.ones((n, n)) / n
    hsic = lambda a, b: np.trace(a @ h @ b @ h)  # noqa: E731
    return hsic(k, l) / math.sqrt(hsic(k, k) * hsic(l, l))


def test_debiased_and_rbf_cka_match_kernel_formulas():
    g = np.random.default_rng(21)
    x = g.standard_normal((60, 4)) + 2.0
    y = np.tanh(x @ g.standard_normal((4, 7))) + 0.3 * g.standard_normal((60, 7))
    assert linear_cka(x, y, debiased=True).item() == pytest.approx(_song_cka(x @ x.T, y @ y.T), abs=1e-12)
    for fraction in (0.8, 0.3):
        kx, ky = _rbf(x, fraction), _rbf(y, fraction)
        assert rbf_cka(x, y, sigma_fraction=fraction).item() == pytest.approx(_centred_cka(kx, ky), abs=1e-12)
        assert rbf_cka(x, y, sigma_fraction=fraction, debiased=True).item() == pytest.approx(
            _song_cka(kx, ky), abs=1e-12)
    # An odd count: the median is the middle squared distance.
    kx, ky = _rbf(x[:11], 0.8), _rbf(y[:11], 0.8)
    assert rbf_cka(x[:11], y[:11]).item() == pytest.approx(_centred_cka(kx, ky), abs=1e-12)


def test_debiased_and_rbf_cka_invariances():
    x = _anisotropic(300, 6, 22)
    y = torch.tanh(x @ torch.randn(6, 9, generator=_gen(23), dtype=torch.float64)) + 0.1 * torch.randn(
        300, 9, generator=_gen(24), dtype=torch.float64)
    measures = {
        "debiased linear": lambda a, b: linear_cka(a, b, debiased=True),
        "rbf": rbf_cka,
        "debiased rbf": lambda a, b: rbf_cka(a, b, debiased=True),
    }
    for name, measure in measures.items():
        assert measure(x, x).item() == pytest.approx(1.0, abs=1e-12), name
        assert measure(x, 2.5 * x @ _rotation(6, 25)).item() == pytest.approx(1.0, abs=1e-12), name
        base = measure(x, y).item()
        assert 0.2 < base < 0.999, name
        moved = measure(0.3 * x @ _rotation(6, 26) - 4.0, 7.0 * y @ _rotation(9, 27) + 1.5).item()
        assert moved == pytest.approx(base, abs=1e-10), name


def test_debiased_cka_removes_the_small_sample_bias():
    x = torch.randn(100, 30, generator=_gen(28), dtype=torch.float64)
    y = torch.randn(100, 30, generator=_gen(29), dtype=torch.float64)
    # Independent views: biased CKA ~ 0.2 at 100 datapoints for 30 neurons, debiased ~ 0.
    assert linear_cka(x, y).item() > 0.15
    assert abs(linear_cka(x, y, debiased=True).item()) < 0.05
    assert abs(rbf_cka(x, y, debiased=True).item()) < 0.05


def test_views_layout_is_checked_and_numpy_accepted():
    g = np.random.default_rng(30)
    x, y = g.standard_normal((200, 5)), g.standard_normal((200, 7))
    for measure in (lambda a, b: cca(a, b).correlations, lambda a, b: svcca(a, b).mean, pwcca, linear_cka,
                    rbf_cka, lambda a, b: pwcca(a, b, convention="google")):
        np.testing.assert_allclose(measure(x, y).numpy(), measure(torch.from_numpy(x), torch.from_numpy(y)).numpy(),
                                   rtol=0, atol=1e-14)
        with pytest.raises(ValueError, match="share rows"):
            measure(x, y[:150])
    with pytest.raises(ValueError, match=r"\(neurons, datapoints\)"):
        linear_cka(x.T, g.standard_normal((7, 200)))
    with pytest.raises(ValueError, match="2-D"):
        rbf_cka(x[None], y[None])
    with pytest.raises(ValueError, match="at least 4"):
        linear_cka(x[:3], y[:3], debiased=True)
    assert math.isnan(rbf_cka(np.ones((10, 3)), y[:10]).item())
    assert math.isnan(pwcca(np.ones((10, 3)), y[:10], convention="google").item())


@pytest.mark.requires_gpu
def test_cuda_matches_cpu():
    x = _anisotropic(5000, 20, 18).float()
    y = x[:, :10] + torch.randn(5000, 10, generator=_gen(19))
    more = [lambda a, b: pwcca(a, b, convention="google"), lambda a, b: linear_cka(a, b, debiased=True),
            lambda a, b: rbf_cka(a[:2000], b[:2000]), lambda a, b: rbf_cka(a[:2000], b[:2000], debiased=True)]
    cpu = list(_all_three(x, y)) + [m(x, y) for m in more]
    gpu = list(_all_three(x.cuda(), y.cuda())) + [m(x.cuda(), y.cuda()) for m in more]
    for a, b in zip(cpu, gpu):
        assert b.device.type == "cuda"
        assert b.item() == pytest.approx(a.item(), abs=1e-8)


@pytest.mark.parametrize("measure", [cca, svcca, pwcca, linear_cka, rbf_cka], ids=lambda f: f.__name__)
def test_views_with_fewer_datapoints_than_neurons_warn(measure):
    # The same layer at two epochs: 300 datapoints of 40 neurons, the second a slightly moved copy.
    a = torch.randn(300, 40, generator=_gen(7), dtype=torch.float64)
    b = a + 0.1 * torch.randn(300, 40, generator=_gen(8), dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        measure(a, b)  # (datapoints, neurons): no warning
    with pytest.warns(FewDatapointsWarning, match=rf"{measure.__name__}: the views have 40 datapoints .* 300 and "
                                                  r"300 neurons .* Views transposed\?"):
        measure(a.T, b.T)


def test_transposed_views_read_as_near_identical():
    # What the warning guards against: transposed, 40 "datapoints" in 300 dimensions are always
    # perfectly correlated, while the true SVCCA and CKA of the two epochs are below 1.
    a = torch.randn(300, 40, generator=_gen(7), dtype=torch.float64)
    b = a + 0.1 * torch.randn(300, 40, generator=_gen(8), dtype=torch.float64)
    assert float(svcca(a, b).mean) < 0.999
    with pytest.warns(FewDatapointsWarning):
        assert float(svcca(a.T, b.T).mean) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("extra", [0, 1])
def test_independent_views_with_n_at_most_d_plus_1_correlate_perfectly_and_warn(extra):
    """n = d and n = d + 1: n - 1 centred datapoints span at most d directions, so the canonical
    correlations of independent views are 1 (the case the warning exists for)."""
    d = 20
    x = torch.randn(d + extra, d, generator=_gen(1), dtype=torch.float64)
    y = torch.randn(d + extra, d, generator=_gen(2), dtype=torch.float64)
    with pytest.warns(FewDatapointsWarning, match="canonical correlations are 1 whatever the views hold"):
        rho = cca(x, y).correlations
    assert float(rho.min()) == pytest.approx(1.0, abs=1e-8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cca(torch.randn(d + 2, d, generator=_gen(3), dtype=torch.float64),
            torch.randn(d + 2, d, generator=_gen(4), dtype=torch.float64))  # n = d + 2: no warning


def test_the_warning_says_what_happens_to_each_cka():
    x = torch.randn(20, 20, generator=_gen(5), dtype=torch.float64)
    y = torch.randn(20, 20, generator=_gen(6), dtype=torch.float64)
    with pytest.warns(FewDatapointsWarning, match="CKA is biased toward 1"):
        assert float(linear_cka(x, y)) > 0.5  # unrelated views
    with pytest.warns(FewDatapointsWarning, match="debiased CKA stays near 0 for unrelated views"):
        assert abs(float(linear_cka(x, y, debiased=True))) < 0.2


def test_google_pwcca_with_a_constant_neuron_warns_instead_of_a_silent_nan():
    from analyses.cca import RankDeficientWarning

    x = torch.randn(200, 6, generator=_gen(9), dtype=torch.float64)
    x[:, 2] = 3.0  # a dead unit
    y = torch.randn(200, 8, generator=_gen(10), dtype=torch.float64)
    with pytest.warns(RankDeficientWarning, match="rank 5 .* convention='paper'"):
        assert math.isnan(float(pwcca(x, y, convention="google")))
    assert 0 < float(pwcca(x, y)) < 1  # the paper's convention weights the units that vary
