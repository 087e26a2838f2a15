r"""Principal component projection of a trajectory (Inoue et al. 2021, Fig. 4C)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from analyses._arrays import tensor

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["pca_projection"]


def pca_projection(points: Tensor, n_components: int = 2) -> tuple[Tensor, Tensor]:
    r"""Project points onto their top principal axes (Fig. 4C).

    .. math:: X_c = X - \bar X = U S V^T, \quad
              \mathrm{projection} = X_c V_{:, :c} = U_{:, :c} S_{:c}, \quad
              \mathrm{ratio}_i = s_i^2 / \sum_j s_j^2

    Computed in float64 from the eigendecomposition of the smaller of the two
    Gram matrices (X_c X_c^T or X_c^T X_c). Sign convention: each principal
    axis (column of V) has its largest-magnitude coordinate positive.

    Parameters
    ----------
    points : Tensor, shape ``(n_points, *features)``
        E.g. the states of one trajectory at successive times.
    n_components : int
        Number of principal axes, at most ``min(n_points, features)``.

    Returns
    -------
    projection : Tensor, shape ``(n_points, n_components)``, float64
    explained_variance_ratio : Tensor, shape ``(n_components,)``, float64
    """
    import torch  # lazy: torch

    points = tensor(points, "points (n_points, *features)", min_ndim=2)
    x = points.reshape(points.shape[0], -1).to(torch.float64)
    n, f = x.shape
    if not 1 <= n_components <= min(n, f):
        raise ValueError(f"n_components must be in [1, {min(n, f)}], got {n_components}")
    xc = x - x.mean(dim=0, keepdim=True)
    if n <= f:
        evals, u = torch.linalg.eigh(xc @ xc.T)  # ascending
        evals = evals.flip(0).clamp(min=0.0)
        u = u.flip(1)[:, :n_components]
        top = evals[:n_components]
        loadings = xc.T @ u  # (f, c), proportional to V with positive factors s_i
        projection = u * top.sqrt()
    else:
        evals, v = torch.linalg.eigh(xc.T @ xc)
        evals = evals.flip(0).clamp(min=0.0)
        loadings = v.flip(1)[:, :n_components]
        top = evals[:n_components]
        projection = xc @ loadings
    idx = loadings.abs().argmax(dim=0, keepdim=True)
    sign = torch.sign(torch.gather(loadings, 0, idx))
    sign = torch.where(sign == 0, torch.ones_like(sign), sign)
    ratio = top / evals.sum()
    return projection * sign, ratio
