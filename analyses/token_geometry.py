r"""Layer-wise geometry of token representations: distances between token pairs and the empirical
activation bound (TransJect paper, "Don't Bet on Sparsity: Designing Brain-Inspired
Distance-Preserving Encoder", Fig. 1 and Fig. 5c, Sec. 2 and Sec. 4).

For hidden states :math:`X^{(l)}` (tokens :math:`x_i^{(l)} \in \mathbb{R}^d`) of layers
:math:`l = 0..L` (0: the embedding layer):

* Euclidean distance :math:`d^{(l)}_{ij} = \lVert x_i^{(l)} - x_j^{(l)} \rVert_2` and cosine
  distance :math:`c^{(l)}_{ij} = 1 - \frac{\langle x_i, x_j \rangle}{\lVert x_i\rVert \lVert x_j\rVert}`
  of chosen token pairs at every layer (Fig. 1), and the Euclidean distance relative to layer 0,
  :math:`d^{(l)}_{ij} / d^{(0)}_{ij}`: 1 at every layer for a distance-preserving encoder.
* Empirical activation bound of layer :math:`l` (Sec. 2: :math:`K_f = \sup \lVert f(x) - f(y)\rVert
  / \lVert x - y\rVert`; Fig. 5c shows its distribution): over token pairs (i, j) of one sequence,

  .. math:: r^{(l)}_{ij} = \frac{\lVert x_i^{(l)} - x_j^{(l)} \rVert_2}{\lVert x_i^{(l-1)} - x_j^{(l-1)} \rVert_2}

  whose maximum estimates the Lipschitz (activation) bound of the layer map f_l on the data. For
  TransJect, Theorem 2 bounds it by :math:`(1 + 1/L)^2` per layer and :math:`e^2` over L layers;
  an orthogonal (isometric) map gives exactly 1. Where a layer mixes tokens (attention), the same
  ratio of hidden states is what the paper measures for the Transformer.

Pure functions of torch tensors (float64 results on the input's device) or numpy arrays.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from analyses._arrays import float64_numpy

if TYPE_CHECKING:
    import torch
    from torch import Tensor

__all__ = ["activation_ratios", "cosine_distance", "euclidean_distance", "pair_distances", "quantiles",
           "sample_pairs"]


def _t(x) -> Tensor:
    import torch  # lazy: torch

    if isinstance(x, np.ndarray):
        return torch.from_numpy(np.asarray(x, dtype=np.float64))
    return x.detach().to(torch.float64)


def euclidean_distance(a, b) -> Tensor:
    """||a - b||_2 along the last axis."""
    import torch  # lazy: torch

    return torch.linalg.vector_norm(_t(a) - _t(b), dim=-1)


def cosine_distance(a, b) -> Tensor:
    """1 - cos(a, b) along the last axis (NaN where a vector is zero)."""
    import torch  # lazy: torch

    a, b = _t(a), _t(b)
    den = torch.linalg.vector_norm(a, dim=-1) * torch.linalg.vector_norm(b, dim=-1)
    cos = (a * b).sum(-1) / den
    return torch.where(den > 0, 1.0 - cos, torch.full_like(cos, float("nan")))


def pair_distances(hidden_states, pairs) -> tuple[Tensor, Tensor]:
    """Euclidean and cosine distances of token pairs at every layer (Fig. 1).

    ``hidden_states``: ``(layers, seq, d)`` (one sequence) or a list of ``(seq, d)``; ``pairs``:
    ``(P, 2)`` token positions. Returns two ``(layers, P)`` tensors."""
    import torch  # lazy: torch

    h = torch.stack([_t(x) for x in hidden_states]) if isinstance(hidden_states, (list, tuple)) else _t(hidden_states)
    if h.ndim != 3:
        raise ValueError(f"hidden_states must be (layers, seq, d) or a list of (seq, d); got {tuple(h.shape)}")
    p = torch.as_tensor(np.asarray(pairs, dtype=np.int64).reshape(-1, 2), device=h.device)
    a, b = h[:, p[:, 0]], h[:, p[:, 1]]
    return euclidean_distance(a, b), cosine_distance(a, b)


def sample_pairs(n_tokens: int, max_pairs: int, generator: torch.Generator | None = None) -> Tensor:
    """``(P, 2)`` distinct unordered token pairs i < j of a sequence of ``n_tokens``: all of them
    when there are at most ``max_pairs``, else ``max_pairs`` drawn without replacement."""
    import torch  # lazy: torch

    i, j = torch.triu_indices(n_tokens, n_tokens, offset=1)
    pairs = torch.stack([i, j], dim=1)
    if len(pairs) > max_pairs:
        pick = torch.randperm(len(pairs), generator=generator)[:max_pairs]
        pairs = pairs[pick.sort().values]
    return pairs


def activation_ratios(x_in, x_out, pairs) -> Tensor:
    """||f(x_i) - f(x_j)|| / ||x_i - x_j|| for token pairs (Fig. 5c), ``(P,)``.

    ``x_in``, ``x_out``: ``(seq, d_in)``, ``(seq, d_out)`` the layer's input and output at the same
    token positions; ``pairs``: ``(P, 2)``. Pairs whose inputs coincide are NaN."""
    import torch  # lazy: torch

    x_in, x_out = _t(x_in), _t(x_out)
    if x_in.ndim != 2 or x_out.ndim != 2 or x_in.shape[0] != x_out.shape[0]:
        raise ValueError(f"x_in and x_out must be (seq, d) at the same positions; got {tuple(x_in.shape)}, "
                         f"{tuple(x_out.shape)}")
    p = torch.as_tensor(np.asarray(pairs, dtype=np.int64).reshape(-1, 2), device=x_in.device)
    num = euclidean_distance(x_out[p[:, 0]], x_out[p[:, 1]])
    den = euclidean_distance(x_in[p[:, 0]], x_in[p[:, 1]])
    return torch.where(den > 0, num / den, torch.full_like(num, float("nan")))


def quantiles(values, q) -> np.ndarray:
    """Quantiles ``q`` of the finite values (NaN when there are none), float64 numpy."""
    v = float64_numpy(values).ravel()
    v = v[np.isfinite(v)]
    if v.size == 0:
        return np.full(len(q), np.nan)
    return np.quantile(v, np.asarray(q, dtype=np.float64))
