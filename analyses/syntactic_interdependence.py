"""DI of word pairs by sequential and syntactic distance (Saphra 2021, Ch. 5 paper Sec. 3.1, Figs. 3-4).

For every pair of words x_l, x_r (l < r) of a dependency-parsed sentence, DI_t({l}, {r}) (Eq. 2) at
t = r, "the lowest timestep accommodating all spans in focus" (Sec. 2.2). Fig. 3 averages it by
sequential distance r - l; Fig. 4 by syntactic distance (edges on the path between the two words
in the dependency tree; Fig. 2: "'trick' is one edge away from 'questions', two from 'asked', and
four from 'the'"), stratified by sequential distance and by whether each word's POS is open or
closed class, and "each mean is plotted only if there are at least 100 cases to average" -- so the
sums come with their counts.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from analyses.contextual_decomposition import interdependence

__all__ = ["PairDI", "pair_interdependence", "tree_distances", "aggregate"]


def tree_distances(heads: Sequence[int]) -> np.ndarray:
    """All-pairs path length (edges) in a dependency tree; ``heads`` 1-based, 0 = root.

    Returns an (n, n) int64 matrix; -1 between words the heads leave unconnected."""
    n = len(heads)
    adj: list[list[int]] = [[] for _ in range(n)]
    for i, h in enumerate(heads):
        if h:
            adj[i].append(h - 1)
            adj[h - 1].append(i)
    out = np.full((n, n), -1, dtype=np.int64)
    for s in range(n):
        out[s, s] = 0
        queue = deque([s])
        while queue:
            u = queue.popleft()
            for v in adj[u]:
                if out[s, v] < 0:
                    out[s, v] = out[s, u] + 1
                    queue.append(v)
    return out


@dataclass(frozen=True)
class PairDI:
    """DI of word pairs of one sentence: positions, sequential and syntactic distance, DI."""

    left: np.ndarray
    right: np.ndarray
    sequential: np.ndarray
    syntactic: np.ndarray
    di: np.ndarray
    """float64, of the top LSTM layer's hidden state (or the logits)."""


def pair_interdependence(ids: Sequence[int], heads: Sequence[int], *, max_distance: int, weights: dict,
                         at: str = "hidden") -> PairDI:
    """DI_r({l}, {r}) for every pair with 1 <= r - l <= ``max_distance`` of one sentence.

    Parameters
    ----------
    ids : token ids of the sentence (the network reads it from a zero state)
    heads : its dependency heads, 1-based, 0 = root
    max_distance : largest sequential distance r - l
    weights : ``lstm_weights(model)``
    at : ``"hidden"`` (the top LSTM layer) or ``"logits"``
    """
    import torch  # lazy: torch

    n = len(ids)
    pairs = [(l, r) for r in range(n) for l in range(max(0, r - max_distance), r)]
    empty = np.zeros(0, dtype=np.int64)
    if not pairs:
        return PairDI(empty, empty, empty, empty, np.zeros(0))
    left = np.array([p[0] for p in pairs])
    right = np.array([p[1] for p in pairs])
    seq = int(right.max()) + 1
    x = torch.as_tensor(list(ids)[:seq], dtype=torch.long).expand(len(pairs), seq)
    res = interdependence(x, torch.as_tensor(left), torch.as_tensor(right), **weights)
    di = res.hidden[-1] if at == "hidden" else res.logits
    dist = tree_distances(heads)
    return PairDI(left, right, right - left, dist[left, right], di.cpu().numpy())


def aggregate(pairs: Sequence[PairDI], classes: Sequence[Sequence[str]], *, max_distance: int,
              max_syntactic: int, class_pairs: Sequence[str]) -> dict[str, Any]:
    """Sums and counts of DI by sequential distance (Fig. 3) and by (sequential distance,
    syntactic distance, class pair) (Fig. 4).

    ``classes[s][i]`` is ``open``, ``closed`` or anything else for word i of sentence s; a pair's
    class is ``"<left>-<right>"`` and only the names in ``class_pairs`` are kept in Fig. 4's
    table. Syntactic distances above ``max_syntactic`` (and unconnected pairs) are left out of it.
    Non-finite DI values (a zero relevant part) are left out of both.

    Returns ``seq_sum``, ``seq_count`` (max_distance,) indexed by distance - 1 and ``syn_sum``,
    ``syn_count`` (max_distance, max_syntactic, len(class_pairs)).
    """
    seq_sum = np.zeros(max_distance)
    seq_count = np.zeros(max_distance, dtype=np.int64)
    syn_sum = np.zeros((max_distance, max_syntactic, len(class_pairs)))
    syn_count = np.zeros((max_distance, max_syntactic, len(class_pairs)), dtype=np.int64)
    index = {c: i for i, c in enumerate(class_pairs)}
    for p, cls in zip(pairs, classes, strict=True):
        for l, r, d, s, v in zip(p.left, p.right, p.sequential, p.syntactic, p.di):
            if not np.isfinite(v) or d > max_distance:
                continue
            seq_sum[d - 1] += v
            seq_count[d - 1] += 1
            c = index.get(f"{cls[l]}-{cls[r]}")
            if c is not None and 1 <= s <= max_syntactic:
                syn_sum[d - 1, s - 1, c] += v
                syn_count[d - 1, s - 1, c] += 1
    return {"seq_sum": seq_sum, "seq_count": seq_count, "syn_sum": syn_sum, "syn_count": syn_count}
