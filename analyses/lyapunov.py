r"""Local Lyapunov exponent (Inoue et al. 2021, Appendix C, Algorithm A1; Fig. 2C, Fig. 4B).

The first dimension of every state tensor is the batch; all other dimensions
together form one sample's state. Algorithm A1, with perturbation size k and
renormalisation interval tau:

1. eps ~ N(0, I), eps <- k eps / ||eps||, y_0 = x_0 + eps
2. iterate x and y tau times with f
3. lambda(t) = ln(||y_{t+tau} - x_{t+tau}|| / k); renormalise y to distance k; t <- t + tau

``lambda(t)`` is the growth over tau steps (not divided by tau);
:func:`per_step_exponent` gives the exponent per application of f.
:func:`initial_perturbation` and :func:`renormalize` do no host synchronisation,
so a runner can use them inside its own GPU loop; :func:`local_lyapunov` is the
reference loop built from them.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Callable

from analyses._arrays import tensor

if TYPE_CHECKING:
    import torch
    from torch import Tensor

__all__ = ["initial_perturbation", "renormalize", "local_lyapunov", "default_k", "per_step_exponent",
           "UnresolvedPerturbationWarning", "warn_if_unresolved", "rounding_floor", "unresolved", "nonlinear",
           "LINEARITY_RTOL", "LINEARITY_ATOL", "rounding_noise"]


def _flat(x: Tensor) -> Tensor:
    return x.reshape(x.shape[0], -1)


def _expand(v: Tensor, like: Tensor) -> Tensor:
    return v.reshape((like.shape[0],) + (1,) * (like.dim() - 1))


def initial_perturbation(x: Tensor, k: float, generator: torch.Generator | None = None) -> Tensor:
    r"""Perturbed initial state (Algorithm A1, lines 2, 5, 6).

    .. math:: \epsilon \sim \mathcal N(0, I), \quad
              y_0 = x_0 + k\,\epsilon / \|\epsilon\|

    The norm runs over all non-batch dimensions of one sample. eps is drawn in
    float64 on the CPU (with ``generator``, a CPU generator) and then cast and
    moved, so the result does not depend on the device.

    Parameters
    ----------
    x : Tensor, shape ``(batch, ...)``
        Unperturbed states x_0; any float dtype and device.
    k : float
        Perturbation size (paper: 1.0).
    generator : torch.Generator, optional
        CPU generator; the global one when None.

    Returns
    -------
    Tensor, same shape, dtype and device as ``x``
        y_0.
    """
    import torch  # lazy: torch

    x = tensor(x, "x (batch, ...)", min_ndim=1)
    eps = torch.randn(x.shape, dtype=torch.float64, generator=generator, device="cpu")
    norm = _flat(eps).norm(dim=1)
    eps = eps * _expand(k / norm, eps)
    return x + eps.to(device=x.device, dtype=x.dtype)


def renormalize(x: Tensor, y: Tensor, k: float | Tensor) -> tuple[Tensor, Tensor]:
    r"""Measure the separation and renormalise it to ``k`` (Algorithm A1, lines 7-8, 5-6).

    .. math:: d = \|y - x\|, \quad \lambda = \ln(d / k), \quad
              y' = x + k\,(y - x) / d

    d is computed in float64 over all non-batch dimensions. Where d == 0,
    lambda = -inf and y' = y. Where d is not finite, lambda = NaN and y' is NaN.

    Parameters
    ----------
    x : Tensor, shape ``(batch, ...)``
        Reference trajectory x_{t+tau}.
    y : Tensor, same shape as ``x``
        Perturbed trajectory y_{t+tau}.
    k : float or Tensor of shape ``(batch,)``
        Perturbation size (one per row, or one for all).

    Returns
    -------
    lam : Tensor, shape ``(batch,)``, float64
        ln(d / k), the paper's lambda(t) for the interval that ends here.
    y_new : Tensor, same shape, dtype and device as ``y``
        Perturbed state at distance k from x (y_{t+tau} for the next interval).
    """
    import torch  # lazy: torch
    from torch import Tensor  # lazy: torch

    x = tensor(x, "x (batch, ...)", min_ndim=1)
    y = tensor(y, "y", like=x)
    if x.shape != y.shape:
        raise ValueError(f"x {tuple(x.shape)} and y {tuple(y.shape)} must have the same shape")
    diff = (y.to(torch.float64) - x.to(torch.float64))
    d = _flat(diff).norm(dim=1)
    if isinstance(k, Tensor):
        k = k.to(dtype=torch.float64, device=d.device)
    finite = torch.isfinite(d)
    zero = d == 0
    nan = torch.full_like(d, float("nan"))
    lam = torch.where(finite, torch.log(d / k), nan)
    scale = torch.where(zero, torch.ones_like(d), torch.where(finite, k / d, nan))
    y_new = x + (diff * _expand(scale, diff)).to(dtype=y.dtype)
    y_new = torch.where(_expand(zero, y), y, y_new)
    return lam, y_new


def local_lyapunov(
    step: Callable[[Tensor], Tensor],
    x0: Tensor,
    steps: int,
    k: float | None = None,
    tau: int = 10,
    generator: torch.Generator | None = None,
) -> Tensor:
    r"""Reference implementation of Algorithm A1 (Inoue et al. 2021, Appendix C).

    .. math:: \lambda(j\tau) = \ln \frac{\|y_{(j+1)\tau} - x_{(j+1)\tau}\|}{k},
              \quad \|y_{j\tau} - x_{j\tau}\| = k

    tau = 10 is the paper's short-term interval (Fig. 2C); the long-term analysis
    uses tau = 50 (Fig. 4B). The paper's k = 1.0 is a small step for BERT's
    hidden states (norm ~ 10-100) but not for a map on [0, 1]: by default
    (``k=None``) k is :func:`default_k` of ``x0``, the square root of its dtype's
    machine epsilon times its largest sample norm (at least 1): small enough to
    stay in the linear regime over tau steps of a map that doubles distances
    (fp64: 1.5e-8 * 2^10), large enough to be resolved (fp32: 3.5e-4). Pass
    ``k=1.0`` for the paper's. Values come in the dtype of ``x0``; ``lambda``
    is always float64.

    It warns (:class:`UnresolvedPerturbationWarning`) when k is below what the states' dtype
    resolves (:func:`warn_if_unresolved`: fp32 states of norm 1 need k >= 1.2e-5, so k = 1e-6
    measures rounding), and after the run when the separation at the end of an interval fell to
    the rounding of the states (a contracting map with a small k), where lambda is rounding too.

    Parameters
    ----------
    step : callable
        The map f, applied to a batch of states ``(batch, ...)``.
    x0 : Tensor or numpy array, shape ``(batch, ...)``
        Initial states (a numpy array becomes a tensor of its dtype; ``step``
        is applied to tensors).
    steps : int
        Number of applications of f; a remainder ``steps % tau`` is not run.
    k : float, optional
        Perturbation size; default :func:`default_k`.
    tau : int
        Renormalisation interval.
    generator : torch.Generator, optional
        CPU generator for the initial perturbation.

    Returns
    -------
    Tensor, shape ``(batch, steps // tau)``, float64
        lam[:, j] for the interval starting at t = j * tau (not divided by tau;
        see :func:`per_step_exponent`).
    """
    import torch  # lazy: torch

    if tau < 1:
        raise ValueError(f"tau must be >= 1, got {tau}")
    x0 = tensor(x0, "x0 (batch, ...)", min_ndim=1)
    if not x0.is_floating_point():
        x0 = x0.to(torch.get_default_dtype())
    k = default_k(x0) if k is None else k
    warn_if_unresolved(x0, k)
    x = x0
    y = initial_perturbation(x0, k, generator)
    lams = []
    at_floor = torch.zeros((), dtype=torch.int64, device=x0.device)
    for _ in range(steps // tau):
        for _ in range(tau):
            x = step(x)
            y = step(y)
        lam, y = renormalize(x, y, k)
        lams.append(lam)
        at_floor += unresolved(lam, k, x).sum()
    if not lams:
        return torch.empty((x0.shape[0], 0), dtype=torch.float64, device=x0.device)
    n_floor = int(at_floor)
    if n_floor:
        warnings.warn(
            f"local_lyapunov: in {n_floor} of {len(lams) * x0.shape[0]} intervals the separation of the two "
            f"trajectories ended at or below the rounding of {x.dtype} states (eps * ||x||); lambda there measures "
            f"rounding, not the map (-inf where they coincide). Use a larger k (now {k:.3g}) or float64 states.",
            UnresolvedPerturbationWarning, stacklevel=2)
    return torch.stack(lams, dim=1)


#: k must exceed the rounding of the state (eps * ||x0||) this many times: the renormalised
#: separation is then exact to about 1 / RESOLUTION = 1 %, and so is exp(lambda).
RESOLUTION = 100.0


class UnresolvedPerturbationWarning(UserWarning):
    """The perturbation is too small for the state's float dtype to resolve."""


def _eps(x: Tensor) -> float:
    import torch  # lazy: torch

    return torch.finfo(x.dtype if x.is_floating_point() else torch.get_default_dtype()).eps


def rounding_floor(x: Tensor) -> Tensor:
    """``(batch,)`` float64: eps * ||x_i||, the rounding of a state's distance to a nearby one."""
    import torch  # lazy: torch

    return _eps(x) * _flat(x.to(torch.float64)).norm(dim=1)


def unresolved(lam: Tensor, k: float | Tensor, x: Tensor, resolution: float = 1.0) -> Tensor:
    """``(batch,)`` bool: the separation at an interval's end, k exp(lambda), is at most ``resolution``
    times the rounding of the state x there (:func:`rounding_floor`): the twin collapsed onto the orbit
    in the working precision, and lambda measures rounding, not the map. NaN (a diverged twin) is
    never unresolved."""
    import torch  # lazy: torch

    return k * torch.exp(lam) <= resolution * rounding_floor(x)


#: The exponent at k and at a smaller perturbation must agree within this fraction of the latter
#: (or :data:`LINEARITY_ATOL` per step, whichever is larger) for k to be in the linear regime: the
#: linearised map's growth does not depend on the perturbation's size (Benettin et al. 1980,
#: Meccanica 15, 9: the limit of vanishing separation). 2 %: this project's choice, no published value.
LINEARITY_RTOL = 0.02
#: The absolute part of the linearity tolerance, per step (an exponent near 0 has no relative scale).
LINEARITY_ATOL = 1e-4


def nonlinear(rate: Tensor | float, rate_small: Tensor | float, rtol: float = LINEARITY_RTOL,
              atol: float | Tensor = LINEARITY_ATOL) -> Tensor:
    """Whether the exponent per step ``rate`` measured at a perturbation k disagrees with ``rate_small``
    measured at a smaller one beyond ``max(rtol |rate_small|, atol)``: k is outside the linear regime.
    Elementwise (``atol`` may be a tensor: a per-element noise bound); NaN compares as agreement."""
    import torch  # lazy: torch

    rate, rate_small = torch.as_tensor(rate, dtype=torch.float64), torch.as_tensor(rate_small, dtype=torch.float64)
    bound = torch.maximum(rtol * rate_small.abs(), torch.as_tensor(atol, dtype=torch.float64, device=rate_small.device))
    return (rate - rate_small).abs() > bound


def rounding_noise(lam: Tensor, k: float | Tensor, x: Tensor, tau: int) -> Tensor:
    """``(batch,)``: three standard errors of lambda over one interval from the rounding of the states
    alone: each of tau steps rounds the state by eps ||x||, against a separation of at least
    k min(1, exp(lambda)), so ln of it moves by about sqrt(tau) eps ||x|| / that."""
    import torch  # lazy: torch

    return 3 * tau ** 0.5 * rounding_floor(x) / (k * torch.clamp(torch.exp(lam), max=1.0))


def warn_if_unresolved(x0: Tensor, k: float) -> bool:
    """Warn (:class:`UnresolvedPerturbationWarning`) when ``k`` is below ``RESOLUTION * eps * max_i ||x0_i||``,
    eps the machine epsilon of ``x0``'s dtype: the perturbed state y_0 = x_0 + eps then rounds to a
    point whose distance from x_0 is off by more than 1 % (or is 0), and every lambda with it. Half
    precision cannot resolve any k in the linear regime; compute the map in float32 there. True when
    it warned (one host synchronisation)."""
    x0 = tensor(x0, "x0 (batch, ...)", min_ndim=1)
    if x0.numel() == 0:
        return False
    eps = _eps(x0)
    norm = float(rounding_floor(x0).max()) / eps
    if not k < RESOLUTION * eps * norm:
        return False
    warnings.warn(
        f"local_lyapunov: k = {k:.3g} is below what {x0.dtype} states of norm {norm:.3g} resolve "
        f"({RESOLUTION:g} * eps * ||x|| = {RESOLUTION * eps * norm:.3g}): their rounding is {eps * norm / k:.2%} of k, "
        f"and the separation, so lambda, is off by about as much. Use k >= {RESOLUTION * eps * norm:.3g} or float64 states "
        f"(the default k = {default_k(x0):.3g}).", UnresolvedPerturbationWarning, stacklevel=3)
    return True


def default_k(x0: Tensor) -> float:
    """Perturbation size :func:`local_lyapunov` uses by default: ``sqrt(eps) * max(1, max_i ||x0_i||)``
    with ``eps`` the machine epsilon of ``x0``'s float dtype."""
    import torch  # lazy: torch

    x0 = tensor(x0, "x0 (batch, ...)", min_ndim=1)
    dtype = x0.dtype if x0.is_floating_point() else torch.get_default_dtype()
    norm = float(_flat(x0.to(torch.float64)).norm(dim=1).max()) if x0.numel() else 1.0
    return torch.finfo(dtype).eps ** 0.5 * max(1.0, norm)


def per_step_exponent(lam: Tensor, tau: int) -> Tensor:
    r"""Exponent per application of f: :math:`\lambda(t) / \tau` (Algorithm A1).

    Parameters
    ----------
    lam : Tensor, any shape
        Per-interval exponents from :func:`renormalize` / :func:`local_lyapunov`.
    tau : int
        Interval length they were measured over.

    Returns
    -------
    Tensor, same shape
        float dtype of ``lam``; half precision (and integers) in float32.
    """
    import torch  # lazy: torch

    lam = tensor(lam, "lam")
    if not lam.is_floating_point() or lam.dtype in (torch.float16, torch.bfloat16):
        lam = lam.to(torch.float32)
    return lam / tau
