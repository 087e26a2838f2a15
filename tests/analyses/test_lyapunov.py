"""Local Lyapunov exponent (Algorithm A1) against maps with known exponents."""

import math
import warnings

import pytest
import torch

from analyses.lyapunov import (
    LINEARITY_ATOL,
    LINEARITY_RTOL,
    UnresolvedPerturbationWarning,
    initial_perturbation,
    local_lyapunov,
    nonlinear,
    per_step_exponent,
    renormalize,
    unresolved,
)


@pytest.fixture(autouse=True)
def _single_thread():
    """Thousands of tiny ops: OpenMP threads only add spin-wait on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def logistic(x):
    return 4.0 * x * (1.0 - x)


def henon(s, a=1.4, b=0.3):
    x, y = s[:, 0], s[:, 1]
    return torch.stack([1.0 - a * x * x + y, b * x], dim=1)


@pytest.mark.parametrize("tau", [1, 5])
def test_logistic_map_exponent_is_ln2(tau):
    g = torch.Generator().manual_seed(0)
    x0 = torch.rand(200, generator=g, dtype=torch.float64) * 0.98 + 0.01
    lam = local_lyapunov(logistic, x0, steps=3000, k=1e-8, tau=tau, generator=g)
    assert lam.shape == (200, 3000 // tau)
    assert lam.dtype == torch.float64
    assert torch.isfinite(lam).all()
    mean = per_step_exponent(lam, tau).mean()
    assert abs(float(mean) - math.log(2.0)) < 0.02


def test_henon_map_exponent():
    g = torch.Generator().manual_seed(1)
    s = (torch.rand(100, 2, generator=g, dtype=torch.float64) - 0.5) * 0.2
    for _ in range(200):  # onto the attractor
        s = henon(s)
    assert torch.isfinite(s).all()
    lam = local_lyapunov(henon, s, steps=2000, k=1e-8, tau=1, generator=g)
    assert abs(float(per_step_exponent(lam, 1).mean()) - 0.419) < 0.02


def test_random_tanh_reservoir_is_stable():
    g = torch.Generator().manual_seed(2)
    n, gain = 100, 0.5
    w = torch.randn(n, n, generator=g, dtype=torch.float64) / math.sqrt(n)
    x0 = torch.randn(8, n, generator=g, dtype=torch.float64)
    lam = local_lyapunov(lambda x: torch.tanh(gain * x @ w.T), x0, steps=400, k=1e-8, tau=10, generator=g)
    per_step = per_step_exponent(lam, 10)
    assert (per_step.mean(dim=1) < 0).all()
    # The trajectory falls onto the fixed point 0, where the Jacobian is g W.
    rho = torch.linalg.eigvals(gain * w).abs().max()
    assert abs(float(per_step[:, 20:].mean()) - math.log(float(rho))) < 0.02


def test_linear_map_exponent_is_log_spectral_radius():
    # Non-normal A with eigenvalues 1.5, 0.7, -0.3.
    g = torch.Generator().manual_seed(3)
    p = torch.randn(3, 3, generator=g, dtype=torch.float64) + 3 * torch.eye(3, dtype=torch.float64)
    a = p @ torch.diag(torch.tensor([1.5, 0.7, -0.3], dtype=torch.float64)) @ torch.linalg.inv(p)
    # x0 on the fixed point 0 so the growing orbit does not swamp the perturbation.
    x0 = torch.zeros(4, 3, dtype=torch.float64)
    lam = local_lyapunov(lambda x: x @ a.T, x0, steps=200, k=1.0, tau=10, generator=g)
    per_step = per_step_exponent(lam, 10)
    torch.testing.assert_close(per_step[:, 5:], torch.full_like(per_step[:, 5:], math.log(1.5)), atol=1e-6, rtol=0)


def test_rotation_scaling_exponent_is_exact_every_interval():
    r, th = 0.8, 0.7
    a = r * torch.tensor([[math.cos(th), -math.sin(th)], [math.sin(th), math.cos(th)]], dtype=torch.float64)
    x0 = torch.randn(5, 2, dtype=torch.float64)
    lam = local_lyapunov(lambda x: x @ a.T, x0, steps=30, k=1.0, tau=3)
    torch.testing.assert_close(lam, torch.full((5, 10), 3 * math.log(r), dtype=torch.float64))


def test_steps_remainder_is_dropped_and_multi_dim_state():
    calls = []

    def f(x):
        calls.append(1)
        return 2.0 * x

    lam = local_lyapunov(f, torch.zeros(3, 4, 5), steps=25, k=0.5, tau=10)
    assert lam.shape == (3, 2)
    assert len(calls) == 2 * 20
    torch.testing.assert_close(lam, torch.full((3, 2), 10 * math.log(2.0), dtype=torch.float64))


def test_initial_perturbation_norm_dtype_and_determinism():
    x = torch.randn(6, 4, 7).to(torch.float32)
    y = initial_perturbation(x, 0.25, torch.Generator().manual_seed(5))
    assert y.dtype == torch.float32 and y.shape == x.shape
    d = (y.double() - x.double()).reshape(6, -1).norm(dim=1)
    torch.testing.assert_close(d, torch.full((6,), 0.25, dtype=torch.float64), rtol=1e-5, atol=0)
    y2 = initial_perturbation(x, 0.25, torch.Generator().manual_seed(5))
    assert torch.equal(y, y2)
    # eps does not depend on the dtype of x: float64 input gets the same draw.
    y64 = initial_perturbation(x.double(), 0.25, torch.Generator().manual_seed(5))
    torch.testing.assert_close(y64.float(), y)
    # One scalar state per sample (a 1-d batch): |eps| = k.
    z = torch.zeros(10, dtype=torch.float64)
    torch.testing.assert_close(initial_perturbation(z, 0.1).abs(), torch.full_like(z, 0.1))


def test_renormalize_distance_is_k_and_lambda_is_log_ratio():
    x = torch.randn(4, 3, 8, dtype=torch.float64)
    scales = torch.tensor([1e-6, 0.5, 3.0, 1e4], dtype=torch.float64)
    direction = torch.randn(4, 3, 8, dtype=torch.float64)
    direction = direction / direction.reshape(4, -1).norm(dim=1)[:, None, None]
    y = x + scales[:, None, None] * direction
    k = 0.1
    lam, y_new = renormalize(x, y, k)
    assert lam.dtype == torch.float64 and lam.shape == (4,)
    torch.testing.assert_close(lam, torch.log(scales / k), rtol=1e-9, atol=1e-9)
    dist = (y_new - x).reshape(4, -1).norm(dim=1)
    torch.testing.assert_close(dist, torch.full((4,), k, dtype=torch.float64), rtol=1e-12, atol=0)
    # The direction is kept.
    torch.testing.assert_close(y_new - x, k * direction, rtol=0, atol=1e-8)


def test_renormalize_zero_distance_and_non_finite():
    x = torch.ones(3, 2, dtype=torch.float64)
    y = x.clone()
    y[1, 0] = float("nan")
    y[2, 1] = float("inf")
    lam, y_new = renormalize(x, y, 1.0)
    assert lam[0] == -math.inf
    assert torch.equal(y_new[0], y[0])
    assert torch.isnan(lam[1]) and torch.isnan(lam[2])
    assert not torch.isfinite(y_new[1]).all() and not torch.isfinite(y_new[2]).all()


def test_renormalize_keeps_dtype_of_y():
    x = torch.randn(2, 5, dtype=torch.float32)
    y = x + 0.3
    lam, y_new = renormalize(x, y, 1.0)
    assert y_new.dtype == torch.float32 and lam.dtype == torch.float64


def test_no_host_sync_on_meta_device():
    # Meta tensors have no data: any .item(), bool(tensor) or .cpu() would raise.
    x = torch.empty(4, 32, 16, device="meta")
    lam, y_new = renormalize(x, x, 1.0)
    assert lam.shape == (4,) and y_new.shape == x.shape
    assert per_step_exponent(lam, 10).shape == (4,)


def _logistic_start(dtype):
    g = torch.Generator().manual_seed(0)
    return (torch.rand(100, generator=g, dtype=torch.float64) * 0.98 + 0.01).to(dtype)


def test_too_small_k_for_float32_warns_and_misses_ln2():
    # ln 2 per step is the known answer (the logistic map at r = 4). fp32 states near 1 round at
    # 1.2e-7: k = 1e-8 does not survive y_0 = x_0 + eps, so most intervals read lambda = -inf.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lam64 = local_lyapunov(logistic, _logistic_start(torch.float64), steps=1000, k=1e-8, tau=10,
                               generator=torch.Generator().manual_seed(1))
    assert abs(float(per_step_exponent(lam64, 10).mean()) - math.log(2.0)) < 0.03
    with pytest.warns(UnresolvedPerturbationWarning) as record:
        lam32 = local_lyapunov(logistic, _logistic_start(torch.float32), steps=1000, k=1e-8, tau=10,
                               generator=torch.Generator().manual_seed(1))
    messages = [str(w.message) for w in record]
    assert any("k = 1e-08 is below what torch.float32 states of norm" in m for m in messages)
    assert any("ended at or below the rounding of torch.float32 states" in m for m in messages)
    assert (lam32 == -math.inf).float().mean() > 0.9


def test_resolvable_k_in_float32_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lam = local_lyapunov(logistic, _logistic_start(torch.float32), steps=1000, tau=10,
                             generator=torch.Generator().manual_seed(1))  # default k = 3.5e-4
    assert torch.isfinite(lam).all()


def test_contracting_map_needs_k_that_survives_the_contraction():
    # x -> x / 2 + 0.3 has exponent ln(1/2) per step exactly. Over tau = 10 steps a separation k
    # shrinks 1024-fold: in fp32 (rounding 1.2e-7 near 1) k = 1e-6 ends below the rounding and
    # lambda reads rounding (the issue: -0.029 where the answer is -0.465 on another map); k = 1e-2
    # ends at 1e-5, resolved, and gives ln(1/2) to fp32 precision.
    def halve(s):
        return 0.5 * s + 0.3

    x0 = torch.linspace(0.05, 0.95, 32)[:, None].repeat(1, 4)
    with pytest.warns(UnresolvedPerturbationWarning):
        lam = local_lyapunov(halve, x0, steps=100, k=1e-6, tau=10, generator=torch.Generator().manual_seed(0))
    assert not (abs(per_step_exponent(lam, 10) - math.log(0.5)) < 0.05).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lam = local_lyapunov(halve, x0, steps=100, k=1e-2, tau=10, generator=torch.Generator().manual_seed(0))
        lam64 = local_lyapunov(halve, x0.double(), steps=100, k=1e-6, tau=10,
                               generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(per_step_exponent(lam, 10), torch.full_like(lam, math.log(0.5)), rtol=0, atol=2e-3)
    torch.testing.assert_close(per_step_exponent(lam64, 10), torch.full_like(lam, math.log(0.5)), rtol=0, atol=1e-6)


def test_renormalize_takes_one_k_per_row():
    """Two rows at distance 2 from x, renormalised to k = 1 and 0.5: lambda = ln 2 and ln 4, and each
    comes back at its own k."""
    x = torch.zeros((2, 1, 3), dtype=torch.float64)
    y = torch.tensor([[[2.0, 0, 0]], [[0, 2.0, 0]]], dtype=torch.float64)
    lam, y_new = renormalize(x, y, torch.tensor([1.0, 0.5]))
    assert torch.allclose(lam, torch.tensor([math.log(2), math.log(4)], dtype=torch.float64))
    assert torch.allclose(y_new.flatten(1).norm(dim=1), torch.tensor([1.0, 0.5], dtype=torch.float64))


def test_the_linearity_tolerance_is_relative_with_an_absolute_floor():
    assert not nonlinear(0.419, 0.419) and not nonlinear(0.419 * (1 + LINEARITY_RTOL / 2), 0.419)
    assert nonlinear(0.419 * (1 + 2 * LINEARITY_RTOL), 0.419)
    assert not nonlinear(LINEARITY_ATOL / 2, 0.0) and nonlinear(2 * LINEARITY_ATOL, 0.0)  # no relative scale at 0
    assert not nonlinear(float("nan"), 0.4)  # nothing to judge
    # a per-element noise bound widens the tolerance where it is larger
    assert nonlinear(torch.tensor([0.5, 0.5]), torch.tensor([0.4, 0.4]), atol=torch.tensor([0.01, 0.2])).tolist() == [True, False]


def test_an_interval_is_unresolved_where_the_separation_reaches_the_states_rounding():
    """eps * ||x||: a separation of 1e-20 from a state of norm 1 is below fp64's rounding (2.2e-16), 1e-6
    is not; with a resolution factor of 100 the bound moves up to 2.2e-14."""
    x = torch.ones((3, 1, 1), dtype=torch.float64)
    lam = torch.log(torch.tensor([1e-20, 1e-6, 1e-15], dtype=torch.float64))  # separations at k = 1
    assert unresolved(lam, 1.0, x).tolist() == [True, False, False]
    assert unresolved(lam, 1.0, x, 100.0).tolist() == [True, False, True]
    assert not unresolved(torch.tensor([float("nan")], dtype=torch.float64), 1.0, x[:1]).any()
