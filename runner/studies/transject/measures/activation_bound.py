"""Empirical activation bound per layer: the distribution of ||f(x_i) - f(x_j)|| / ||x_i - x_j|| (Fig. 5c)."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from analyses.token_geometry import activation_ratios, quantiles, sample_pairs
from runner.plugin.measures import MeasureParams, hints
from runner.plugin.timings import CheckpointMeasure
from runner.checkpointed.measure import QUANTILES
from runner.studies.transject.measure import PAPER, STUDY, EpochContext, tokens_of


class Params(MeasureParams):
    """Ratios ||x_i^(l) - x_j^(l)|| / ||x_i^(l-1) - x_j^(l-1)|| over token pairs of each analysis example
    (Fig. 5c; Theorem 2 bounds TransJect's by (1 + 1/L)^2 per layer), and against layer 0."""

    kind: Literal["activation_bound"]
    max_pairs: int = Field(256, ge=1)
    """Token pairs per example at most (drawn with the experiment's seed)."""


class ActivationBound(CheckpointMeasure, study=STUDY, reference=PAPER, params=Params):
    def variables(self, b, shape) -> None:
        b.coord("quantile", np.asarray(QUANTILES), long_name="quantile")
        cell = ("network", "checkpoint", "layer", "quantile")
        b.var("bound_quantile", "activation_bound", cell, "float64", np.nan, "activation ratio of layer l", "1",
              "quantiles over token pairs of ||x_i^(l) - x_j^(l)|| / ||x_i^(l-1) - x_j^(l-1)|| (Fig. 5c)")
        b.var("cumulative_bound_quantile", "activation_bound", cell, "float64", np.nan,
              "activation ratio of layers 1..l", "1",
              "quantiles over token pairs of ||x_i^(l) - x_j^(l)|| / ||x_i^(0) - x_j^(0)|| (Theorem 2: < e^2)")
        b.var("bound_max", "activation_bound", ("network", "checkpoint", "layer"), "float64", np.nan,
              "empirical activation bound of layer l", "1",
              "max over token pairs of ||x_i^(l) - x_j^(l)|| / ||x_i^(l-1) - x_j^(l-1)||",
              **hints(plot="curve", order=12))

    def run(self, ctx: EpochContext, task) -> None:
        import torch  # lazy: torch

        view = ctx.view(task.network, task.checkpoint)
        L = ctx.n_layers
        gen = torch.Generator().manual_seed(ctx.seed)
        per_seq = [tokens_of(h, view.mask) for h in view.hidden]  # layer -> examples -> (n, d)
        pairs = [sample_pairs(x.shape[0], self.p.max_pairs, gen) for x in per_seq[0]]
        q = np.full((L, len(QUANTILES)), np.nan)
        cq = np.full((L, len(QUANTILES)), np.nan)
        top = np.full(L, np.nan)
        for layer in range(1, len(view.hidden)):
            r = torch.cat([activation_ratios(per_seq[layer - 1][k], per_seq[layer][k], p) for k, p in enumerate(pairs)])
            c = torch.cat([activation_ratios(per_seq[0][k], per_seq[layer][k], p) for k, p in enumerate(pairs)])
            q[layer], cq[layer] = quantiles(r, QUANTILES), quantiles(c, QUANTILES)
            top[layer] = q[layer, -1]
        ctx.write("bound_quantile", task, q)
        ctx.write("cumulative_bound_quantile", task, cq)
        ctx.write("bound_max", task, top)
