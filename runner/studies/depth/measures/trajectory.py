"""Selected elements of selected token vectors along the trajectory (Inoue et al. 2021, Fig. 2A top, 4A)."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from runner.plugin.measures import MeasureTags, StepTags
from runner.plugin.timings import StepMeasure
from runner.studies.depth.measure import PAPER, STUDY, DepthParams, PassContext, sample_problems


class Params(DepthParams):
    """Selected elements of selected token vectors (Fig. 2A top, Fig. 4A)."""

    kind: Literal["trajectory"]
    samples: list[int] = Field(default_factory=lambda: [0], min_length=1)
    tokens: list[int] = Field(default_factory=lambda: list(range(10)), min_length=1)
    elements: list[int] = Field(default_factory=lambda: [0], min_length=1)
    every: int = Field(1, ge=1)


# exit_period 1, extends: it observes x_t only
class Trajectory(StepMeasure, study=STUDY, reference=PAPER, params=Params,
                 tags=MeasureTags("step", step=StepTags(strides=("every",), exit_period=1, extends=True))):
    def problems(self, view):
        return (super().problems(view) + sample_problems(self.p.samples, view.spec) + self._spec_problems(view.spec)
                + self._state_problems(view.widest))

    def _state_problems(self, widest):
        """Elements beyond every network's state, once the sizes are known."""
        beyond = [e for e in self.p.elements if e >= widest] if widest else []
        if beyond:
            return [("elements", f"elements {beyond} are beyond every network's state (largest: {widest} elements per "
                     "token)")]
        return []

    def _spec_problems(self, spec):
        bad = [t for t in self.p.tokens if not 0 <= t < spec.input.tokens]
        if bad and spec.text_models:
            return [("tokens", f"tokens {bad} out of range (input.tokens = {spec.input.tokens})")]
        return []

    def variables(self, b, shape) -> None:
        p = self.p
        dim = b.axis("trace_step", 0, shape.steps, p.every)
        b.coord("trace_sample", np.array(p.samples), long_name="traced sample")
        b.coord("trace_token", np.array(p.tokens), long_name="traced token position")
        b.coord("trace_element", np.array(p.elements), long_name="traced element of the token vector")
        b.var("trace", "trajectory", ("network", "trace_sample", dim, "trace_token", "trace_element"), "float32",
              np.nan, "state element x_t^i[e]", "1", "selected elements of selected token vectors (Fig. 2A top); NaN "
              "where the network's state has no such token or element")

    def _index(self, ctx, x):
        import torch  # lazy: torch

        tok = torch.tensor(self.p.tokens, device=ctx.device)
        el = torch.tensor(self.p.elements, device=ctx.device)
        valid = (tok < x.shape[1])[:, None] & (el < x.shape[2])[None, :]
        self.where = (torch.tensor(self.p.samples, device=ctx.device), tok.clamp(max=x.shape[1] - 1),
                      el.clamp(max=x.shape[2] - 1), valid)

    def buffers(self, ctx: PassContext, seg):
        import torch  # lazy: torch

        p = self.p
        return {"trace": self.nan((len(p.samples), seg.kept(p.every), len(p.tokens), len(p.elements)), torch.float32,
                                  ctx.device)}

    def observe(self, ctx: PassContext, t, x, bufs, seg):
        import torch  # lazy: torch

        every = self.p.every
        if t % every:
            return
        if not hasattr(self, "where"):
            self._index(ctx, x)
        samples, tok, el, valid = self.where
        out = x[samples][:, tok][:, :, el].float()
        bufs["trace"][:, t // every - seg.start // every] = torch.where(valid, out, torch.full_like(out, float("nan")))

    def write(self, ctx: PassContext, bufs, seg):
        tr = bufs["trace"].cpu().numpy()
        ctx.store.write("trace", (ctx.index, slice(None), seg.span(self.p.every, tr.shape[1])), tr)
