"""Growth of a perturbation without renormalisation, ||y_t - x_t|| (Inoue et al. 2021, Fig. 4A)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from analyses.lyapunov import initial_perturbation
from runner.plugin.measures import MeasureTags, StepTags, Twin
from runner.plugin.timings import StepMeasure
from runner.studies.depth.measure import PAPER, STUDY, DepthParams, PassContext
from runner.studies.depth.precision import perturbation_floor

if TYPE_CHECKING:
    import torch


class Params(DepthParams):
    """Distance ||y_t - x_t|| of a twin y_0 = x_0 + k eps/||eps|| from the trajectory, never
    renormalised, and the first elements of x_t and y_t (Fig. 4A; the slope of ln ||y_t - x_t|| is
    the LLE until the distance saturates)."""

    kind: Literal["twin_distance"]
    samples: list[int] = Field(default_factory=lambda: [0], min_length=1)
    """Samples that get a twin (the paper: one sentence, that of Fig. 2A)."""
    k: float = Field(1.0, gt=0)
    """||epsilon|| (paper: 1.0)."""
    steps: int | None = Field(None, ge=1)
    """Keep the first ``steps`` steps (default: the whole run)."""
    elements: list[int] = Field(default_factory=lambda: [0], min_length=1)
    """Elements of the first token vector kept for x_t and y_t (Fig. 4A top: the first)."""


# exit_period 1: its twins are never renormalised (advance is the identity); extends: the twins go
# on, nothing is computed at the end
class TwinDistance(StepMeasure, study=STUDY, reference=PAPER, params=Params,
                   tags=MeasureTags("step", step=StepTags(twin=Twin(), exit_period=1, extends=True))):
    """Its twins are extra rows of the pass's batch, one per sample in ``samples``, advanced by the
    same application of f as x and never renormalised."""

    def problems(self, view):
        return super().problems(view) + self._spec_problems(view.spec) + view.untrusted("k", self._precision_problem)

    def _spec_problems(self, spec):
        out = []
        bad = [s for s in self.p.samples if not 0 <= s < spec.input.samples]
        if bad:
            out.append(("samples", f"samples {bad} out of range (input.samples = {spec.input.samples})"))
        if len(set(self.p.samples)) != len(self.p.samples):
            out.append(("samples", "a sample is listed twice"))
        if self.p.steps is not None and self.p.steps > spec.dynamics.steps:
            out.append(("steps", f"{self.p.steps} is more than dynamics.steps = {spec.dynamics.steps}"))
        return out

    def _precision_problem(self, net):
        precision, n_tokens, n_hidden = net.precision, net.n_tokens, net.n_hidden
        floor = perturbation_floor(precision, n_tokens, n_hidden)
        if self.p.k < floor:
            return (f"k = {self.p.k:g} is not trusted in {precision} for a {n_tokens}x{n_hidden} state (need "
                    f"k >= {floor:.2g}, ten times a step's rounding); raise k or use fp32/fp64")
        return None

    def n_twins(self, samples: int) -> int:
        return len(self.p.samples)

    def _last(self, steps: int) -> int:
        return min(self.p.steps or steps, steps)

    def variables(self, b, shape) -> None:
        dim = b.axis("twin_step", 0, self._last(shape.steps), 1, long_name="step t")
        b.coord("twin_sample", np.array(self.p.samples), long_name="sample with a twin")
        b.coord("twin_element", np.array(self.p.elements), long_name="element of the first token vector")
        dims = ("network", "twin_sample", dim)
        b.var("twin_distance", "twin_distance", dims, "float64", np.nan, "twin distance ||y_t - x_t||", "1",
              "Euclidean distance between the whole states y_t = f^t(x_0 + k eps/||eps||) and x_t, never "
              "renormalised (Fig. 4A bottom; its exponential growth rate is the LLE)", k=self.p.k)
        for name, what in (("twin_x", "x_t"), ("twin_y", "y_t")):
            b.var(name, "twin_distance", dims + ("twin_element",), "float32", np.nan, f"{what}[0, e]", "1",
                  f"selected elements of the first token vector of {what} (Fig. 4A top)")

    def rows(self, ctx: PassContext) -> torch.Tensor:
        import torch  # lazy: torch

        return torch.as_tensor(self.p.samples, device=ctx.device)

    def perturb(self, ctx: PassContext, x0):
        import torch  # lazy: torch

        gen = torch.Generator().manual_seed(ctx.net.seed("twin_distance"))
        return initial_perturbation(x0[self.rows(ctx)], self.p.k, gen)

    def _span(self, seg) -> tuple[int, int]:
        """The steps of ``seg`` that are kept: [lo, hi)."""
        hi = min(seg.end + (1 if seg.last else 0), self._last(seg.steps) + 1)
        return seg.start, max(seg.start, hi)

    def buffers(self, ctx: PassContext, seg):
        import torch  # lazy: torch

        lo, hi = self._span(seg)
        n, e = len(self.p.samples), len(self.p.elements)
        return {"distance": self.nan((n, hi - lo), torch.float64, ctx.device),
                "x": self.nan((n, hi - lo, e), torch.float32, ctx.device),
                "y": self.nan((n, hi - lo, e), torch.float32, ctx.device)}

    def observe(self, ctx: PassContext, t, x, bufs, seg):
        import torch  # lazy: torch

        lo, hi = self._span(seg)
        if not lo <= t < hi:
            return None
        if not hasattr(self, "where"):  # device index tensors, made once
            el = torch.as_tensor(self.p.elements, device=ctx.device)
            self.where = (self.rows(ctx), el.clamp(max=x.shape[2] - 1), el < x.shape[2])
        rows, el, valid = self.where
        y, xs = ctx.twin(self), x[rows]
        bufs["distance"][:, t - lo] = (y - xs).flatten(1).double().norm(dim=1)
        for name, state in (("x", xs), ("y", y)):  # elements of token 0 (a map's state is one token)
            v = state[:, 0, el].float()
            bufs[name][:, t - lo] = torch.where(valid, v, torch.full_like(v, float("nan")))
        return None

    def write(self, ctx: PassContext, bufs, seg):
        lo, hi = self._span(seg)
        if hi == lo:
            return
        region = (ctx.index, slice(None), slice(lo, hi))
        ctx.store.write("twin_distance", region, bufs["distance"].cpu().numpy())
        ctx.store.write("twin_x", region + (slice(None),), bufs["x"].cpu().numpy())
        ctx.store.write("twin_y", region + (slice(None),), bufs["y"].cpu().numpy())
