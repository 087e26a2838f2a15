"""Token deviation D(t) and the synchronization offset (Inoue et al. 2021, Eq. 5, Fig. 2A-B)."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from analyses.token_deviation import SyncOffsetTracker, token_deviation
from runner.core.layout import flags, never_as_nan
from runner.plugin.measures import MeasureTags, StepTags, hints
from runner.plugin.timings import StepMeasure
from runner.studies.depth.measure import PAPER, STUDY, DepthParams, PassContext
from runner.studies.depth.precision import deviation_floor

#: The codes of ``sync_outcome``, in order.
SYNC_OUTCOMES = ("synchronized", "censored", "diverged", "not_applicable")


class Params(DepthParams):
    """Token deviation D(t) (Eq. 5) and synchronization offset (Fig. 2A-B)."""

    kind: Literal["token_deviation"]
    threshold: float = Field(1e-5, gt=0)
    """Synchronization offset = first t with D(t) < threshold (paper: 1e-5)."""
    every: int = Field(1, ge=1)
    """Keep D(t) every n steps (the offset itself is exact at any stride)."""


# extends: the first crossing so far is its state; the outcome is written at the new end
class TokenDeviation(StepMeasure, study=STUDY, reference=PAPER, params=Params,
                     tags=MeasureTags("step", requires=("tokens",), step=StepTags(
                         strides=("every",), shard="samples", exit_period=1, extends=True,
                         extend_note="its sync offset and outcome (censoring)"))):
    precision_checked = {"tf32": False, "bf16": False}

    def variables(self, b, shape) -> None:
        p = self.p
        dim = b.axis("deviation_step", 0, shape.steps, p.every)
        b.var("deviation", "token_deviation", ("network", "sample", dim), "float32", np.nan, "token deviation D(t)",
              "1", "D(t) = (1/N_w) sum_i ||x_t^i - mean_j x_t^j||^2 (Eq. 5)", threshold=p.threshold,
              **hints(plot="log_series", order=2))
        b.var("sync_offset", "token_deviation", ("network", "sample"), "float64", np.nan,
              "synchronization offset (steps)", "1",
              "first step t with D(t) < threshold, exact at every step (Fig. 2B); NaN: not within the run, see "
              "sync_outcome", threshold=p.threshold, **hints(headline=("median sync offset", "median")))
        b.var("sync_outcome", "token_deviation", ("network", "sample"), "int8", -1, "synchronization outcome", None,
              "synchronized: D(t) fell below threshold (sync_offset); censored: not by the end of the run; diverged: "
              "the state became non-finite first; not_applicable: the network has one token, so D(t) = 0 by "
              "construction", threshold=p.threshold, **flags(*SYNC_OUTCOMES))

    def problems(self, view):
        return super().problems(view) + view.untrusted("threshold", self._precision_problem)

    def _precision_problem(self, net):
        precision, n_tokens, n_hidden = net.precision, net.n_tokens, net.n_hidden
        floor = deviation_floor(precision, n_hidden)
        if n_tokens > 1 and self.p.threshold < floor:
            return (f"threshold = {self.p.threshold:g} is not trusted in {precision} for {n_hidden}-wide "
                    f"token vectors: rounding alone keeps D(t) near {floor / 100:.2g} (need threshold >= "
                    f"{floor:.2g}); raise it or use fp32/fp64")
        return None

    def mark_not_applicable(self, store, network):
        n = len(store.read("sync_outcome", (network,)))
        store.write("sync_outcome", (network, slice(None)), np.full(n, SYNC_OUTCOMES.index("not_applicable"), np.int8))

    def start(self, ctx: PassContext, x0):
        import torch  # lazy: torch

        self.tracker = SyncOffsetTracker(ctx.S, self.p.threshold, ctx.device)
        self.finite = torch.ones(ctx.S, dtype=torch.bool, device=ctx.device)

    def state_dict(self):
        return self.tracker.state_dict()

    def load_state_dict(self, state):
        self.tracker = SyncOffsetTracker(len(state["offset"]), self.p.threshold, state["offset"].device)
        self.tracker.load_state_dict(state)

    def buffers(self, ctx: PassContext, seg):
        import torch  # lazy: torch

        return {"deviation": self.nan((ctx.S, seg.kept(self.p.every)), torch.float32, ctx.device)}

    def observe(self, ctx: PassContext, t, x, bufs, seg):
        import torch  # lazy: torch

        D = token_deviation(x)
        self.tracker.update(t, D)
        self.finite = torch.isfinite(D)  # at the last step: whether the sample ended finite
        if t % self.p.every == 0:
            bufs["deviation"][:, t // self.p.every - seg.start // self.p.every] = D
        return torch.isfinite(D)  # D is NaN or Inf exactly when the state holds one

    def write(self, ctx: PassContext, bufs, seg):
        d = bufs["deviation"].cpu().numpy()
        ctx.store.write("deviation", (ctx.index, slice(None), seg.span(self.p.every, d.shape[1])), d)
        if seg.last:
            offset = self.tracker.offset.cpu().numpy()
            outcome = np.where(offset >= 0, 0, np.where(self.finite.cpu().numpy(), 1, 2)).astype(np.int8)
            ctx.store.write("sync_offset", (ctx.index, slice(None)), never_as_nan(offset))
            ctx.store.write("sync_outcome", (ctx.index, slice(None)), outcome)
