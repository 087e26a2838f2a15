r"""Effective dimension of a state cloud (Inoue et al. 2021, Eq. 6; Fig. 2C bottom).

.. math:: N_\mathrm{eff} = \Bigl(\sum_i \tilde s_i^2\Bigr)^{-1}
          = \frac{(\sum_i s_i)^2}{\sum_i s_i^2}
          = \frac{\operatorname{tr}(G)^2}{\|G\|_F^2}

where s_i are the eigenvalues of the covariance of the flattened states across
samples, tilde s_i = s_i / sum_j s_j, and G = X_c X_c^T is the Gram matrix of
the centred samples (it has the same non-zero eigenvalues as X_c^T X_c, up to
the normalisation of the covariance, which cancels). The feature covariance
(up to 32 tokens x 1024 hidden) is never formed: the smaller of the two Gram
matrices is used.
"""

from __future__ import annotations

import torch
from torch import Tensor

from analyses._arrays import tensor

__all__ = ["effective_dimension", "participation_spectrum"]


def _centred_finite(states: Tensor) -> tuple[Tensor, Tensor]:
    """Flatten to float64 ``(S, F)``, centre over finite samples, zero the others."""
    states = tensor(states, "states", min_ndim=2)
    x = states.reshape(states.shape[0], -1).to(torch.float64)
    finite = torch.isfinite(x).all(dim=1, keepdim=True)  # (S, 1)
    x = torch.where(finite, x, torch.zeros_like(x))
    n = finite.sum(dtype=torch.float64)
    mean = x.sum(dim=0, keepdim=True) / n.clamp(min=1.0)
    xc = torch.where(finite, x - mean, torch.zeros_like(x))
    return xc, n


def _gram(xc: Tensor) -> Tensor:
    # Same non-zero spectrum either way; pick the smaller matrix (a shape test, not a value test).
    return xc @ xc.T if xc.shape[0] <= xc.shape[1] else xc.T @ xc


def effective_dimension(states: Tensor) -> Tensor:
    r"""Effective dimension N_eff of a cloud of states (Eq. 6).

    .. math:: N_\mathrm{eff} = \frac{(\sum_i s_i)^2}{\sum_i s_i^2}
              = \frac{\operatorname{tr}(G)^2}{\|G\|_F^2}, \quad G = X_c X_c^T

    Computed in float64 without host synchronisation. Samples with any
    non-finite value are excluded.

    Parameters
    ----------
    states : Tensor, shape ``(samples, *features)``
        One state per sample (e.g. 1,000 sentences x 32 tokens x 1024 hidden).

    Returns
    -------
    Tensor, 0-d, float64
        N_eff, between 1 and min(samples - 1, features); NaN when fewer than
        two finite samples or when the cloud has zero spread.
    """
    xc, n = _centred_finite(states)
    g = _gram(xc)
    trace = torch.diagonal(g).sum()
    result = trace.square() / g.square().sum()
    return torch.where(n >= 2, result, torch.full_like(result, float("nan")))


def participation_spectrum(states: Tensor) -> Tensor:
    r"""Normalised covariance eigenvalues :math:`\tilde s_i`, descending (Eq. 6).

    Via ``eigvalsh`` of the Gram matrix; for occasional inspection (this
    one is not meant for a per-step GPU loop).

    Parameters
    ----------
    states : Tensor, shape ``(samples, *features)``

    Returns
    -------
    Tensor, shape ``(min(samples, features),)``, float64
        Eigenvalues clamped at 0, normalised to sum 1, descending.
        Non-finite samples are excluded as in :func:`effective_dimension`.
    """
    xc, _ = _centred_finite(states)
    s = torch.linalg.eigvalsh(_gram(xc)).clamp(min=0.0).flip(0)
    return s / s.sum()
