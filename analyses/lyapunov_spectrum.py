r"""Lyapunov spectrum by Benettin's QR method, and what it gives: the Kaplan-Yorke dimension and the
sum of the positive exponents.

Benettin, Galgani, Giorgilli & Strelcyn, *Meccanica* 15, 9-30 (1980): carry ``m`` tangent vectors
``Q_t`` (an orthonormal ``n x m`` basis) along the orbit, ``V = J(x_t) Q_t`` (the Jacobian-vector
products of the map), and every ``every`` steps re-orthonormalise by a QR decomposition
``V = Q_{t+1} R``. The i-th exponent per step is the time average of ``ln |R_ii|``:

.. math:: \lambda_i = \lim_{T\to\infty} \frac{1}{T} \sum_{k} \ln |R^{(k)}_{ii}| ,
          \quad \lambda_1 \ge \lambda_2 \ge \dots \ge \lambda_m .

The full spectrum (m = n) sums to the time average of ``ln |det J|`` (the volume's growth; the
Hénon map: ``ln b`` per step). With QR every ``every`` > 1 steps the vectors are products of
``every`` Jacobians between decompositions; ``every`` must stay short enough that the vectors do not
collapse onto the leading direction in the working precision (lambda_1 - lambda_m) x every << ln(1/u).

The Kaplan-Yorke (Lyapunov) dimension, Kaplan & Yorke, in *Functional Differential Equations and
Approximation of Fixed Points*, Lecture Notes in Mathematics 730, 204-227 (1979):

.. math:: D_{KY} = j + \frac{\sum_{i \le j} \lambda_i}{|\lambda_{j+1}|},

j the largest index whose partial sum ``sum_{i<=j} lambda_i`` is >= 0; 0 when lambda_1 < 0; when the
partial sums of all m measured exponents are >= 0 the dimension is at least m, and ``m`` is returned
as a lower bound. The sum of the positive exponents bounds the Kolmogorov-Sinai entropy from above
(Ruelle's inequality), with equality for SRB measures (Pesin's identity; Pesin, *Russ. Math. Surv.*
32, 55 (1977)). Engelken, Wolf & Abbott, *Phys. Rev. Research* 5, 043044 (2023) computed full
spectra of random tanh networks this way (their Fig. 2: D_KY, entropy rate against the gain).

Every function here is batched over leading dimensions and does no host synchronisation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    import torch
    from torch import Tensor

__all__ = ["qr_step", "kaplan_yorke", "positive_sum", "initial_basis", "benettin"]


def qr_step(images: Tensor) -> tuple[Tensor, Tensor]:
    r"""One re-orthonormalisation of Benettin's method: ``images`` ``(..., n, m)``, the tangent vectors
    after the map (columns), -> ``(Q, ln|diag R|)``: ``Q`` ``(..., n, m)`` orthonormal, in the images'
    dtype, with the signs of R's diagonal folded in (``Q_i`` points along the image of the i-th vector
    less its parts along the earlier ones, so the basis does not flip from one step to the next), and
    the logs ``(..., m)`` in float64. The decomposition is computed in float64 (a fp32 run's rounding
    of the basis stays its own: the Jacobian-vector products are the map's dtype). A zero column gives
    ``-inf``, a NaN image NaN."""
    import torch  # lazy: torch

    q, r = torch.linalg.qr(images.double())
    d = torch.diagonal(r, dim1=-2, dim2=-1)
    sign = torch.where(d < 0, -1.0, 1.0).to(d.dtype)
    return (q * sign.unsqueeze(-2)).to(images.dtype), torch.log(d.abs())


def kaplan_yorke(exponents: Tensor) -> tuple[Tensor, Tensor]:
    r"""Kaplan-Yorke dimension of the spectra ``exponents`` ``(..., m)`` (any order; sorted here):
    ``(D_KY (...), lower_bound (...) bool)``.

    ``D_KY = j + sum_{i<=j} lambda_i / |lambda_{j+1}|`` with j the largest index whose partial sum is
    >= 0 (Kaplan & Yorke 1979); 0 when lambda_1 < 0; ``m`` where every partial sum of the m exponents
    is >= 0, with ``lower_bound`` True (the spectrum beyond the m measured exponents would be needed).
    NaN where any exponent is NaN."""
    import torch  # lazy: torch

    lam = torch.sort(exponents.double(), dim=-1, descending=True).values
    m = lam.shape[-1]
    partial = torch.cumsum(lam, dim=-1)
    # partial sums are decreasing once an exponent is negative, so the count of sums >= 0 is j
    # (a positive exponent after a negative one cannot occur in the sorted spectrum)
    j = (partial >= 0).sum(-1)
    bound = j == m
    idx = (j - 1).clamp(min=0, max=m - 1).unsqueeze(-1)
    s = torch.gather(partial, -1, idx).squeeze(-1)
    nxt = torch.gather(lam, -1, j.clamp(max=m - 1).unsqueeze(-1)).squeeze(-1)
    d = torch.where(j == 0, torch.zeros_like(s), j.double() + s / nxt.abs())
    d = torch.where(bound, torch.full_like(d, float(m)), d)
    nan = torch.isnan(lam).any(-1)
    return torch.where(nan, torch.full_like(d, float("nan")), d), bound & ~nan


def positive_sum(exponents: Tensor) -> Tensor:
    """Sum of the positive exponents ``(..., m) -> (...)`` (float64): the upper bound on the
    Kolmogorov-Sinai entropy per step (Ruelle's inequality; Pesin's identity where it is an equality);
    a lower bound of that sum when the m measured exponents are all positive. NaN where any is NaN."""
    import torch  # lazy: torch

    lam = exponents.double()
    out = torch.where(lam > 0, lam, torch.zeros_like(lam)).sum(-1)
    return torch.where(torch.isnan(lam).any(-1), torch.full_like(out, float("nan")), out)


def initial_basis(n: int, m: int, batch: int, generator: torch.Generator, dtype, device) -> Tensor:
    """``batch`` orthonormal ``n x m`` bases (``(batch, n, m)``), drawn N(0, 1) in float64 on the CPU
    with ``generator`` and orthonormalised there, then cast and moved: the same on every device."""
    import torch  # lazy: torch

    g = torch.randn((batch, n, m), generator=generator, dtype=torch.float64)
    return torch.linalg.qr(g)[0].to(dtype=dtype, device=device)


def benettin(step: Callable[[Tensor], Tensor], x0: Tensor, m: int, steps: int, every: int = 1,
             generator: torch.Generator | None = None, start: int = 0) -> Tensor:
    """The reference loop: the m leading exponents per step ``(batch, m)`` of the map ``step`` (batched
    on dim 0, any state shape after it) from ``x0``, over ``steps`` steps (a multiple of ``every``), by
    forward-mode Jacobian-vector products (``torch.func.jvp``) and :func:`qr_step` every ``every`` steps;
    averaged over the steps from ``start`` on (a multiple of ``every``: the basis is carried from 0, and
    its alignment with the Oseledets directions, an O(1) error over the whole average, is left out)."""
    import torch  # lazy: torch

    if steps % every or start % every or not 0 <= start < steps:
        raise ValueError(f"steps = {steps} and start = {start} must be multiples of every = {every}, start < steps")
    B, shape = x0.shape[0], x0.shape[1:]
    n = int(torch.tensor(shape).prod()) if len(shape) else 1
    gen = generator or torch.Generator().manual_seed(0)
    q = initial_basis(n, m, B, gen, x0.dtype, x0.device)  # (B, n, m)
    total = torch.zeros((B, m), dtype=torch.float64, device=x0.device)
    x = x0
    for t in range(steps):
        tangents = q.permute(2, 0, 1).reshape(m * B, *shape)
        xs = x.repeat(m, *([1] * len(shape)))
        y, v = torch.func.jvp(step, (xs,), (tangents,))
        q = v.reshape(m, B, n).permute(1, 2, 0)
        x = y[:B]
        if (t + 1) % every == 0:
            q, logs = qr_step(q)
            if t + 1 > start:
                total += logs
    return total / (steps - start)
