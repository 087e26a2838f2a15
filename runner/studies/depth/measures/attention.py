"""Attention probabilities of the shared layer along the trajectory (Inoue et al. 2021, Fig. 2A bottom)."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from runner.plugin.measures import MeasureTags, StepTags
from runner.plugin.timings import StepMeasure
from runner.studies.depth.measure import PAPER, STUDY, DepthParams, PassContext, sample_problems


class Params(DepthParams):
    """Attention probabilities of selected samples every n steps (Fig. 2A bottom)."""

    kind: Literal["attention"]
    samples: list[int] = Field(default_factory=lambda: [0], min_length=1)
    every: int = Field(50, ge=1)
    """Paper: every 50 steps."""


# exit_period 1: attention_probs(x_t) is a forward of its own, not f's; extends: x_t alone
class Attention(StepMeasure, study=STUDY, reference=PAPER, params=Params,
                tags=MeasureTags("step", requires=("attention",), step=StepTags(strides=("every",), exit_period=1,
                                                                                extends=True))):
    def problems(self, view):
        return super().problems(view) + sample_problems(self.p.samples, view.spec)

    def variables(self, b, shape) -> None:
        dim = b.axis("attention_step", 0, shape.steps, self.p.every)
        b.coord("attention_sample", np.array(self.p.samples), long_name="sample whose attention is kept")
        b.coord("head", np.arange(shape.heads), long_name="attention head")
        b.coord("query", np.arange(shape.tokens), long_name="query token position")
        b.coord("key", np.arange(shape.tokens), long_name="key token position")
        b.var("attention", "attention", ("network", "attention_sample", dim, "head", "query", "key"), "float32", np.nan,
              "attention probability", "1", "softmax(Q K^T / sqrt(d) + mask) of the shared layer at x_t (Fig. 2A bottom)")

    def buffers(self, ctx: PassContext, seg):
        import torch  # lazy: torch

        shape = ctx.layout.vars["attention"].shape
        return {"attention": self.nan((shape[1], seg.kept(self.p.every), *shape[3:]), torch.float32, ctx.device)}

    def observe(self, ctx: PassContext, t, x, bufs, seg):
        import torch  # lazy: torch

        every = self.p.every
        if t % every:
            return
        idx = torch.tensor(self.p.samples, device=ctx.device)
        probs = ctx.model.attention_probs(x[idx], ctx.mask_x[idx] if ctx.mask_x is not None else None)
        if probs is not None:
            bufs["attention"][:, t // every - seg.start // every, : probs.shape[1]] = probs

    def write(self, ctx: PassContext, bufs, seg):
        a = bufs["attention"].cpu().numpy()
        ctx.store.write("attention", (ctx.index, slice(None), seg.span(self.p.every, a.shape[1])), a)
