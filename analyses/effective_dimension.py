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

For a cloud split into parts (sample shards run on different workers), N_eff of the whole cloud
follows exactly from each part's sufficient statistics (count n, sum of states, sum of outer
products; :func:`cloud_statistics`), added up and combined by
:func:`effective_dimension_from_statistics`: the scatter of the centred cloud is
sum_k X_k^T X_k - (sum_k s_k)(sum_k s_k)^T / n. The outer products are features x features, so
this costs F^2 per kept step (fine for maps and small models, not for 32 x 1024 states).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analyses._arrays import tensor

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["cloud_statistics", "effective_dimension", "effective_dimension_from_statistics",
           "participation_spectrum"]


def _centred_finite(states: Tensor) -> tuple[Tensor, Tensor]:
    """Flatten to float64 ``(S, F)``, centre over finite samples, zero the others."""
    import torch  # lazy: torch

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
    import torch  # lazy: torch

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
    import torch  # lazy: torch

    xc, _ = _centred_finite(states)
    s = torch.linalg.eigvalsh(_gram(xc)).clamp(min=0.0).flip(0)
    return s / s.sum()


def cloud_statistics(states: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Sufficient statistics of a part of a cloud, for :func:`effective_dimension_from_statistics`.

    Parameters
    ----------
    states : Tensor, shape ``(samples, *features)``
        Samples with any non-finite value are left out, as in :func:`effective_dimension`.

    Returns
    -------
    (n, total, scatter) : float64 Tensors of shapes ``()``, ``(F,)``, ``(F, F)``
        The count of finite samples, their sum and the sum of their outer products x x^T.
    """
    import torch  # lazy: torch

    states = tensor(states, "states", min_ndim=2)
    x = states.reshape(states.shape[0], -1).to(torch.float64)
    finite = torch.isfinite(x).all(dim=1, keepdim=True)
    x = torch.where(finite, x, torch.zeros_like(x))
    return finite.sum(dtype=torch.float64), x.sum(dim=0), x.T @ x


def effective_dimension_from_statistics(n: Tensor, total: Tensor, scatter: Tensor) -> Tensor:
    r"""N_eff (Eq. 6) of a cloud from its summed sufficient statistics (:func:`cloud_statistics`).

    .. math:: C = \sum_k X_k^T X_k - \frac{1}{n} s s^T, \quad
              N_\mathrm{eff} = \frac{\operatorname{tr}(C)^2}{\|C\|_F^2}

    Parameters
    ----------
    n, total, scatter : Tensors of shapes ``(*batch)``, ``(*batch, F)``, ``(*batch, F, F)``
        Summed over the parts of the cloud (any leading batch dims, e.g. steps).

    Returns
    -------
    Tensor, shape ``(*batch)``, float64
        Equal to :func:`effective_dimension` of the whole cloud up to rounding; NaN when fewer than
        two finite samples.
    """
    import torch  # lazy: torch

    n, total, scatter = (torch.as_tensor(a, dtype=torch.float64) for a in (n, total, scatter))
    c = scatter - total[..., :, None] * total[..., None, :] / n.clamp(min=1.0)[..., None, None]
    result = torch.diagonal(c, dim1=-2, dim2=-1).sum(-1).square() / c.square().sum((-2, -1))
    return torch.where(n >= 2, result, torch.full_like(result, float("nan")))
