"""Canonical-correlation similarity of two views of the same datapoints.

Rows are datapoints (e.g. word tokens), columns are neurons. Used in the thesis
(Saphra, Ch. 4: paper Sec. 2.3, Figs. 3-5 and 8-11; background Sec. 2.4.2.1)
to compare a layer across epochs, layers and taggers. Every routine centres in float64 and works on (d x d)
matrices after one thin QR per view, so cost is O(n d^2) and memory O(n d);
nothing of size (n x n) is formed. Tensors may live on any device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

__all__ = ["CCAResult", "SVCCAResult", "cca", "svcca", "pwcca", "linear_cka"]


@dataclass(frozen=True)
class CCAResult:
    """Canonical correlations and directions of two views.

    Attributes
    ----------
    correlations : Tensor, shape (k,)
        Canonical correlations, descending, in [0, 1]; k = min(rank x, rank y).
    x_weights : Tensor, shape (d1, k)
        Directions u_i: canonical variates are ``(x - x_mean) @ x_weights``,
        with unit sample variance (u^T K_xx u = 1, thesis Eq. 2.11).
    y_weights : Tensor, shape (d2, k)
        Same for y.
    x_mean, y_mean : Tensor, shapes (d1,), (d2,)
        Column means removed before the fit.
    """

    correlations: Tensor
    x_weights: Tensor
    y_weights: Tensor
    x_mean: Tensor
    y_mean: Tensor


@dataclass(frozen=True)
class SVCCAResult:
    """SVCCA similarity (Raghu et al. 2017).

    Attributes
    ----------
    mean : Tensor, shape ()
        Mean of ``correlations``: the SVCCA score.
    correlations : Tensor, shape (min(x_dims, y_dims),)
        Canonical correlations of the SVD-reduced views, descending.
    x_dims, y_dims : int
        Singular directions kept for each view.
    """

    mean: Tensor
    correlations: Tensor
    x_dims: int
    y_dims: int


@dataclass(frozen=True)
class _Basis:
    # Centred view xc = q @ u @ diag(s) @ vh (thin QR of xc, then SVD of R).
    q: Tensor  # (n, m), orthonormal columns, m = min(n, d)
    u: Tensor  # (m, m)
    s: Tensor  # (m,), singular values of xc, descending
    vh: Tensor  # (m, d)
    mean: Tensor  # (d,)
    rank: int


def _check_views(x: Tensor, y: Tensor) -> None:
    if x.ndim != 2 or y.ndim != 2:
        raise ValueError(f"views must be 2-D (n, d); got {tuple(x.shape)} and {tuple(y.shape)}")
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"views must share rows (datapoints); got {x.shape[0]} and {y.shape[0]}")
    if x.shape[0] < 2:
        raise ValueError("need at least two datapoints")
    if x.device != y.device:
        raise ValueError(f"views on different devices: {x.device} and {y.device}")


def _default_rtol(x: Tensor) -> float:
    # Relative singular-value cut-off: d * eps of the *input* precision, so that
    # directions that vanish up to the input's rounding count as rank deficient.
    eps = torch.finfo(x.dtype if x.is_floating_point() else torch.float64).eps
    return max(x.shape[1], 1) * eps


def _centre(x: Tensor) -> tuple[Tensor, Tensor]:
    x64 = x.to(torch.float64)
    mean = x64.mean(dim=0)
    return x64 - mean, mean


def _basis(x: Tensor, rtol: float | None) -> _Basis:
    xc, mean = _centre(x)
    q, r = torch.linalg.qr(xc, mode="reduced")
    u, s, vh = torch.linalg.svd(r, full_matrices=False)
    tol = (_default_rtol(x) if rtol is None else rtol) * s[0]
    rank = int((s > tol).sum()) if s.numel() else 0  # one host sync per view
    return _Basis(q=q, u=u, s=s, vh=vh, mean=mean, rank=rank)


def _canonical(bx: _Basis, by: _Basis, kx: int, ky: int) -> tuple[Tensor, Tensor, Tensor]:
    """SVD of U_x^T U_y for the top kx / ky left singular vectors (Bjorck-Golub)."""
    cross = bx.q.T @ by.q  # (m1, m2): the only O(n) product
    # b.u[:, :k] holds the top-k left singular vectors in the q coordinates.
    m = bx.u[:, :kx].T @ cross @ by.u[:, :ky]
    a, rho, bh = torch.linalg.svd(m, full_matrices=False)
    return a, rho.clamp(0.0, 1.0), bh.T


def cca(x: Tensor, y: Tensor, *, rtol: float | None = None) -> CCAResult:
    """Canonical correlation analysis of two views.

    Finds u, v maximising rho = u^T K_xy v subject to u^T K_xx u = v^T K_yy v = 1
    (thesis Sec. 2.4.2.1, Eqs. 2.10-2.11), for all k = min(rank x, rank y)
    mutually uncorrelated pairs. Computed stably (Bjorck & Golub 1973): thin QR
    of each centred view, SVD of R to get orthonormal bases U_x, U_y of the
    column spaces, then rho = singular values of U_x^T U_y. Directions whose
    singular value is below ``rtol * s_max`` are treated as rank deficiency.

    Parameters
    ----------
    x : Tensor, shape (n, d1)
    y : Tensor, shape (n, d2)
        Two views of the same n datapoints; any float dtype and device.
    rtol : float, optional
        Relative rank tolerance; default ``d * eps(input dtype)`` per view.

    Returns
    -------
    CCAResult
        float64 tensors on the input device.
    """
    _check_views(x, y)
    bx, by = _basis(x, rtol), _basis(y, rtol)
    n = x.shape[0]
    k = min(bx.rank, by.rank)
    a, rho, b = _canonical(bx, by, bx.rank, by.rank)
    scale = (n - 1) ** 0.5
    # xc @ vh_r^T diag(1/s_r) = q @ u_r, so this maps xc onto unit-variance variates.
    x_w = bx.vh[: bx.rank].T @ (a[:, :k] / bx.s[: bx.rank, None]) * scale
    y_w = by.vh[: by.rank].T @ (b[:, :k] / by.s[: by.rank, None]) * scale
    return CCAResult(correlations=rho[:k], x_weights=x_w, y_weights=y_w, x_mean=bx.mean, y_mean=by.mean)


def _dims_for_variance(b: _Basis, keep_variance: float) -> int:
    if b.rank == 0:
        return 0
    var = b.s[: b.rank].square()
    frac = torch.cumsum(var, 0) / var.sum()
    # Smallest k with cumulative fraction >= keep_variance (tiny slack for rounding).
    k = int((frac < keep_variance - 1e-12).sum()) + 1
    return min(k, b.rank)


def svcca(x: Tensor, y: Tensor, keep_variance: float = 0.99, *, rtol: float | None = None) -> SVCCAResult:
    """Singular Vector CCA (Raghu et al. 2017, arXiv 1706.05806, Sec. 2).

    1. SVD of each centred view; keep the smallest number of top singular
       directions whose squared singular values explain ``keep_variance`` of the
       total variance: x' = U_k S_k (thesis Ch. 4 Sec. 2.3 step 1).
    2. CCA of x' and y' (step 2); the score is the mean canonical correlation,
       mean_i rho_i over min(k_x, k_y) pairs (as in thesis Ch. 4 Figs. 3-5, 8-11).

    Parameters
    ----------
    x : Tensor, shape (n, d1)
    y : Tensor, shape (n, d2)
    keep_variance : float
        Fraction of variance kept per view, in (0, 1].
    rtol : float, optional
        Relative rank tolerance, as in :func:`cca`.

    Returns
    -------
    SVCCAResult
        ``mean`` is NaN if either view has zero variance.
    """
    if not 0.0 < keep_variance <= 1.0:
        raise ValueError(f"keep_variance must be in (0, 1], got {keep_variance}")
    _check_views(x, y)
    bx, by = _basis(x, rtol), _basis(y, rtol)
    kx, ky = _dims_for_variance(bx, keep_variance), _dims_for_variance(by, keep_variance)
    _, rho, _ = _canonical(bx, by, kx, ky)
    rho = rho[: min(kx, ky)]
    mean = rho.mean() if rho.numel() else torch.tensor(float("nan"), dtype=torch.float64, device=x.device)
    return SVCCAResult(mean=mean, correlations=rho, x_dims=kx, y_dims=ky)


def pwcca(
    x: Tensor,
    y: Tensor,
    *,
    weights_from: Literal["x", "y"] = "x",
    rtol: float | None = None,
) -> Tensor:
    """Projection-weighted CCA (Morcos et al. 2018, arXiv 1806.05759, Sec. 3.1).

    pwcca = sum_i alpha_i rho_i / sum_i alpha_i, with alpha_i = sum_j |<h_i, z_j>|:
    h_i the i-th canonical variate of the weighting view (unit norm over the n
    datapoints) and z_j its j-th centred neuron. Since h_i = Q U_r a_i, the
    projections are a_i^T S_r V_r^T, so no (n x k) variates are formed.

    Parameters
    ----------
    x : Tensor, shape (n, d1)
    y : Tensor, shape (n, d2)
    weights_from : {"x", "y"}
        View whose neurons weight the correlations (the paper's L1; Morcos'
        reference code instead uses whichever view has fewer neurons).
    rtol : float, optional
        Relative rank tolerance, as in :func:`cca`.

    Returns
    -------
    Tensor, shape ()
        float64; NaN if either view has zero variance. Not symmetric in x, y.
    """
    if weights_from not in ("x", "y"):
        raise ValueError(f"weights_from must be 'x' or 'y', got {weights_from!r}")
    _check_views(x, y)
    bx, by = _basis(x, rtol), _basis(y, rtol)
    if weights_from == "y":
        bx, by = by, bx
    k = min(bx.rank, by.rank)
    if k == 0:
        return torch.tensor(float("nan"), dtype=torch.float64, device=x.device)
    a, rho, _ = _canonical(bx, by, bx.rank, by.rank)
    proj = a[:, :k].T @ (bx.s[: bx.rank, None] * bx.vh[: bx.rank])  # (k, d): <h_i, z_j>
    alpha = proj.abs().sum(dim=1)
    return (alpha * rho[:k]).sum() / alpha.sum()


def linear_cka(x: Tensor, y: Tensor) -> Tensor:
    """Linear centred kernel alignment (Kornblith et al. 2019, arXiv 1905.00414).

    CKA = ||Y^T X||_F^2 / (||X^T X||_F ||Y^T Y||_F) for column-centred X, Y: the
    linear-kernel HSIC identity tr(K H L H) = ||Y^T X||_F^2 for K = X X^T,
    L = Y Y^T (Sec. 3, Eq. 1 and the CKA normalisation; "Linear CKA" in Table 1),
    evaluated in feature space with (d x d) Grams only.

    Parameters
    ----------
    x : Tensor, shape (n, d1)
    y : Tensor, shape (n, d2)

    Returns
    -------
    Tensor, shape ()
        float64 in [0, 1]; NaN if either view has zero variance.
    """
    _check_views(x, y)
    xc, _ = _centre(x)
    yc, _ = _centre(y)
    cross = torch.linalg.matrix_norm(yc.T @ xc).square()
    return cross / (torch.linalg.matrix_norm(xc.T @ xc) * torch.linalg.matrix_norm(yc.T @ yc))
