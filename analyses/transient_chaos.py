r"""Transient chaos length (Inoue et al. 2021, Sec. II.B; Fig. 4B, 4D).

A trajectory is chaotic while its local Lyapunov exponent lambda(t)
(Algorithm A1) is positive; the transient chaos length is the time after which
lambda stays negative (non-positive) until the end of the run.

Two cases are not measured lengths and are marked as such: a trajectory still
chaotic in the last interval is *censored* (its length is only a lower bound:
the run ended first, as in the paper's Fig. 4D), and a trajectory that diverged
(lambda NaN in the last interval: the state holds NaN or Inf) has no length.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from analyses._arrays import tensor

__all__ = ["TransientChaos", "transient_chaos", "summarize_chaos"]


@dataclass(frozen=True)
class TransientChaos:
    """Per-sample transient chaos.

    Attributes
    ----------
    length : Tensor, shape ``(batch,)``, float64
        Transient chaos length in steps of f (a multiple of tau); NaN when not measured.
    chaotic : Tensor, shape ``(batch,)``, bool
        ``length > 0``.
    mean_exponent : Tensor, shape ``(batch,)``, float64
        Mean lambda over the chaotic intervals; NaN when not chaotic or not measured.
    censored : Tensor, shape ``(batch,)``, bool
        Still chaotic in the last interval: ``length`` is a lower bound (the run's length).
    measured : Tensor, shape ``(batch,)``, bool
        False where the trajectory diverged (lambda NaN in the last interval).
    """

    length: Tensor
    chaotic: Tensor
    mean_exponent: Tensor
    censored: Tensor
    measured: Tensor


def transient_chaos(lam: Tensor, tau: int) -> TransientChaos:
    r"""Transient chaos length and mean exponent per sample (Sec. II.B, Fig. 4D).

    .. math:: j^* = \max\{ j : \lambda(j\tau) > 0 \}, \quad
              L = \tau (j^* + 1), \quad
              \bar\lambda = \frac{1}{j^*+1} \sum_{j=0}^{j^*} \lambda(j\tau)

    L = 0 when lambda is never positive. :math:`\bar\lambda` is the paper's
    "average LLE value in chaotic trajectories" (9.54e-2 pre-trained,
    6.41e-3 initial, with tau = 50). A NaN lambda inside the series counts as
    not positive and is left out of the mean; NaN in the last interval (a
    diverged trajectory) leaves the sample unmeasured: NaN length and mean.

    Parameters
    ----------
    lam : Tensor, shape ``(batch, K)``
        Per-interval exponents (not divided by tau); interval j starts at j * tau.
    tau : int
        Interval length.

    Returns
    -------
    TransientChaos
    """
    lam = tensor(lam, "lam (..., intervals)", min_ndim=1).to(torch.float64)
    if tau < 1:
        raise ValueError(f"tau must be >= 1, got {tau}")
    n_intervals = lam.shape[-1]
    positive = lam > 0  # NaN > 0 is False
    chaotic = positive.any(dim=-1)
    # Index of the last positive interval: first maximum of the reversed mask.
    j_last = (n_intervals - 1) - positive.flip(-1).to(torch.uint8).argmax(dim=-1)
    length = torch.where(chaotic, tau * (j_last + 1), torch.zeros_like(j_last))
    j = torch.arange(n_intervals, device=lam.device)
    use = (j <= j_last.unsqueeze(-1)) & ~torch.isnan(lam)
    total = torch.where(use, lam, torch.zeros_like(lam)).sum(dim=-1)
    count = use.sum(dim=-1)
    mean = total / count.to(torch.float64)
    measured = ~torch.isnan(lam[..., -1]) if n_intervals else torch.zeros_like(chaotic)
    nan = torch.full_like(mean, float("nan"))
    mean = torch.where(chaotic & measured, mean, nan)
    length = torch.where(measured, length.to(torch.float64), nan)
    censored = positive[..., -1] & measured if n_intervals else torch.zeros_like(chaotic)
    return TransientChaos(length=length, chaotic=chaotic & measured, mean_exponent=mean, censored=censored,
                          measured=measured)


def summarize_chaos(result: TransientChaos) -> dict[str, Tensor]:
    """Population summary of :func:`transient_chaos` (Sec. II.B).

    Parameters
    ----------
    result : TransientChaos

    Returns
    -------
    dict of 0-d float64 Tensors
        ``fraction_never_chaotic``: fraction of the measured samples with length
        0 (paper: 0.385 for initial networks, 0 pre-trained; NaN when no sample
        was measured); ``mean_exponent``: mean of ``result.mean_exponent`` over
        chaotic samples (NaN if none).
    """
    chaotic = result.chaotic
    never = (~chaotic & result.measured).to(torch.float64).sum()
    fraction = never / result.measured.sum().to(torch.float64)
    values = torch.where(chaotic, result.mean_exponent.to(torch.float64), torch.zeros_like(result.mean_exponent, dtype=torch.float64))
    mean = values.sum() / chaotic.sum().to(torch.float64)
    return {"fraction_never_chaotic": fraction, "mean_exponent": mean}
