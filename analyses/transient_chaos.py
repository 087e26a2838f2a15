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

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from analyses._arrays import tensor

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["TransientChaos", "transient_chaos", "transient_chaos_of_chunks", "summarize_chaos"]


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
    import torch  # lazy: torch

    lam = tensor(lam, "lam (..., intervals)", min_ndim=1).to(torch.float64)
    if lam.shape[-1] == 0:  # no interval: nothing measured
        nan = torch.full(lam.shape[:-1], float("nan"), dtype=torch.float64, device=lam.device)
        no = torch.zeros(lam.shape[:-1], dtype=torch.bool, device=lam.device)
        return TransientChaos(length=nan, chaotic=no, mean_exponent=nan.clone(), censored=no.clone(), measured=no.clone())
    return transient_chaos_of_chunks([lam], tau)


def transient_chaos_of_chunks(chunks: Iterable[Tensor], tau: int) -> TransientChaos:
    """:func:`transient_chaos` of the series given as consecutive chunks along its interval axis.

    Memory is that of one chunk and a few numbers per sample, whatever the run's length: a
    million-step run need not be held at once. One chunk gives :func:`transient_chaos`'s values
    bit for bit; several sum the mean exponent chunk by chunk (its last bits may differ).
    """
    import torch  # lazy: torch

    if tau < 1:
        raise ValueError(f"tau must be >= 1, got {tau}")
    seen = 0
    state = None
    last = None
    for lam in chunks:
        lam = tensor(lam, "lam (..., intervals)", min_ndim=1).to(torch.float64)
        n = lam.shape[-1]
        if n == 0:
            continue
        if state is None:
            zeros = torch.zeros(lam.shape[:-1], dtype=torch.float64, device=lam.device)
            state = {"chaotic": torch.zeros(lam.shape[:-1], dtype=torch.bool, device=lam.device),
                     "j_last": torch.zeros(lam.shape[:-1], dtype=torch.int64, device=lam.device),
                     "total": zeros, "count": torch.zeros_like(zeros, dtype=torch.int64),
                     "total_all": zeros.clone(), "count_all": torch.zeros_like(zeros, dtype=torch.int64)}
        positive = lam > 0  # NaN > 0 is False
        here = positive.any(dim=-1)
        # index in this chunk of its last positive interval: first maximum of the reversed mask
        j_here = (n - 1) - positive.flip(-1).to(torch.uint8).argmax(dim=-1)
        finite = ~torch.isnan(lam)
        j = torch.arange(n, device=lam.device)
        use = (j <= j_here.unsqueeze(-1)) & finite
        upto = torch.where(use, lam, torch.zeros_like(lam)).sum(dim=-1)
        state["total"] = torch.where(here, state["total_all"] + upto, state["total"])
        state["count"] = torch.where(here, state["count_all"] + use.sum(dim=-1), state["count"])
        state["j_last"] = torch.where(here, seen + j_here, state["j_last"])
        state["chaotic"] |= here
        state["total_all"] = state["total_all"] + torch.where(finite, lam, torch.zeros_like(lam)).sum(dim=-1)
        state["count_all"] = state["count_all"] + finite.sum(dim=-1)
        seen += n
        last = lam[..., -1]
    if state is None:
        raise ValueError("lam has no intervals")
    chaotic = state["chaotic"]
    length = torch.where(chaotic, tau * (state["j_last"] + 1), torch.zeros_like(state["j_last"]))
    mean = state["total"] / state["count"].to(torch.float64)
    measured = ~torch.isnan(last)
    nan = torch.full_like(mean, float("nan"))
    mean = torch.where(chaotic & measured, mean, nan)
    length = torch.where(measured, length.to(torch.float64), nan)
    censored = (last > 0) & measured
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
    import torch  # lazy: torch

    chaotic = result.chaotic
    never = (~chaotic & result.measured).to(torch.float64).sum()
    fraction = never / result.measured.sum().to(torch.float64)
    values = torch.where(chaotic, result.mean_exponent.to(torch.float64), torch.zeros_like(result.mean_exponent, dtype=torch.float64))
    mean = values.sum() / chaotic.sum().to(torch.float64)
    return {"fraction_never_chaotic": fraction, "mean_exponent": mean}
