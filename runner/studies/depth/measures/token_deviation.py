"""Token deviation D(t) and the synchronization offset (Inoue et al. 2021, Eq. 5, Fig. 2A-B)."""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from pydantic import Field

from analyses.token_deviation import SyncOffsetTracker, token_deviation
from runner.measures import hints, register
from runner.studies.depth.measure import DepthParams, TrajectoryMeasure
from runner.studies.depth.precision import deviation_floor


class Params(DepthParams):
    """Token deviation D(t) (Eq. 5) and synchronization offset (Fig. 2A-B)."""

    kind: Literal["token_deviation"]
    threshold: float = Field(1e-5, gt=0)
    """Synchronization offset = first t with D(t) < threshold (paper: 1e-5)."""
    every: int = Field(1, ge=1)
    """Keep D(t) every n steps (the offset itself is exact at any stride)."""


@register
class TokenDeviation(TrajectoryMeasure):
    Params = Params
    shard = "samples"

    def exit_period(self):
        return 1  # observes x_t only

    def variables(self, b, shape) -> None:
        p = self.p
        dim = b.axis("deviation_step", 0, shape.steps, p.every)
        b.var("deviation", "token_deviation", ("network", "sample", dim), "float32", np.nan, "token deviation D(t)",
              "1", "D(t) = (1/N_w) sum_i ||x_t^i - mean_j x_t^j||^2 (Eq. 5)", threshold=p.threshold,
              **hints(plot="log_series", order=2))
        b.var("sync_offset", "token_deviation", ("network", "sample"), "int64", -1, "synchronization offset", "1",
              "first step t with D(t) < threshold, exact at every step (Fig. 2B); -1: never", threshold=p.threshold,
              **hints(headline=("median sync offset", "median_nonneg")))

    def precision_problem(self, precision, n_tokens, n_hidden):
        floor = deviation_floor(precision, n_hidden)
        if n_tokens > 1 and self.p.threshold < floor:
            return "threshold", (f"threshold = {self.p.threshold:g} is not trusted in {precision} for {n_hidden}-wide "
                                 f"token vectors: rounding alone keeps D(t) near {floor / 100:.2g} (need threshold >= "
                                 f"{floor:.2g}); raise it or use fp32/fp64")
        return None

    def start(self, ctx, x0):
        self.tracker = SyncOffsetTracker(ctx.S, self.p.threshold, ctx.device)

    def state_dict(self):
        return self.tracker.state_dict()

    def load_state_dict(self, state):
        self.tracker = SyncOffsetTracker(len(state["offset"]), self.p.threshold, state["offset"].device)
        self.tracker.load_state_dict(state)

    def buffers(self, ctx, seg):
        return {"deviation": self.nan((ctx.S, seg.kept(self.p.every)), torch.float32, ctx.device)}

    def observe(self, ctx, t, x, bufs, seg):
        D = token_deviation(x)
        self.tracker.update(t, D)
        if t % self.p.every == 0:
            bufs["deviation"][:, t // self.p.every - seg.start // self.p.every] = D
        return torch.isfinite(D)  # D is NaN or Inf exactly when the state holds one

    def write(self, ctx, bufs, seg):
        d = bufs["deviation"].cpu().numpy()
        ctx.store.write("deviation", (ctx.index, slice(None), seg.span(self.p.every, d.shape[1])), d)
        if seg.last:
            ctx.store.write("sync_offset", (ctx.index, slice(None)), self.tracker.offset.cpu().numpy())
