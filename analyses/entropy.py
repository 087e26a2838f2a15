r"""Layer-wise differential entropy of token representations (TransJect paper, Sec. 4, Eq. 8;
Fig. 5a and Fig. 9a).

The paper defines, for the hidden states X^(l) of layer l (batch b, token j, hidden unit h),

.. math:: \mathrm{entropy}^{(l)}(X^{(l)}) = \mathbb{E}_{b,j,h}[-\log X^{(l)}_{b,j,h}]
          = -\mathbb{E}_{b,j}\Big[\int_H X_{b,j,h} \log X_{b,j,h}\, dh\Big]

i.e. each token's vector ``x_{b,j,:}`` is read as a density over the hidden units and its
entropy averaged over tokens. Hidden states are neither positive nor normalised, so ``-log X``
is undefined there. What this module keeps is the structure -- one entropy per token, its
expectation over tokens, and the distribution of the per-token values (what Fig. 5a plots) --
and what it changes is the object whose entropy is taken: the d components of ``x_{b,j,:}`` are
treated as d samples of a scalar random variable, and the differential entropy
``H = -\int p \log p`` of their distribution p is estimated. (``over="tokens"`` instead takes,
for each hidden unit, the distribution of its values over all tokens of the layer.)

Estimators (``method``):

* ``"knn"`` (default): Kozachenko & Leonenko (1987) in one dimension, with N samples and the
  distance :math:`\rho_{k,i}` from :math:`x_i` to its k-th nearest neighbour among the others,

  .. math:: \hat H = \psi(N) - \psi(k) + \ln 2 + \frac{1}{N}\sum_{i=1}^N \ln \rho_{k,i}

  (:math:`\psi` the digamma function, 2 the length of the unit ball [-1, 1]). Non-parametric and
  consistent for any density; :math:`\hat H(c x + m) = \hat H(x) + \ln|c|` exactly. Ties are
  atoms of the empirical distribution: ``rho = 0`` gives ``-inf`` (a distribution with an atom has
  differential entropy -infinity). Example: TransJect's X^(0) at position 0, whose PE half is
  (0, 1, 0, 1, ...); filter such tokens, or use the Gaussian estimator, when averaging.
* ``"gaussian"``: :math:`\hat H = \tfrac12 \ln(2\pi e\, s^2)`, s^2 the unbiased sample variance;
  exact for normal data and an upper bound for any other distribution of that variance.

Inputs are torch tensors or numpy arrays; the result is the same kind (float64). Computed in
float64 on the input's device.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["differential_entropy", "layer_entropy", "token_entropy"]

Method = Literal["knn", "gaussian"]


def _as_tensor(x) -> tuple[Tensor, bool]:
    import torch  # lazy: torch
    from torch import Tensor  # lazy: torch

    if isinstance(x, np.ndarray):
        return torch.from_numpy(np.asarray(x, dtype=np.float64)), True
    if isinstance(x, Tensor):
        return x.detach().to(torch.float64), False
    raise TypeError(f"expected a torch tensor or a numpy array, got {type(x).__name__}")


def _back(x: Tensor, numpy: bool):
    return x.cpu().numpy() if numpy else x


def _knn_distance(samples: Tensor, k: int) -> Tensor:
    """Distance from every sample (last axis) to its k-th nearest neighbour, in sorted order.

    In 1-D the k nearest neighbours of a point and the point itself are k + 1 consecutive sorted
    values; rho = min over those windows of the farther window end."""
    import torch  # lazy: torch

    s = samples.sort(dim=-1).values
    n = s.shape[-1]
    pad = s.new_full(s.shape[:-1] + (k,), math.inf)
    p = torch.cat([-pad, s, pad], dim=-1)  # p[..., i + k] = s[..., i]
    rho = s.new_full(s.shape, math.inf)
    for j in range(k + 1):  # window s[i - k + j], ..., s[i + j]
        left = s - p[..., j:j + n]
        right = p[..., k + j:k + j + n] - s
        rho = torch.minimum(rho, torch.maximum(left, right))
    return rho


def _entropy(samples: Tensor, method: str, k: int) -> Tensor:
    import torch  # lazy: torch

    n = samples.shape[-1]
    if method == "gaussian":
        if n < 2:
            raise ValueError("the Gaussian estimator needs at least 2 samples")
        return 0.5 * torch.log(2 * math.pi * math.e * samples.var(dim=-1, unbiased=True))
    if method == "knn":
        if not 1 <= k < n:
            raise ValueError(f"the k-NN estimator needs 1 <= k < number of samples, got k={k}, n={n}")
        psi = torch.special.digamma(samples.new_tensor([float(n), float(k)]))
        return psi[0] - psi[1] + math.log(2.0) + torch.log(_knn_distance(samples, k)).mean(dim=-1)
    raise ValueError(f"method must be 'knn' or 'gaussian', got {method!r}")


def differential_entropy(samples, dim: int | None = None, *, method: Method = "knn", k: int = 3):
    """Estimated differential entropy (nats) of the samples along ``dim``, one value per remaining index.

    ``samples``: tensor or array; ``dim`` holds the N samples of one scalar distribution. It may be
    left out for 1-D samples only: an ``(N, d)`` array is as often N samples of d units as d units'
    N samples, so which one is meant is said (``dim=0`` for N rows of samples)."""
    x, numpy = _as_tensor(samples)
    if dim is None:
        if x.ndim != 1:
            raise ValueError(f"samples of shape {tuple(x.shape)}: say which dimension holds the samples of each "
                             f"distribution (dim=0 for rows of samples, dim=-1 for one distribution per row)")
        dim = -1
    if not -x.ndim <= dim < x.ndim:
        raise ValueError(f"dim {dim} is outside the samples' {x.ndim} dimensions (shape {tuple(x.shape)})")
    return _back(_entropy(x.movedim(dim, -1), method, k), numpy)


def token_entropy(hidden, attention_mask=None, *, method: Method = "knn", k: int = 3):
    """Eq. 8's inner term: the entropy of each token's d components, ``(batch, seq)``; NaN at padding.

    ``hidden`` ``(batch, seq, d)``; ``attention_mask`` ``(batch, seq)``, 1 for tokens, 0 for padding."""
    import torch  # lazy: torch

    x, numpy = _as_tensor(hidden)
    if x.ndim != 3:
        raise ValueError(f"hidden must be (batch, seq, d); got shape {tuple(x.shape)}")
    h = _entropy(x, method, k)
    if attention_mask is not None:
        m, _ = _as_tensor(attention_mask)
        if m.shape != x.shape[:2]:
            raise ValueError(f"attention_mask must be (batch, seq) = {tuple(x.shape[:2])}; got {tuple(m.shape)}")
        h = torch.where(m.to(h.device) > 0, h, torch.full_like(h, math.nan))
    return _back(h, numpy)


def layer_entropy(hidden_states: Sequence, attention_mask=None, *, over: Literal["hidden", "tokens"] = "hidden",
                  method: Method = "knn", k: int = 3):
    """Per-layer entropies for Fig. 5a: a ``(layers, n)`` array or tensor.

    ``hidden_states``: the layers' ``(batch, seq, d)`` states (a list, or one array with a leading
    layer axis). ``over="hidden"`` (Eq. 8): row l holds one entropy per non-padding token (n =
    number of tokens; the row's mean is entropy^(l)). ``over="tokens"``: one entropy per hidden
    unit over the layer's non-padding tokens (n = d)."""
    import torch  # lazy: torch

    if over not in ("hidden", "tokens"):
        raise ValueError(f"over must be 'hidden' or 'tokens', got {over!r}")
    layers = [_as_tensor(h) for h in hidden_states]
    if not layers:
        raise ValueError("no hidden states")
    numpy = layers[0][1]
    if any(h.ndim != 3 or h.shape[:2] != layers[0][0].shape[:2] for h, _ in layers):
        raise ValueError("every layer's hidden states must be (batch, seq, d) with one batch and seq; got "
                         f"{[tuple(h.shape) for h, _ in layers]}")
    keep = None
    if attention_mask is not None:
        keep = _as_tensor(attention_mask)[0].to(layers[0][0].device) > 0
        if keep.shape != layers[0][0].shape[:2]:
            raise ValueError(f"attention_mask must be (batch, seq) = {tuple(layers[0][0].shape[:2])}; got "
                             f"{tuple(keep.shape)}")
    rows = []
    for h, _ in layers:
        tokens = h[keep] if keep is not None else h.reshape(-1, h.shape[-1])  # (n_tokens, d)
        rows.append(_entropy(tokens if over == "hidden" else tokens.T, method, k))
    return _back(torch.stack(rows), numpy)
