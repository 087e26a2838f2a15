"""Layer-wise differential entropy of token representations (TransJect, Eq. 8, Fig. 5a).

It reads activations only (:class:`~runner.checkpointed.measure.ActivationContext`), so every study
that takes the kit offers it: the entropy of each analysis token's hidden units at every layer."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from analyses.entropy import layer_entropy
from analyses.token_geometry import quantiles
from runner.checkpointed.measure import ACTIVATION_TAGS, KIT, QUANTILES, ActivationContext, ActivationParams, ActivationView
from runner.plugin.measures import hints
from runner.plugin.timings import CheckpointMeasure

PAPER = ("Don't Bet on Sparsity: Designing Brain-Inspired Distance-Preserving Encoder (TransJect), "
         "Sec. 4, Eq. 8, Fig. 5a")


class Params(ActivationParams):
    """Entropy of each token's d components at every layer, over the analysis examples (Eq. 8, Fig. 5a)."""

    kind: Literal["entropy"]
    method: Literal["knn", "gaussian"] = "knn"
    """Kozachenko-Leonenko k-NN estimate, or the Gaussian one (analyses/entropy.py)."""
    k: int = Field(3, ge=1)


class Entropy(CheckpointMeasure, study=KIT, reference=PAPER, params=Params, tags=ACTIVATION_TAGS):
    def variables(self, b, shape) -> None:
        b.coord("quantile", np.asarray(QUANTILES), long_name="quantile")
        b.var("entropy_quantile", "entropy", ("network", "checkpoint", "layer", "quantile"), "float64", np.nan,
              "token entropy (nats)", "1",
              "quantiles over tokens of the differential entropy of the token's d components (Eq. 8, Fig. 5a); "
              "-inf values (tied components) are left out", method=self.p.method, k=self.p.k)
        b.var("layer_entropy", "entropy", ("network", "checkpoint", "layer"), "float64", np.nan,
              "mean token entropy (nats)", "1", "mean over tokens of the finite token entropies (Eq. 8)",
              **hints(plot="curve", order=13))

    def problems(self, view: ActivationView) -> list[tuple[tuple, str]]:
        return super().problems(view) or knn_sample_problems(self.p.method, self.p.k, list(view.token_widths))

    def run(self, ctx: ActivationContext, task) -> None:
        import torch  # lazy: torch

        where = ctx.layer_index()
        acts = ctx.activations(task.network, task.checkpoint)  # {layer: (tokens, d)}
        rows = layer_entropy([a.to(torch.float64)[None] for a in acts.values()], method=self.p.method,
                             k=self.p.k).cpu().numpy()
        q = np.full((len(where), len(QUANTILES)), np.nan)
        mean = np.full(len(where), np.nan)
        for layer, row in zip(acts, rows):
            q[where[layer]] = quantiles(row, QUANTILES)
            finite = row[np.isfinite(row)]
            mean[where[layer]] = finite.mean() if finite.size else np.nan
        ctx.write("entropy_quantile", task, q)
        ctx.write("layer_entropy", task, mean)


def knn_sample_problems(method: str, k: int, samples: list[tuple[str, int]]) -> list[tuple[tuple, str]]:
    """The k-NN entropy needs 1 <= k < N samples and the Gaussian one N >= 2 (analyses/entropy.py);
    ``samples``: (what the N samples are, N) of each network."""
    out = []
    for what, n in samples:
        if method == "knn" and k >= n:
            out.append((("k",), f"k = {k} needs more than {k} samples, but {what} gives {n}; take k < {n}"))
        elif method == "gaussian" and n < 2:
            out.append((("method",), f"the Gaussian estimate needs 2 samples or more, but {what} gives {n}"))
    return out[:1]
