"""Canonical-correlation and kernel-alignment similarity of two views of the same datapoints.

Views are (datapoints x neurons), see :mod:`analyses`. Used in the thesis (Saphra, Ch. 4: paper
Sec. 2.3, Figs. 3-5 and 8-11; background Sec. 2.4.2.1) to compare a layer across epochs, layers
and taggers. Every routine centres in float64. CCA, SVCCA, PWCCA and linear CKA work on (d x d)
matrices after one thin QR per view, so cost is O(n d^2) and memory O(n d); only RBF CKA forms
(n x n) Gram matrices. Views may be torch tensors (any device) or numpy arrays; results are
float64 tensors. Views with no more datapoints than neurons + 1 warn (:class:`FewDatapointsWarning`):
CCA is then 1 and biased CKA near 1 whatever they hold, and views given transposed look like that.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["CCAResult", "FewDatapointsWarning", "RankDeficientWarning", "SVCCAResult", "cca", "svcca", "pwcca", "linear_cka", "rbf_cka"]


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


class RankDeficientWarning(UserWarning):
    """A view's neurons are linearly dependent where the convention asked for needs them not to be."""


class FewDatapointsWarning(UserWarning):
    """The views have fewer datapoints (rows) than neurons (columns): often views given transposed."""


#: What too few datapoints do to each measure (the warning says the one of its caller).
FEW_DATAPOINTS_EFFECT = {
    "cca": "the canonical correlations are 1 whatever the views hold",
    "biased": "CKA is biased toward 1 whatever the views hold",
    "debiased": "the debiased CKA stays near 0 for unrelated views but its spread is large",
}


def _check_views(x: Any, y: Any, caller: str, min_rows: int = 2, effect: str = "cca") -> tuple[Tensor, Tensor]:
    """Views as tensors (numpy arrays are wrapped, not copied), after checking the (n, d) layout.

    Warns (:class:`FewDatapointsWarning`) when n <= d + 1 for the wider view's d neurons: n centred
    datapoints span at most n - 1 directions, so with n - 1 <= d every view spans the whole
    centred sample and CCA finds correlations of 1 whatever the views hold (n = d and n = d + 1
    included); biased CKA is pulled toward 1, debiased CKA keeps its mean but not its precision
    (:data:`FEW_DATAPOINTS_EFFECT`, ``effect``). Views of one layer given (neurons, datapoints), as in
    google/svcca, look like that and are accepted silently otherwise when both views have the
    same neuron count."""
    import torch  # lazy: torch
    from torch import Tensor  # lazy: torch

    x = x if isinstance(x, Tensor) else torch.as_tensor(x)
    y = y if isinstance(y, Tensor) else torch.as_tensor(y)
    if x.ndim != 2 or y.ndim != 2:
        raise ValueError(f"views must be 2-D (datapoints, neurons); got {tuple(x.shape)} and {tuple(y.shape)}")
    if x.shape[0] != y.shape[0]:
        hint = (" (they share the column count: are they (neurons, datapoints), as in google/svcca? "
                "transpose them)" if x.shape[1] == y.shape[1] else "")
        raise ValueError(f"views must share rows (datapoints); got shapes {tuple(x.shape)} and "
                         f"{tuple(y.shape)}{hint}")
    if x.shape[0] < min_rows:
        raise ValueError(f"need at least {min_rows} datapoints, got {x.shape[0]}")
    if x.device != y.device:
        raise ValueError(f"views on different devices: {x.device} and {y.device}")
    n, d = x.shape[0], max(x.shape[1], y.shape[1])
    if n <= d + 1:
        warnings.warn(f"{caller}: the views have {n} datapoints (rows) but {x.shape[1]} and {y.shape[1]} neurons "
                      f"(columns); with no more datapoints than neurons + 1, {FEW_DATAPOINTS_EFFECT[effect]}. "
                      f"Views transposed? They are (datapoints, neurons), the transpose of google/svcca's "
                      f"(neurons, datapoints).", FewDatapointsWarning, stacklevel=3)
    return x, y


def _default_rtol(x: Tensor) -> float:
    # Relative singular-value cut-off: d * eps of the *input* precision, so that
    # directions that vanish up to the input's rounding count as rank deficient.
    import torch  # lazy: torch

    eps = torch.finfo(x.dtype if x.is_floating_point() else torch.float64).eps
    return max(x.shape[1], 1) * eps


def _centre(x: Tensor) -> tuple[Tensor, Tensor]:
    import torch  # lazy: torch

    x64 = x.to(torch.float64)
    mean = x64.mean(dim=0)
    return x64 - mean, mean


def _basis(x: Tensor, rtol: float | None) -> _Basis:
    import torch  # lazy: torch

    xc, mean = _centre(x)
    q, r = torch.linalg.qr(xc, mode="reduced")
    u, s, vh = torch.linalg.svd(r, full_matrices=False)
    tol = (_default_rtol(x) if rtol is None else rtol) * s[0]
    rank = int((s > tol).sum()) if s.numel() else 0  # one host sync per view
    return _Basis(q=q, u=u, s=s, vh=vh, mean=mean, rank=rank)


def _canonical(bx: _Basis, by: _Basis, kx: int, ky: int) -> tuple[Tensor, Tensor, Tensor]:
    """SVD of U_x^T U_y for the top kx / ky left singular vectors (Bjorck-Golub)."""
    import torch  # lazy: torch

    cross = bx.q.T @ by.q  # (m1, m2): the only O(n) product
    # b.u[:, :k] holds the top-k left singular vectors in the q coordinates.
    m = bx.u[:, :kx].T @ cross @ by.u[:, :ky]
    a, rho, bh = torch.linalg.svd(m, full_matrices=False)
    return a, rho.clamp(0.0, 1.0), bh.T


def cca(x: Tensor | np.ndarray, y: Tensor | np.ndarray, *, rtol: float | None = None) -> CCAResult:
    """Canonical correlation analysis of two views.

    Finds u, v maximising rho = u^T K_xy v subject to u^T K_xx u = v^T K_yy v = 1
    (thesis Sec. 2.4.2.1, Eqs. 2.10-2.11), for all k = min(rank x, rank y)
    mutually uncorrelated pairs. Computed stably (Bjorck & Golub 1973): thin QR
    of each centred view, SVD of R to get orthonormal bases U_x, U_y of the
    column spaces, then rho = singular values of U_x^T U_y. Directions whose
    singular value is below ``rtol * s_max`` are treated as rank deficiency.

    Parameters
    ----------
    x : Tensor or ndarray, shape (n, d1)
    y : Tensor or ndarray, shape (n, d2)
        Two views of the same n datapoints; any float dtype and device.
    rtol : float, optional
        Relative rank tolerance; default ``d * eps(input dtype)`` per view.

    Returns
    -------
    CCAResult
        float64 tensors on the input device.
    """
    x, y = _check_views(x, y, "cca")
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
    import torch  # lazy: torch

    if b.rank == 0:
        return 0
    var = b.s[: b.rank].square()
    frac = torch.cumsum(var, 0) / var.sum()
    # Smallest k with cumulative fraction >= keep_variance (tiny slack for rounding).
    k = int((frac < keep_variance - 1e-12).sum()) + 1
    return min(k, b.rank)


def svcca(
    x: Tensor | np.ndarray, y: Tensor | np.ndarray, keep_variance: float = 0.99, *, rtol: float | None = None,
) -> SVCCAResult:
    """Singular Vector CCA (Raghu et al. 2017, arXiv 1706.05806, Sec. 2).

    1. SVD of each centred view; keep the smallest number of top singular
       directions whose squared singular values explain ``keep_variance`` of the
       total variance: x' = U_k S_k (thesis Ch. 4 Sec. 2.3 step 1).
    2. CCA of x' and y' (step 2); the score is the mean canonical correlation,
       mean_i rho_i over min(k_x, k_y) pairs (as in thesis Ch. 4 Figs. 3-5, 8-11).

    Parameters
    ----------
    x : Tensor or ndarray, shape (n, d1)
    y : Tensor or ndarray, shape (n, d2)
    keep_variance : float
        Fraction of variance kept per view, in (0, 1].
    rtol : float, optional
        Relative rank tolerance, as in :func:`cca`.

    Returns
    -------
    SVCCAResult
        ``mean`` is NaN if either view has zero variance.
    """
    import torch  # lazy: torch

    if not 0.0 < keep_variance <= 1.0:
        raise ValueError(f"keep_variance must be in (0, 1], got {keep_variance}")
    x, y = _check_views(x, y, "svcca")
    bx, by = _basis(x, rtol), _basis(y, rtol)
    kx, ky = _dims_for_variance(bx, keep_variance), _dims_for_variance(by, keep_variance)
    _, rho, _ = _canonical(bx, by, kx, ky)
    rho = rho[: min(kx, ky)]
    mean = rho.mean() if rho.numel() else torch.tensor(float("nan"), dtype=torch.float64, device=x.device)
    return SVCCAResult(mean=mean, correlations=rho, x_dims=kx, y_dims=ky)


def pwcca(
    x: Tensor | np.ndarray,
    y: Tensor | np.ndarray,
    *,
    weights_from: Literal["x", "y"] | None = None,
    convention: Literal["paper", "google"] = "paper",
    rtol: float | None = None,
) -> Tensor:
    """Projection-weighted CCA (Morcos et al. 2018, arXiv 1806.05759, Sec. 3.1).

    pwcca = sum_i alpha_i rho_i / sum_i alpha_i, rho_i the canonical correlations. The default,
    ``convention="paper"``, follows the paper: alpha_i = sum_j |<h_i, z_j>|, h_i the i-th
    canonical variate of the weighting view (unit norm over the n datapoints) and z_j its j-th
    *centred* neuron; the weighting view is x unless ``weights_from="y"``. Since h_i = Q U_r a_i,
    the projections are a_i^T S_r V_r^T, so no (n x k) variates are formed.

    ``convention="google"`` reproduces ``compute_pwcca`` of github.com/google/svcca
    (``pwcca.py``, epsilon = 0): the weighting view is the one with fewer neurons (x on a tie);
    its "directions" are u_i^T z_c + mu, with u_i the left singular vectors of
    S_xx^{-1/2} S_xy S_yy^{-1/2} in neuron coordinates (no S_xx^{-1/2} applied) and the neuron
    means mu added back; they are orthonormalised in order (QR) and projected onto the neurons
    *without* centring. Where that code reads ``acts1`` for the second view (the IndexError of
    google/svcca PR #9) this uses the second view, as intended. It needs k = d, the weighting
    view's neuron count; NaN otherwise, with a :class:`RankDeficientWarning` (pwcca.py would go on
    with its epsilon, its number then depending on epsilon). Adding mu back makes pwcca.py's value depend on the
    arbitrary sign LAPACK gives each u_i whenever the views are not centred (its value can change
    when x and y swap places), so here each u_i is signed to make its largest-magnitude entry
    positive (as scikit-learn's ``svd_flip``). On column-centred views signs do not matter and
    the value is pwcca.py's exactly.

    Parameters
    ----------
    x : Tensor or ndarray, shape (n, d1)
    y : Tensor or ndarray, shape (n, d2)
    weights_from : {"x", "y"}, optional
        View whose neurons weight the correlations; default "x" for "paper" and the view with
        fewer neurons for "google".
    convention : {"paper", "google"}
        Weighting formula, as above.
    rtol : float, optional
        Relative rank tolerance, as in :func:`cca`.

    Returns
    -------
    Tensor, shape ()
        float64; NaN if either view has zero variance. Not symmetric in x, y.
    """
    import torch  # lazy: torch

    if weights_from not in ("x", "y", None):
        raise ValueError(f"weights_from must be 'x' or 'y', got {weights_from!r}")
    if convention not in ("paper", "google"):
        raise ValueError(f"convention must be 'paper' or 'google', got {convention!r}")
    x, y = _check_views(x, y, "pwcca")
    if weights_from is None:
        weights_from = "x" if convention == "paper" or x.shape[1] <= y.shape[1] else "y"
    if weights_from == "y":
        x, y = y, x
    bx, by = _basis(x, rtol), _basis(y, rtol)
    k = min(bx.rank, by.rank)
    nan = torch.tensor(float("nan"), dtype=torch.float64, device=x.device)
    if k == 0:
        return nan
    if convention == "google" and k < x.shape[1]:
        warnings.warn(f"pwcca(convention='google'): the weighting view has {x.shape[1]} neurons but rank {k} (a "
                      "constant or repeated neuron); google/svcca's pwcca.py goes on with its epsilon added to the "
                      "covariances, so its number depends on epsilon: this returns NaN. Drop such neurons, or use "
                      "convention='paper'", RankDeficientWarning, stacklevel=2)
        return nan
    a, rho, _ = _canonical(bx, by, bx.rank, by.rank)
    if convention == "paper":
        proj = a[:, :k].T @ (bx.s[: bx.rank, None] * bx.vh[: bx.rank])  # (k, d): <h_i, z_j>
    else:
        # S_xx^{-1/2} S_xy S_yy^{-1/2} = (V_x a) diag(rho) (V_y b)^T, so u = V_x a (d x d).
        u = bx.vh[: bx.rank].T @ a[:, :k]
        peak = u.abs().argmax(dim=0)
        u = u * torch.sign(u[peak, torch.arange(k, device=u.device)])
        directions = (x.to(torch.float64) - bx.mean) @ u + bx.mean  # (n, k)
        p, _ = torch.linalg.qr(directions, mode="reduced")
        proj = p.T @ x.to(torch.float64)  # uncentred neurons
    alpha = proj.abs().sum(dim=1)
    return (alpha * rho[:k]).sum() / alpha.sum()


def _debiased_dot(xty: Tensor, rows_x: Tensor, rows_y: Tensor, n: int) -> Tensor:
    # n (n - 3) x the unbiased HSIC estimator (Song et al. 2012) of the linear kernels of
    # centred X, Y: tr(K L) - n/(n-2) diag(K).diag(L) + tr K tr L / ((n-1)(n-2)).
    return xty - n / (n - 2) * (rows_x @ rows_y) + rows_x.sum() * rows_y.sum() / ((n - 1) * (n - 2))


def linear_cka(x: Tensor | np.ndarray, y: Tensor | np.ndarray, *, debiased: bool = False) -> Tensor:
    """Linear centred kernel alignment (Kornblith et al. 2019, arXiv 1905.00414).

    CKA = ||Y^T X||_F^2 / (||X^T X||_F ||Y^T Y||_F) for column-centred X, Y: the
    linear-kernel HSIC identity tr(K H L H) = ||Y^T X||_F^2 for K = X X^T,
    L = Y Y^T (Sec. 3, Eq. 1 and the CKA normalisation; "Linear CKA" in Table 1),
    evaluated in feature space with (d x d) Grams only.

    ``debiased=True`` replaces each HSIC by the unbiased estimator of Song et al. (2012), as in
    Nguyen, Raghu & Kornblith (2021, "Do wide and deep networks learn the same things?", arXiv
    2010.15327, Sec. 3): with
    K~ = K - diag(K), HSIC_1 = [tr(K~ L~) + 1^T K~ 1 1^T L~ 1 / ((n-1)(n-2))
    - 2/(n-2) 1^T K~ L~ 1] / (n(n-3)), still evaluated in feature space. It removes the
    positive bias of CKA at few datapoints per neuron; it may be slightly negative.

    Parameters
    ----------
    x : Tensor or ndarray, shape (n, d1)
    y : Tensor or ndarray, shape (n, d2)
    debiased : bool
        Use the unbiased HSIC estimator (needs n >= 4).

    Returns
    -------
    Tensor, shape ()
        float64, in [0, 1] unless debiased; NaN if either view has zero variance.
    """
    import torch  # lazy: torch

    x, y = _check_views(x, y, "linear_cka", min_rows=4 if debiased else 2, effect="debiased" if debiased else "biased")
    xc, _ = _centre(x)
    yc, _ = _centre(y)
    cross = torch.linalg.matrix_norm(yc.T @ xc).square()
    self_x = torch.linalg.matrix_norm(xc.T @ xc)
    self_y = torch.linalg.matrix_norm(yc.T @ yc)
    if not debiased:
        return cross / (self_x * self_y)
    n = x.shape[0]
    rows_x, rows_y = xc.square().sum(dim=1), yc.square().sum(dim=1)
    cross = _debiased_dot(cross, rows_x, rows_y, n)
    self_x = _debiased_dot(self_x.square(), rows_x, rows_x, n).sqrt()
    self_y = _debiased_dot(self_y.square(), rows_y, rows_y, n).sqrt()
    return cross / (self_x * self_y)


def _median(v: Tensor) -> Tensor:
    # numpy's median (mean of the two middle values for an even count); torch.median takes the
    # lower one and torch.quantile refuses more than 2^24 elements.
    import torch  # lazy: torch

    v = v.reshape(-1)
    m = v.numel()
    lower = torch.kthvalue(v, (m + 1) // 2).values
    return lower if m % 2 else 0.5 * (lower + torch.kthvalue(v, m // 2 + 1).values)


def _rbf_gram(x: Tensor, sigma_fraction: float) -> Tensor:
    import torch  # lazy: torch

    xc, _ = _centre(x)  # distances are translation invariant; centring only helps rounding
    sq = xc.square().sum(dim=1)
    d2 = (sq[:, None] + sq[None, :] - 2.0 * (xc @ xc.T)).clamp_min(0.0)
    d2.fill_diagonal_(0.0)
    # sigma^2 = fraction^2 * median of the squared distances over all n^2 pairs, diagonal
    # included (the gram_rbf of Kornblith et al.'s demo notebook).
    return torch.exp(-d2 / (2.0 * sigma_fraction**2 * _median(d2)))


def _centre_gram(k: Tensor, debiased: bool) -> Tensor:
    n = k.shape[0]
    if not debiased:  # H K H
        means = k.mean(dim=0)
        means = means - means.mean() / 2
        return k - means[:, None] - means[None, :]
    # U-centring (Szekely & Rizzo 2014): <U(K), U(L)>_F = n (n - 3) HSIC_1(K, L).
    k = k.clone()
    k.fill_diagonal_(0.0)
    means = k.sum(dim=0) / (n - 2)
    means = means - means.sum() / (2 * (n - 1))
    k = k - means[:, None] - means[None, :]
    k.fill_diagonal_(0.0)
    return k


def rbf_cka(
    x: Tensor | np.ndarray, y: Tensor | np.ndarray, *, sigma_fraction: float = 0.8, debiased: bool = False,
) -> Tensor:
    """CKA with Gaussian RBF kernels (Kornblith et al. 2019, arXiv 1905.00414, Sec. 3).

    k(x_i, x_j) = exp(-||x_i - x_j||^2 / (2 sigma^2)) with the bandwidth sigma a fraction of the
    median distance between datapoints (sigma^2 = fraction^2 x the median of all n^2 squared
    distances, as in the paper's demo notebook); CKA = HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L))
    with HSIC from the centred Grams H K H, or with ``debiased=True`` the unbiased estimator of
    Song et al. (2012), as in :func:`linear_cka`. The default fraction 0.8 is the largest of
    those compared in the paper (0.2, 0.4, 0.8); the notebook's ``gram_rbf`` defaults to 1.0.
    Invariant to translation, rotation and isotropic scaling of either view.

    Forms (n x n) Grams: memory O(n^2), time O(n^2 (d + 1)).

    Parameters
    ----------
    x : Tensor or ndarray, shape (n, d1)
    y : Tensor or ndarray, shape (n, d2)
    sigma_fraction : float
        sigma / median distance; positive.
    debiased : bool
        Use the unbiased HSIC estimator (needs n >= 4).

    Returns
    -------
    Tensor, shape ()
        float64, in [0, 1] unless debiased; NaN if either view has zero variance.
    """
    import torch  # lazy: torch

    if not sigma_fraction > 0:
        raise ValueError(f"sigma_fraction must be positive, got {sigma_fraction}")
    x, y = _check_views(x, y, "rbf_cka", min_rows=4 if debiased else 2, effect="debiased" if debiased else "biased")
    kx = _centre_gram(_rbf_gram(x, sigma_fraction), debiased)
    ky = _centre_gram(_rbf_gram(y, sigma_fraction), debiased)
    return (kx * ky).sum() / (torch.linalg.matrix_norm(kx) * torch.linalg.matrix_norm(ky))
