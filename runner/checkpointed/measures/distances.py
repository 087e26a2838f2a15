"""Layer-wise Euclidean and cosine distances between token pairs of the analysis sentence (Fig. 1).

It reads activations only (:class:`~runner.checkpointed.measure.ActivationContext`), so every study
that takes the kit offers it: the pairs of each network's analysis sentence."""

from __future__ import annotations

import warnings
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, field_validator

from analyses.token_geometry import pair_distances
from runner.checkpointed.measure import ACTIVATION_TAGS, KIT, ActivationContext, ActivationParams, ActivationView
from runner.plugin.measures import hints
from runner.plugin.timings import CheckpointMeasure

PAPER = ("Don't Bet on Sparsity: Designing Brain-Inspired Distance-Preserving Encoder (TransJect), "
         "Sec. 3, Fig. 1")


class Params(ActivationParams):
    """Euclidean and cosine distances of token pairs at every layer, and relative to layer 0 (Fig. 1)."""

    kind: Literal["distances"]
    pairs: list[Annotated[list[str], Field(min_length=2, max_length=2)]] = Field(default_factory=list)
    """Token pairs of the analysis sentence, e.g. [["characters", "script"]] (first occurrences);
    none: every pair among its first ``max_tokens`` tokens. A word the sentence lacks is an error."""
    max_tokens: int = Field(12, ge=2)

    @field_validator("pairs")
    @classmethod
    def _two_words(cls, pairs: list[list[str]]) -> list[list[str]]:
        for a, b in pairs:
            if a.lower() == b.lower():
                raise ValueError(f"the pair [{a!r}, {b!r}] names one word twice; a pair is two different words")
        return pairs


def word_positions(sentence: list[str]) -> dict[str, int]:
    """First position of each token, and of each word split into WordPiece pieces (``unlik ##eable``:
    the position of its first piece), lowercased."""
    out: dict[str, int] = {}
    for i, t in enumerate(sentence):
        out.setdefault(t.lower(), i)
    i = 0
    while i < len(sentence):
        j = i + 1
        while j < len(sentence) and sentence[j].startswith("##"):
            j += 1
        out.setdefault("".join(t.removeprefix("##") for t in sentence[i:j]).lower(), i)
        i = j
    return out


def missing_words(sentence: list[str], pairs: list[list[str]]) -> list[str]:
    """The words of ``pairs`` that the sentence lacks (in order, once each)."""
    where = word_positions(sentence)
    return list(dict.fromkeys(t for pair in pairs for t in pair if t.lower() not in where))


def resolve_pairs(sentence: list[str], pairs: list[list[str]], max_tokens: int) -> tuple[list[tuple[int, int]], list[str]]:
    """Positions and labels of the pairs in the sentence; with no pairs, every pair of its first
    ``max_tokens`` tokens. A word the sentence lacks raises ValueError naming it (never replaced)."""
    where = word_positions(sentence)
    missing = missing_words(sentence, pairs)
    if missing:
        raise ValueError(f"the analysis sentence has no {', '.join(map(repr, missing))}; its tokens: "
                         + " ".join(sentence[:40]) + (" ..." if len(sentence) > 40 else ""))
    out = []
    for a, b in pairs:
        i, j = where[a.lower()], where[b.lower()]
        if i == j:
            raise ValueError(f"{a!r} and {b!r} are the same token (position {i}) of the analysis sentence")
        out.append(((i, j), f"{a}~{b}"))
    if not pairs:
        n = min(max_tokens, len(sentence))
        out = [((i, j), f"{i}:{sentence[i]}~{j}:{sentence[j]}") for i in range(n) for j in range(i + 1, n)]
    return [p for p, _ in out], [lab for _, lab in out]


def _by_width(states: list, pos: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`pair_distances` of each run of layers of one width (a network's output layer may be
    wider than its hidden layers), as ``(layers, P)`` arrays."""
    eu, cos, start = [], [], 0
    for end in range(1, len(states) + 1):
        if end == len(states) or states[end].shape[-1] != states[start].shape[-1]:
            e, c = pair_distances(states[start:end], pos)
            eu.append(e.cpu().numpy())
            cos.append(c.cpu().numpy())
            start = end
    return np.concatenate(eu), np.concatenate(cos)


def mean_ratio_to_first(eu: np.ndarray) -> np.ndarray:
    """Per layer, the mean over pairs of ``eu[l, p] / eu[0, p]`` (``eu``: ``(layers, P)``), leaving out
    the pairs whose first-layer distance is 0 (the same word twice: no ratio)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = eu / eu[:1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a layer where no pair has a ratio: NaN
        return np.nanmean(np.where(np.isfinite(ratio), ratio, np.nan), 1)


def at_layers(n_layers: int, rows: list[int], values: np.ndarray) -> np.ndarray:
    """``values`` (one per layer measured) at their ``rows`` of the store's layer axis, NaN elsewhere."""
    out = np.full(n_layers, np.nan)
    out[rows] = values
    return out


class Distances(CheckpointMeasure, study=KIT, reference=PAPER, params=Params, tags=ACTIVATION_TAGS):
    def problems(self, view: ActivationView) -> list[tuple[tuple, str]]:
        unknown = super().problems(view)
        if not self.p.pairs or unknown:
            return unknown
        if view.sentence is not None:
            try:
                resolve_pairs(list(view.sentence), self.p.pairs, self.p.max_tokens)
            except ValueError as err:
                return [(("pairs",), str(err))]
            return []
        closed = view.closed_tokens  # the first test sequence of a generated source: only its tokens
        if closed is not None:
            tokens = {t.lower() for t in closed}
            strange = [t for pair in self.p.pairs for t in pair if t.lower() not in tokens]
            if strange:
                return [(("pairs",), f"{', '.join(map(repr, strange))} cannot be in a {view.source} "
                         f"sequence (its tokens: {' '.join(closed)})")]
        return []

    def variables(self, b, shape) -> None:
        pos, labels = resolve_pairs(shape.sentence, self.p.pairs, self.p.max_tokens)
        b.coord("pair", labels, long_name="token pair of the analysis sentence")
        b.coord("pair_first", np.array([i for i, _ in pos]), ("pair",), long_name="position of the first token")
        b.coord("pair_second", np.array([j for _, j in pos]), ("pair",), long_name="position of the second token")
        cell = ("network", "checkpoint", "pair", "layer")
        b.var("pair_euclidean", "distances", cell, "float64", np.nan, "Euclidean distance of the token pair", "1",
              "||x_i^(l) - x_j^(l)||_2 (Fig. 1)")
        b.var("pair_cosine", "distances", cell, "float64", np.nan, "cosine distance of the token pair", "1",
              "1 - cos(x_i^(l), x_j^(l)) (Fig. 1)")
        b.var("euclidean_ratio", "distances", ("network", "checkpoint", "layer"), "float64", np.nan,
              "Euclidean distance relative to layer 0", "1",
              "mean over pairs of ||x_i^(l) - x_j^(l)|| / ||x_i^(0) - x_j^(0)|| (1: distances preserved); a pair "
              "whose layer-0 distance is 0 (the same word twice) has no ratio and is left out of the mean (its "
              "distances are in pair_euclidean)",
              **hints(plot="curve", order=10))
        b.var("cosine_distance_mean", "distances", ("network", "checkpoint", "layer"), "float64", np.nan,
              "mean cosine distance of the pairs", "1", "mean over pairs of 1 - cos(x_i^(l), x_j^(l))",
              **hints(plot="curve", order=11))

    def run(self, ctx: ActivationContext, task) -> None:
        import torch  # lazy: torch

        where = ctx.layer_index()
        L = len(where)
        sentence = ctx.sentence_activations(task.network, task.checkpoint)  # {layer: (seq, d)}, bottom up
        states = [s.to(torch.float64) for s in sentence.values()]
        positions, _ = resolve_pairs(ctx.sentence_tokens, self.p.pairs, self.p.max_tokens)
        pos = [p for p in positions if max(p) < states[0].shape[0]]
        eu, cos = _by_width(states, pos)  # (layers, P)
        n_pairs = len(positions)
        full_eu = np.full((n_pairs, L), np.nan)
        full_cos = np.full((n_pairs, L), np.nan)
        rows = [where[layer] for layer in sentence]
        full_eu[: len(pos), rows] = eu.T
        full_cos[: len(pos), rows] = cos.T
        ctx.write("pair_euclidean", task, full_eu)
        ctx.write("pair_cosine", task, full_cos)
        ctx.write("euclidean_ratio", task, at_layers(L, rows, mean_ratio_to_first(eu)))
        ctx.write("cosine_distance_mean", task, at_layers(L, rows, np.nanmean(cos, 1)))
