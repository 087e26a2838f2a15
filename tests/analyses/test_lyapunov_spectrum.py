"""Lyapunov spectrum by Benettin's QR method, Kaplan-Yorke dimension, sum of positive exponents:
known answers (closed forms computed here, or cited)."""

import math

import pytest
import torch

from analyses.lyapunov_spectrum import benettin, initial_basis, kaplan_yorke, positive_sum, qr_step


@pytest.fixture(autouse=True)
def _single_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def henon(s, a=1.4, b=0.3):
    x, y = s[..., 0], s[..., 1]
    return torch.stack([1.0 - a * x * x + y, b * x], dim=-1)


def test_qr_step_gives_the_logs_of_the_stretching_and_a_positive_diagonal():
    images = torch.tensor([[[-2.0, 0.0], [0.0, 3.0]]], dtype=torch.float64)
    q, logs = qr_step(images)
    assert torch.allclose(logs, torch.log(torch.tensor([[2.0, 3.0]], dtype=torch.float64)))
    # the sign of R's diagonal is folded into Q: Q R' = images with R' positive on its diagonal
    assert torch.allclose(q, torch.tensor([[[-1.0, 0.0], [0.0, 1.0]]], dtype=torch.float64))
    assert q.dtype == torch.float64 and logs.dtype == torch.float64
    q32, logs32 = qr_step(images.float())
    assert q32.dtype == torch.float32 and logs32.dtype == torch.float64


def test_initial_basis_is_orthonormal():
    q = initial_basis(10, 4, 3, torch.Generator().manual_seed(0), torch.float64, "cpu")
    assert q.shape == (3, 10, 4)
    assert torch.allclose(q.transpose(1, 2) @ q, torch.eye(4, dtype=torch.float64).expand(3, 4, 4), atol=1e-12)


def test_linear_map_gives_the_logs_of_the_eigenvalue_moduli():
    """x -> A x with A non-normal, eigenvalues 1.25, -0.5 and 0.25 (triangular): the exponents are
    ln 1.25, ln 0.5, ln 0.25 (Oseledets; for a constant matrix the logs of the eigenvalue moduli)."""
    a = torch.tensor([[1.25, 1.0, 0.3], [0.0, -0.5, 0.7], [0.0, 0.0, 0.25]], dtype=torch.float64)
    x0 = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    expected = torch.log(torch.tensor([1.25, 0.5, 0.25], dtype=torch.float64)).expand(4, 3)
    # the basis aligns with the Schur vectors geometrically fast (as 0.4^t): past 100 steps, exact
    assert torch.allclose(benettin(lambda x: x @ a.T, x0, m=3, steps=300, start=100), expected, atol=1e-9)
    whole = benettin(lambda x: x @ a.T, x0, m=3, steps=300)  # with the alignment: an O(1/T) error
    assert torch.allclose(whole, expected, atol=0.02) and not torch.allclose(whole, expected, atol=1e-9)
    assert torch.allclose(whole.sum(1), torch.tensor(math.log(1.25 * 0.5 * 0.25)).double(), atol=1e-12)  # ln|det A|


@pytest.mark.parametrize("every", [1, 5])
def test_henon_spectrum(every):
    """Hénon a = 1.4, b = 0.3: 0.41922 and -1.62319 (Sprott, Chaos and Time-Series Analysis, 2003,
    Table A.1); the sum is ln b per step at every step (det J = -b)."""
    g = torch.Generator().manual_seed(0)
    s = (torch.rand(64, 2, generator=g, dtype=torch.float64) - 0.5) * 0.2
    for _ in range(200):
        s = henon(s)
    lam = benettin(henon, s, m=2, steps=3000, every=every, generator=g)
    assert float(lam[:, 0].mean()) == pytest.approx(0.41922, abs=0.01)
    assert float(lam[:, 1].mean()) == pytest.approx(-1.62319, abs=0.01)
    assert torch.allclose(lam.sum(1), torch.full((64,), math.log(0.3), dtype=torch.float64), atol=1e-12)


def test_kaplan_yorke_known_answers():
    """Sprott (2003), Table A.1: Hénon (0.41922, -1.62319) D_KY 1.25827; Lorenz (0.9056, 0, -14.5723)
    D_KY 2.06215."""
    d, bound = kaplan_yorke(torch.tensor([[0.41922, -1.62319]], dtype=torch.float64))
    assert float(d[0]) == pytest.approx(1.25827, abs=1e-4) and not bool(bound[0])
    d, _ = kaplan_yorke(torch.tensor([-14.5723, 0.9056, 0.0], dtype=torch.float64))  # any order
    assert float(d) == pytest.approx(2.06215, abs=1e-4)


def test_kaplan_yorke_edges():
    d, bound = kaplan_yorke(torch.tensor([[-0.1, -0.5], [0.3, 0.2], [0.5, -0.5], [float("nan"), 1.0]],
                                         dtype=torch.float64))
    assert float(d[0]) == 0.0 and not bool(bound[0])   # every exponent negative: a fixed point's 0
    assert float(d[1]) == 2.0 and bool(bound[1])       # every partial sum positive: at least m
    assert float(d[2]) == 2.0 and bool(bound[2])       # the sum of all m is 0 (>= 0): at least m
    assert math.isnan(float(d[3])) and not bool(bound[3])


def test_positive_sum():
    s = positive_sum(torch.tensor([[0.5, 0.25, -1.0], [-0.1, -0.2, -0.3], [float("nan"), 1.0, 2.0]],
                                  dtype=torch.float64))
    assert s[0] == 0.75 and s[1] == 0.0 and math.isnan(float(s[2]))


def test_the_full_spectrum_of_lorenz96_sums_to_the_mean_log_det_of_its_jacobian():
    """The sum rule on the Lorenz-96 map (N = 40, F = 8, one RK4 step of dt = 0.05; Lorenz 1996): with
    m = N the exponents sum to the time average of ln|det J_t| along the orbit, since the product of
    R's diagonals over the orbit is |det| of the product of the Jacobians (the basis is orthonormal).
    The average is computed here from each step's full Jacobian (torch.autograd.functional.jacobian),
    to 1e-6 per step, as issue 54 asks of every map whose full spectrum is taken."""
    n, forcing, dt = 40, 8.0, 0.05

    def flow(x):
        return (torch.roll(x, -1, -1) - torch.roll(x, 2, -1)) * torch.roll(x, 1, -1) - x + forcing

    def step(x):
        k1 = flow(x)
        k2 = flow(x + 0.5 * dt * k1)
        k3 = flow(x + 0.5 * dt * k2)
        k4 = flow(x + dt * k3)
        return x + (dt / 6) * (k1 + 2 * k2 + 2 * k3 + k4)

    x = forcing + 0.01 * torch.sin(torch.arange(n, dtype=torch.float64))[None]
    for _ in range(400):  # onto the attractor
        x = step(x)
    steps = 200
    lam = benettin(step, x, m=n, steps=steps)[0]
    logdet, y = 0.0, x[0]
    for _ in range(steps):
        jac = torch.autograd.functional.jacobian(lambda v: step(v[None])[0], y)
        logdet += torch.linalg.slogdet(jac)[1].item()
        y = step(y[None])[0]
    assert float(lam.sum()) == pytest.approx(logdet / steps, abs=1e-6)
    assert float(lam[0]) > 0 > float(lam[-1])  # chaotic, and dissipative
