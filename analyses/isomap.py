"""Isomap embedding of token representations (TransJect paper, Fig. 6; Tenenbaum, de Silva &
Langford 2000, "A global geometric framework for nonlinear dimensionality reduction", Science 290).

Isomap builds the k-nearest-neighbour graph of the points, takes graph shortest-path distances as
geodesic distances, and embeds them by classical MDS:
``Y = argmin || tau(D_G) - tau(D_Y) ||_F`` with ``tau(D) = -H S H / 2`` (S the squared distances,
H the centring matrix); computed with :class:`sklearn.manifold.Isomap`. An embedding is unique up
to an isometry of the plane; this function fixes its sign so that each component's entry of
largest magnitude is positive (reproducible figures).
"""

from __future__ import annotations

import numpy as np

from analyses._arrays import float64_numpy

__all__ = ["isomap_2d"]


def isomap_2d(points, n_neighbors: int = 5, n_components: int = 2) -> np.ndarray:
    """``(n, n_components)`` Isomap coordinates of ``points`` ``(n, d)`` (numpy or torch).

    ``n_neighbors`` is capped at n - 1; fewer than 3 points, or points that are all equal, give NaN."""
    x = float64_numpy(points)
    n = x.shape[0]
    out = np.full((n, n_components), np.nan)
    if n < max(3, n_components + 1) or not np.isfinite(x).all() or np.ptp(x, axis=0).max(initial=0.0) == 0:
        return out
    from sklearn.manifold import Isomap  # lazy: sklearn

    k = max(1, min(n_neighbors, n - 1))
    try:
        y = Isomap(n_neighbors=k, n_components=n_components).fit_transform(x)
    except ValueError:  # a disconnected graph that sklearn cannot complete, and the like
        return out
    signs = np.sign(y[np.abs(y).argmax(axis=0), np.arange(y.shape[1])])
    signs[signs == 0] = 1.0
    return y * signs
