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

from typing import Callable

import torch
from torch import Tensor

from analyses._arrays import tensor

__all__ = ["initial_perturbation", "renormalize", "local_lyapunov", "default_k", "per_step_exponent"]


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
    x = tensor(x, "x (batch, ...)", min_ndim=1)
    eps = torch.randn(x.shape, dtype=torch.float64, generator=generator, device="cpu")
    norm = _flat(eps).norm(dim=1)
    eps = eps * _expand(k / norm, eps)
    return x + eps.to(device=x.device, dtype=x.dtype)


def renormalize(x: Tensor, y: Tensor, k: float) -> tuple[Tensor, Tensor]:
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
    k : float
        Perturbation size.

    Returns
    -------
    lam : Tensor, shape ``(batch,)``, float64
        ln(d / k), the paper's lambda(t) for the interval that ends here.
    y_new : Tensor, same shape, dtype and device as ``y``
        Perturbed state at distance k from x (y_{t+tau} for the next interval).
    """
    x = tensor(x, "x (batch, ...)", min_ndim=1)
    y = tensor(y, "y", like=x)
    if x.shape != y.shape:
        raise ValueError(f"x {tuple(x.shape)} and y {tuple(y.shape)} must have the same shape")
    diff = (y.to(torch.float64) - x.to(torch.float64))
    d = _flat(diff).norm(dim=1)
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
    if tau < 1:
        raise ValueError(f"tau must be >= 1, got {tau}")
    x0 = tensor(x0, "x0 (batch, ...)", min_ndim=1)
    if not x0.is_floating_point():
        x0 = x0.to(torch.get_default_dtype())
    k = default_k(x0) if k is None else k
    x = x0
    y = initial_perturbation(x0, k, generator)
    lams = []
    for _ in range(steps // tau):
        for _ in range(tau):
            x = step(x)
            y = step(y)
        lam, y = renormalize(x, y, k)
        lams.append(lam)
    if not lams:
        return torch.empty((x0.shape[0], 0), dtype=torch.float64, device=x0.device)
    return torch.stack(lams, dim=1)


def default_k(x0: Tensor) -> float:
    """Perturbation size :func:`local_lyapunov` uses by default: ``sqrt(eps) * max(1, max_i ||x0_i||)``
    with ``eps`` the machine epsilon of ``x0``'s float dtype."""
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
    lam = tensor(lam, "lam")
    if not lam.is_floating_point() or lam.dtype in (torch.float16, torch.bfloat16):
        lam = lam.to(torch.float32)
    return lam / tau
