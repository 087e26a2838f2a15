r"""Handwriting task (Inoue et al. 2021, Fig. 3C and Appendix E).

A linear regression with two outputs maps the trajectory x_t, t in [t0, t0 + dT], to the pen
directions v_t = [dx_t, dy_t] of the letter "U" for unrelated sentence pairs and "S" for similar
ones; the pen position is p_t = sum_{k=t0}^{t} v_k. The error is

.. math:: \mathrm{NMSE}(y, d) = \frac{\sum_{t \in [t_0, t_0+\Delta T]} \|y(t) - d(t)\|^2}
                                     {\sum_{t \in [t_0, t_0+\Delta T]} \|d(t)\|^2}

(Appendix E), summed here over the held-out pairs too.

:func:`letter_path` takes a letter's outline from a font through matplotlib's ``TextPath`` (the
paper: Arial), :func:`pen_directions` resamples it to dT + 1 points equally spaced along its
length (Appendix E: "interpolating the paths with dT + 1 points"), q_0..q_dT, and returns
v_{t0+i} = q_i - q_{i-1} with v_{t0} = 0 (the pen starts on the letter's first point, so
p_{t0+i} = q_i - q_0 retraces the letter). :func:`nmse_grid` fits the regression (least squares
with a bias, a ridge of ``ridge`` times the mean diagonal of the Gram matrix for conditioning) for
every (t0, dT) of a grid from per-step sufficient statistics, on the device.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np

from analyses._arrays import float64_numpy

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["letter_path", "nmse", "nmse_grid", "pen_directions"]


def letter_path(letter: str, font: str = "Arial") -> tuple[np.ndarray, str]:
    """``(vertices (n, 2), font used)``: the longest closed contour of ``letter``'s outline in
    ``font`` (matplotlib's ``TextPath``, curves flattened), scaled to unit height. A font that is
    not installed falls back to matplotlib's default (DejaVu Sans, shipped with matplotlib); the
    name of the font actually used is returned."""
    from matplotlib.font_manager import FontProperties, findfont, get_font  # lazy: matplotlib
    from matplotlib.textpath import TextPath  # lazy: matplotlib

    log = logging.getLogger("matplotlib.font_manager")
    level = log.level
    log.setLevel(logging.ERROR)  # "findfont: Font family 'Arial' not found": the caller records the font used
    try:
        file = findfont(FontProperties(family=font), fallback_to_default=True)
    finally:
        log.setLevel(level)
    polygons = TextPath((0, 0), letter, size=1, prop=FontProperties(fname=file)).to_polygons()
    if not polygons:
        raise ValueError(f"letter {letter!r} has no outline in {file}")
    contour = max(polygons, key=lambda p: np.linalg.norm(np.diff(p, axis=0), axis=1).sum())
    contour = contour - contour.min(axis=0)
    return contour / np.ptp(contour[:, 1]), get_font(file).family_name


def pen_directions(path: np.ndarray, n_points: int) -> np.ndarray:
    """``(n_points, 2)``: v_0 = 0 and v_i = q_i - q_{i-1}, where q are ``n_points`` points spaced
    equally along ``path`` (linear interpolation by arc length, both ends included)."""
    seg = np.linalg.norm(np.diff(path, axis=0), axis=1)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    at = np.linspace(0.0, s[-1], n_points)
    q = np.stack([np.interp(at, s, path[:, j]) for j in range(2)], axis=1)
    return np.diff(q, axis=0, prepend=q[:1])


def nmse(y: np.ndarray | Tensor, d: np.ndarray | Tensor) -> float:
    """The formula of Appendix E on arrays of pen directions (any shape ending in 2)."""
    y, d = float64_numpy(y), float64_numpy(d)
    return float(((y - d) ** 2).sum() / (d ** 2).sum())


def _with_bias(x: Tensor) -> tuple[Tensor, Tensor]:
    import torch  # lazy: torch

    finite = torch.isfinite(x).all(dim=-1)
    xb = torch.cat([x.double(), torch.ones(*x.shape[:-1], 1, dtype=torch.float64, device=x.device)], dim=-1)
    return torch.where(finite[..., None], xb, torch.zeros((), dtype=torch.float64, device=x.device)), finite


def nmse_grid(x: Tensor, letter: Tensor, train: Tensor, targets: dict[int, Tensor], t0s: list[int], dts: list[int],
              first: int, ridge: float = 1e-6, keep: tuple[int, int] | None = None) -> tuple[Tensor, Tensor | None]:
    """NMSE of the regression of every (t0, dT) cell, on the held-out rows.

    ``x``: ``(K, N, H)`` the states at steps ``first .. first + K - 1`` of N samples; ``letter``:
    ``(N,)`` 0 for "U", 1 for "S"; ``train``: bool ``(N,)``, the rows the regression is fitted on (the
    others are scored); ``targets[dT]``: ``(2, dT + 1, 2)`` pen directions of "U" and "S" for that
    dT. A sample whose state is not finite at a step is left out there. Returns the float64 grid
    ``(len(t0s), len(dts))`` and, for the cell ``keep = (t0, dT)``, the outputs ``(N, dT + 1, 2)``
    of every row (NaN where not finite). No host synchronisation.
    """
    import torch  # lazy: torch

    xb, finite = _with_bias(x)
    tr = train.to(x.device)
    xt = xb * tr[None, :, None]
    gram = torch.cumsum(torch.einsum("knh,kng->khg", xt, xt), dim=0)
    gram = torch.cat([torch.zeros_like(gram[:1]), gram])
    onehot = torch.nn.functional.one_hot(letter.to(x.device).long(), 2).double()  # (N, 2)
    sums = torch.einsum("knh,nl->klh", xt, onehot)  # per step, per letter: sum of training rows
    test = (~tr)[None, :] & finite  # (K, N)
    eye = torch.eye(xb.shape[-1], dtype=torch.float64, device=x.device)
    grid = torch.full((len(t0s), len(dts)), float("nan"), dtype=torch.float64, device=x.device)
    kept = None
    for j, dt in enumerate(dts):
        d = targets[dt].to(device=x.device, dtype=torch.float64)  # (2, dT + 1, 2)
        for i, t0 in enumerate(t0s):
            lo, hi = t0 - first, t0 - first + dt + 1
            g = gram[hi] - gram[lo]
            g = g + ridge * g.diagonal().mean().clamp_min(1e-300) * eye
            rhs = torch.einsum("klh,lkc->hc", sums[lo:hi], d)
            chol, _ = torch.linalg.cholesky_ex(g)
            w = torch.cholesky_solve(rhs, chol)  # (H + 1, 2)
            y = torch.einsum("knh,hc->nkc", xb[lo:hi], w)  # (N, dT + 1, 2)
            want = d[letter.to(x.device).long()]  # (N, dT + 1, 2)
            m = test[lo:hi].T[..., None].double()
            grid[i, j] = (((y - want) ** 2) * m).sum() / ((want ** 2) * m).sum()
            if keep == (t0, dt):
                kept = torch.where(finite[lo:hi].T[..., None], y, torch.full((), float("nan"), dtype=torch.float64,
                                                                             device=x.device))
    return grid, kept
