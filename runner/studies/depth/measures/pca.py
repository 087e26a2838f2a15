"""PCA projection of a window of one trajectory (Inoue et al. 2021, Fig. 4C)."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from analyses.pca import pca_projection
from runner.plugin.measures import MeasureTags, StepTags
from runner.plugin.timings import StepMeasure
from runner.studies.depth.measure import PAPER, STUDY, DepthParams, PassContext, sample_problems


class Params(DepthParams):
    """PCA projection of a window of one trajectory (Fig. 4C)."""

    kind: Literal["pca"]
    samples: list[int] = Field(default_factory=lambda: [0], min_length=1)
    start: int = Field(0, ge=0)
    stop: int | None = Field(None, ge=1)
    """Last step of the window (default: the last step)."""
    every: int = Field(1, ge=1)
    components: int = Field(2, ge=1, le=16)
    max_points: int = Field(5000, ge=2)
    """Refuse windows with more points than this (they are held in memory)."""


# exit_period 1: it observes x_t only; extends: its points so far are its state (extend_state), the
# PCA is done at the end
class PCA(StepMeasure, study=STUDY, reference=PAPER, params=Params,
          tags=MeasureTags("step", step=StepTags(strides=("every",), exit_period=1, extends=True,
                                                 extend_note="the PCA of its window"))):
    def window(self, steps: int) -> tuple[int, int]:
        return self.p.start, self.p.stop or steps

    def extend_state(self, state, old_steps, new_steps):
        """A window that ends at the last step gets room for the points to come (NaN)."""
        import torch  # lazy: torch

        kept, n = state["points"], self.points(new_steps)
        more = torch.full((n - len(kept), *kept.shape[1:]), float("nan"), dtype=kept.dtype, device=kept.device)
        return {**state, "points": torch.cat([kept, more])}

    def extend_note(self, old_steps: int, new_steps: int) -> str:
        start, stop = self.window(old_steps)
        if self.p.stop is not None:
            return f"its window (steps {start}-{stop}) does not move: the PCA of the same points"
        return super().extend_note(old_steps, new_steps)

    def points(self, steps: int) -> int:
        start, stop = self.window(steps)
        return (stop - start) // self.p.every + 1

    def state_nbytes(self, steps, sample_nbytes):
        return self.points(steps) * len(self.p.samples) * sample_nbytes  # the window, kept on the device

    def problems(self, view):
        # not StepMeasure's stride check: every > steps keeps the window's first point; the window is checked here
        return sample_problems(self.p.samples, view.spec) + self._spec_problems(view.spec)

    def _spec_problems(self, spec):
        steps = spec.dynamics.steps
        start, stop = self.window(steps)
        if not start < stop <= steps:
            return [("stop" if self.p.stop else "start",
                     f"need start < stop <= [dynamics] steps ({steps}); got start = {start}, stop = {stop}")]
        if self.points(steps) > self.p.max_points:
            return [("max_points", f"the window holds {self.points(steps)} points, more than max_points = "
                                   f"{self.p.max_points}; raise max_points, shorten the window or raise every")]
        return []

    def variables(self, b, shape) -> None:
        start, stop = self.window(shape.steps)
        dim = b.axis("pca_step", start, stop, self.p.every, chunked=False)  # written once, at the end
        b.coord("pca_sample", np.array(self.p.samples), long_name="sample projected")
        b.coord("component", np.arange(self.p.components), long_name="principal component")
        b.var("pca_projection", "pca", ("network", "pca_sample", dim, "component"), "float32", np.nan,
              "principal component score", "1", "x_t projected on the top principal axes of the window (Fig. 4C)")
        b.var("pca_explained_variance", "pca", ("network", "pca_sample", "component"), "float64", np.nan,
              "explained variance ratio", "1", "share of the window's variance along each principal axis")

    def start(self, ctx: PassContext, x0):
        import torch  # lazy: torch

        self.kept = torch.full((self.points(ctx.T), len(self.p.samples), *x0.shape[1:]), float("nan"), dtype=x0.dtype,
                               device=ctx.device)

    def state_dict(self):
        return {"points": self.kept}

    def load_state_dict(self, state):
        self.kept = state["points"]

    def observe(self, ctx: PassContext, t, x, bufs, seg):
        import torch  # lazy: torch

        first, last = self.window(ctx.T)
        if first <= t <= last and (t - first) % self.p.every == 0:
            if not hasattr(self, "index"):
                self.index = torch.tensor(self.p.samples, device=ctx.device)
            self.kept[(t - first) // self.p.every] = x[self.index]

    def write(self, ctx: PassContext, bufs, seg):
        import torch  # lazy: torch

        if not seg.last:
            return
        points, components = self.kept, self.p.components
        n_points, n_samples = points.shape[:2]
        proj = np.full((n_samples, n_points, components), np.nan, dtype=np.float32)
        ratio = np.full((n_samples, components), np.nan)
        for s in range(n_samples):
            pts = points[:, s].flatten(1)
            keep = torch.isfinite(pts).all(1)
            n = min(components, int(keep.sum()) - 1, pts.shape[1])
            if n >= 1:
                pr, r = pca_projection(pts[keep], n)
                proj[s, keep.cpu().numpy(), :n] = pr.cpu().numpy()
                ratio[s, :n] = r.cpu().numpy()
        ctx.store.write("pca_projection", (ctx.index,), proj)
        ctx.store.write("pca_explained_variance", (ctx.index,), ratio)
