"""Loss change allocation per layer between consecutive checkpoints (Saphra 2021, Sec. 6.1.1.1; Lan et al. 2019)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from analyses.loss_change import group_allocations, loss_change_allocation
from runner.studies.training.data.tokens import get_batch
from runner.plugin.measures import hints
from runner.plugin.timings import CheckpointMeasure
from runner.studies.training.measure import PAPER, STUDY, TAGS, TrainingParams

if TYPE_CHECKING:
    from torch import Tensor

if TYPE_CHECKING:  # pragma: no cover
    from runner.studies.training.context import Context


class Params(TrainingParams):
    """Loss change allocation per layer between consecutive checkpoints (Sec. 6.1.1.1)."""

    kind: Literal["lca"]
    rule: Literal["first_order", "trapezoid", "simpson"] = "simpson"
    """How the gradient is averaged along the straight path between two checkpoints. The thesis'
    Eq. 6.2 is first order, for one optimizer step; over a checkpoint interval the path integral
    (Eq. 6.1) needs quadrature, so the default is composite Simpson (Lan et al. 2019 use RK4)."""
    intervals: int = Field(4, ge=1, le=64)
    """Simpson sub-intervals along the path (2 * intervals + 1 gradient evaluations)."""


def _loss_and_grads(ctx, model) -> tuple[float, dict[str, Tensor]]:
    """L(theta) over all analysis tokens (token-weighted mean) and its exact gradient.

    The hidden state is carried across windows *without* detaching, so the gradient is that of
    the very function whose values are compared (LCA's allocations must add up to its change)."""
    import torch  # lazy: torch

    model.zero_grad(set_to_none=True)
    hidden = model.init_hidden(ctx.columns)
    total_tokens = sum(get_batch(ctx.words, i, ctx.bptt)[1].numel() for i in ctx.windows())
    with torch.enable_grad():
        loss = 0.0
        for i in ctx.windows():
            x, y = get_batch(ctx.words, i, ctx.bptt)
            logits, hidden = model(x, hidden)
            loss = loss + model.loss(logits, y) * (y.numel() / total_tokens)
        loss.backward()
    grads = {k: (v.grad.detach().clone() if v.grad is not None else None) for k, v in model.named_parameters()}
    return float(loss.detach()), grads


def _simpson_gradient(ctx, model, theta_a: dict, deltas: dict, g_a: dict, g_b: dict, m: int) -> dict:
    """Composite Simpson average of the gradient along theta_a + s * delta, s in [0, 1] (2m sub-steps),
    so that sum(average * delta) approximates the path integral of Eq. 6.1."""
    import torch  # lazy: torch

    n = 2 * m
    total = {k: (g_a[k] + g_b[k]) if g_a[k] is not None else None for k in g_a}
    for j in range(1, n):
        with torch.no_grad():
            for k, v in model.named_parameters():
                v.copy_(theta_a[k] + (j / n) * deltas[k])
        _, g = _loss_and_grads(ctx, model)
        for k, v in g.items():
            if v is not None:
                total[k] = total[k] + (4 if j % 2 else 2) * v
    return {k: (v / (3 * n) if v is not None else None) for k, v in total.items()}


class LossChange(CheckpointMeasure, study=STUDY, reference=PAPER, params=Params, tags=TAGS):
    version = 2

    def needs(self, n, c, last, refs):
        return None if c == 0 else [(n, c - 1), (n, c)]

    def variables(self, b, shape) -> None:
        groups = ["embedding"] + [f"lstm{i + 1}" for i in range(shape.num_layers)] + ["decoder"]
        b.coord("parameter_group", groups, long_name="layer whose parameters are allocated the loss change")
        b.var("lca", "lca", ("network", "checkpoint", "parameter_group"), "float64", np.nan,
              "loss change allocation (nats per token)", "1",
              "sum over the layer's parameters of g~_i (theta_c,i - theta_c-1,i), from the previous checkpoint "
              "(Lan et al. 2019; thesis Sec. 6.1.1.1); negative = the layer lowered the loss", rule=self.p.rule,
              **hints(plot="curve", order=8))
        b.var("loss_change", "lca", ("network", "checkpoint"), "float64", np.nan, "loss change (nats per token)", "1",
              "L(theta_c) - L(theta_c-1) on the analysis tokens (dropout off)")

    def run(self, ctx: Context, task) -> None:
        n, c = task.network, task.checkpoint
        a, b = ctx.fresh_model(n, c - 1), ctx.fresh_model(n, c)
        theta_a = {k: v.detach().clone() for k, v in a.named_parameters()}
        theta_b = {k: v.detach().clone() for k, v in b.named_parameters()}
        deltas = {k: theta_b[k] - theta_a[k] for k in theta_a}
        loss_a, g_a = _loss_and_grads(ctx, a)
        loss_b, g_b = _loss_and_grads(ctx, b)
        rule = self.p.rule
        if rule == "simpson":
            alloc = loss_change_allocation(_simpson_gradient(ctx, a, theta_a, deltas, g_a, g_b, self.p.intervals),
                                           deltas)
        else:
            alloc = loss_change_allocation(g_a, deltas, None if rule == "first_order" else g_b)
        groups = group_allocations(alloc, key=lambda name: name.split(".", 1)[0])
        names = [str(v) for v in ctx.layout.coords["parameter_group"].values]
        ctx.write("lca", task, np.array([float(groups[g]) if g in groups else np.nan for g in names]))
        ctx.store.write("loss_change", (n, c), np.asarray(loss_b - loss_a))
