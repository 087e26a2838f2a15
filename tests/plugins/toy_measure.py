"""A measure added without touching the engine: the root-mean-square state element along a trajectory."""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from pydantic import Field

from runner.plugin.measures import MeasureTags, StepTags, hints
from runner.plugin.timings import StepMeasure
from runner.studies.depth.measure import DepthParams


class Params(DepthParams):
    """Root mean square of the state's elements, ||x_t|| / sqrt(n), per sample."""

    kind: Literal["state_rms"]
    every: int = Field(1, ge=1)


# kept every `every` steps: durable points fall on its multiples (no exit_period: early exit is refused)
class StateRMS(StepMeasure, study="depth", params=Params,
               tags=MeasureTags("step", step=StepTags(strides=("every",)))):
    def variables(self, b, shape) -> None:
        dim = b.axis("rms_step", 0, shape.steps, self.p.every)
        b.var("state_rms", "state_rms", ("network", "sample", dim), "float64", np.nan, "state RMS", "1",
              "||x_t|| / sqrt(n)", **hints(plot="series", order=5, headline=("mean state RMS", "finite_mean")))

    def buffers(self, ctx, seg):
        return {"rms": self.nan((ctx.S, seg.kept(self.p.every)), torch.float64, ctx.device)}

    def observe(self, ctx, t, x, bufs, seg):
        if t % self.p.every == 0:
            flat = x.flatten(1).to(torch.float64)
            bufs["rms"][:, t // self.p.every - seg.start // self.p.every] = flat.norm(dim=1) / flat.shape[1] ** 0.5

    def write(self, ctx, bufs, seg):
        values = bufs["rms"].cpu().numpy()
        ctx.store.write("state_rms", (ctx.index, slice(None), seg.span(self.p.every, values.shape[1])), values)
