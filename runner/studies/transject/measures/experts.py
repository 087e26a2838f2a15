"""Expert weights per layer (Eq. 5, Fig. 5b) and the entropy of each expert's representation (Sec. 4).

With the paper's learned gate the weights are the layer's constants; with ``gate = "input"`` (the
authors' code) each analysis example has its own, and the store holds their mean over the examples.

For TransJect, expert e of layer l gives ``X^(l,e) = X + (alpha_l / L) F_e(X)`` (Eq. 3; Eq. 4 for
the entropic variants) from the layer's input X = X^(l-1); the baselines' "equivalent" (Sec. 4) is
each attention head's output ``softmax(Q_h K_h^T / sqrt(d_h)) V_h``. The entropy of a
representation is the mean over tokens of the differential entropy of its components (Eq. 8).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from analyses.entropy import token_entropy
from runner.plugin.measures import MeasureParams, hints
from runner.plugin.timings import CheckpointMeasure
from runner.checkpointed.measures.entropy import knn_sample_problems
from runner.studies.transject.measure import PAPER, STUDY, EpochContext
from runner.studies.transject.spec import TransJectView

if TYPE_CHECKING:
    import torch


class Params(MeasureParams):
    """Expert weights lambda per layer (Fig. 5b) and the entropy of each expert's (head's) representation."""

    kind: Literal["experts"]
    method: Literal["knn", "gaussian"] = "knn"
    k: int = Field(3, ge=1)


def _mean_entropy(h: torch.Tensor, mask: torch.Tensor, method: str, k: int) -> float:
    import torch  # lazy: torch

    e = token_entropy(h, mask, method=method, k=k)
    e = e[torch.isfinite(e)]
    return float(e.mean()) if e.numel() else math.nan


def expert_outputs(model, layer: int, x: torch.Tensor, x0: torch.Tensor, mask: torch.Tensor,
                   gen: torch.Generator) -> list[torch.Tensor]:
    """TransJect: each expert's residual output X + (alpha/L) F_e(X) of layer ``layer`` (0-based)."""
    import torch  # lazy: torch
    from models.transject import entropic_residual  # lazy: torch

    sigma = model._broadcast(model.eigenvalues(x0, mask)[0])
    lay = model.layers[layer]
    a = lay.alpha / lay.n_layers
    u = torch.rand(len(lay.U), x.shape[-1], generator=gen, dtype=x.dtype, device=x.device) if lay.entropic else None
    out = []
    for e in range(len(lay.U)):
        fx = a * lay.attention(x, sigma, e)
        out.append(entropic_residual(x, fx, u[e]) if u is not None else x + fx)
    return out


def head_outputs(layer_module, x: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
    """Each attention head's output softmax(Q K^T / sqrt(d_h)) V, ``(batch, seq, d_h)`` (padding keys masked)."""
    import torch  # lazy: torch
    from torch.nn import functional as F  # lazy: torch

    att = layer_module.self_attn
    h = att.num_heads
    q, k, v = F.linear(x, att.in_proj_weight, att.in_proj_bias).chunk(3, dim=-1)
    b, s, d = q.shape
    split = lambda t: t.view(b, s, h, d // h).transpose(1, 2)  # noqa: E731
    q, k, v = split(q), split(k), split(v)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d // h)
    scores = scores.masked_fill(~mask.to(torch.bool)[:, None, None, :], float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v  # (b, h, s, d_h)
    return [out[:, i] for i in range(h)]


class Experts(CheckpointMeasure, study=STUDY, reference=PAPER, params=Params):
    def variables(self, b, shape) -> None:
        b.coord("encoder_layer", shape.layers[1:], long_name="encoder layer")
        b.index("expert", shape.experts, long_name="expert (TransJect) or attention head (baselines)")
        cell = ("network", "checkpoint", "encoder_layer", "expert")
        b.var("expert_weight", "experts", cell, "float64", np.nan, "expert weight lambda_e", "1",
              "softmax of the layer's expert logits: the convex weights of Eq. 5 (Fig. 5b); with gate = 'input' "
              "(the authors' per-sample gate), the mean over the analysis examples of each example's weights; "
              "NaN for the baselines",
              **hints(plot="curve", order=14))
        b.var("expert_entropy", "experts", cell, "float64", np.nan, "entropy of the expert's representation (nats)",
              "1", "mean over tokens of the entropy of X + (alpha/L) F_e(X) (TransJect) or of an attention head's "
              "output (baselines), Sec. 4", method=self.p.method, k=self.p.k)

    def problems(self, view: TransJectView) -> list[tuple[tuple, str]]:
        return knn_sample_problems(self.p.method, self.p.k, list(view.expert_widths))

    def run(self, ctx: EpochContext, task) -> None:
        import torch  # lazy: torch

        with torch.no_grad():
            self._run(ctx, task)

    def _run(self, ctx: EpochContext, task) -> None:
        import torch  # lazy: torch

        view = ctx.view(task.network, task.checkpoint)
        L, E = ctx.n_layers - 1, ctx.layout.coords["expert"].size
        weights = np.full((L, E), np.nan)
        ent = np.full((L, E), np.nan)
        model = view.model
        dtype = next(model.parameters()).dtype
        mask = view.mask
        gen = torch.Generator(device=mask.device).manual_seed(view.generator_seed)
        for layer in range(len(view.hidden) - 1):
            x = view.hidden[layer].to(dtype)
            if view.baseline:
                outs = head_outputs(model.layers[layer], x, mask)
            else:
                outs = expert_outputs(model, layer, x, view.hidden[0].to(dtype), mask, gen)
                w = model.layers[layer].expert_weights(outs, mask)
                w = (w if w.dim() == 1 else w.mean(dim=0)).double().cpu().numpy()  # input gate: mean over examples
                weights[layer, : len(w)] = w
            for e, h in enumerate(outs):
                ent[layer, e] = _mean_entropy(h, mask, self.p.method, self.p.k)
        ctx.write("expert_weight", task, weights)
        ctx.write("expert_entropy", task, ent)
