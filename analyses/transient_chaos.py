r"""Transient chaos length (Inoue et al. 2021, Sec. II.B; Fig. 4B, 4D).

A trajectory is chaotic while its local Lyapunov exponent lambda(t)
(Algorithm A1) is positive; the transient chaos length is the time after which
lambda stays negative (non-positive) until the end of the run.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["TransientChaos", "transient_chaos", "summarize_chaos"]


@dataclass(frozen=True)
class TransientChaos:
    """Per-sample transient chaos.

    Attributes
    ----------
    length : Tensor, shape ``(batch,)``, int64
        Transient chaos length in steps of f (a multiple of tau).
    chaotic : Tensor, shape ``(batch,)``, bool
        ``length > 0``.
    mean_exponent : Tensor, shape ``(batch,)``, float64
        Mean lambda over the chaotic intervals; NaN when not chaotic.
    """

    length: Tensor
    chaotic: Tensor
    mean_exponent: Tensor


def transient_chaos(lam: Tensor, tau: int) -> TransientChaos:
    r"""Transient chaos length and mean exponent per sample (Sec. II.B, Fig. 4D).

    .. math:: j^* = \max\{ j : \lambda(j\tau) > 0 \}, \quad
              L = \tau (j^* + 1), \quad
              \bar\lambda = \frac{1}{j^*+1} \sum_{j=0}^{j^*} \lambda(j\tau)

    L = 0 when lambda is never positive. :math:`\bar\lambda` is the paper's
    "average LLE value in chaotic trajectories" (9.54e-2 pre-trained,
    6.41e-3 initial, with tau = 50). NaN lambda counts as not positive and is
    left out of the mean.

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
    lam = lam.to(torch.float64)
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
    mean = torch.where(chaotic, mean, torch.full_like(mean, float("nan")))
    return TransientChaos(length=length.to(torch.int64), chaotic=chaotic, mean_exponent=mean)


def summarize_chaos(result: TransientChaos) -> dict[str, Tensor]:
    """Population summary of :func:`transient_chaos` (Sec. II.B).

    Parameters
    ----------
    result : TransientChaos

    Returns
    -------
    dict of 0-d float64 Tensors
        ``fraction_never_chaotic``: fraction of samples with length 0 (paper:
        0.385 for initial networks, 0 pre-trained); ``mean_exponent``: mean of
        ``result.mean_exponent`` over chaotic samples (NaN if none).
    """
    chaotic = result.chaotic
    fraction = (~chaotic).to(torch.float64).mean()
    values = torch.where(chaotic, result.mean_exponent.to(torch.float64), torch.zeros_like(result.mean_exponent, dtype=torch.float64))
    mean = values.sum() / chaotic.sum().to(torch.float64)
    return {"fraction_never_chaotic": fraction, "mean_exponent": mean}
