"""What each sample's orbit settled on at the end of the run, by recurrence
(:func:`analyses.orbits.classify_orbits`): beside the paper's sign criterion (``transient_chaos``),
which reads a smooth oscillation as chaos."""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from pydantic import Field

from analyses.orbits import ORBIT_CLASSES, classify_orbits
from runner.core.layout import flags
from runner.plugin.measures import MeasureTags, hints, register
from runner.plugin.timings import StepMeasure
from runner.studies.depth.measure import STUDY, DepthParams, PassContext
from runner.studies.depth.resolve import derive_seed

#: The codes of ``orbit_class``: the classes, and not applicable.
OUTCOMES = (*ORBIT_CLASSES, "not_applicable")


class Params(DepthParams):
    """Orbit class per sample from the last states (recurrence; Lathrop & Kostelich 1989, Marwan et al. 2007)."""

    kind: Literal["orbit"]
    window: int = Field(1024, ge=8)
    """Last states classified (at most half the run's steps)."""
    projection: int = Field(16, ge=1)
    """States are kept as random projections to this many dimensions (distances kept up to a small
    factor); a state with fewer elements is kept whole."""
    periodic_tol: float = Field(1e-3, gt=0)
    """Exact recurrence: max_t ||x_t - x_{t-p}|| at most this fraction of the orbit's size."""
    recurrence: float = Field(0.1, gt=0)
    """Recurrence-plot threshold, as a fraction of the orbit's size (quasi-periodic below it)."""


@register
class Orbit(StepMeasure):
    study = STUDY
    Params = Params
    tags = MeasureTags("step", shard="samples")
    reference = ("Lathrop & Kostelich 1989, Characterization of an experimental strange attractor by periodic orbits, "
                 "Phys. Rev. A 40, 4028; Marwan, Romano, Thiel & Kurths 2007, Recurrence plots for the analysis of "
                 "complex systems, Phys. Rep. 438, 237")

    # no exit_period (the default None): it keeps every state of its window, which a sample that
    # leaves the batch early would not give

    def window(self, steps: int) -> int:
        return min(self.p.window, steps // 2 + 1)

    def variables(self, b, shape) -> None:
        m = "orbit"
        b.var("orbit_class", m, ("network", "sample"), "int8", -1, "orbit class at the end of the run", None,
              f"recurrence over the last {self.window(shape.steps)} states (analyses.orbits): a fixed point, a periodic "
              f"orbit (orbit_period), quasi-periodic (recurrences within {self.p.recurrence:.0%} of the orbit's size "
              "at a fixed lag), "
              "chaotic (no such lag: chaos, or a transient still going), diverged, censored (too few states); "
              "compare chaos_outcome, the paper's sign criterion",
              **flags(*OUTCOMES))
        b.var("orbit_period", m, ("network", "sample"), "float64", np.nan, "orbit period", "steps",
              "the period of a periodic orbit; for a quasi-periodic one the lag of its closest return; NaN otherwise",
              **hints(headline=("median orbit period", "median")))
        b.var("orbit_closest_return", m, ("network", "sample"), "float64", np.nan,
              "closest return relative to the orbit's size", "1",
              "min over lags p of max_t ||x_t - x_{t-p}|| / size, over the last half of the window: 0 for an exact "
              f"period, below {self.p.recurrence:g} quasi-periodic")

    def mark_not_applicable(self, store, network: int) -> None:
        n = len(store.read("orbit_class", (network,)))
        store.write("orbit_class", (network,), np.full(n, OUTCOMES.index("not_applicable"), np.int8))

    def start(self, ctx: PassContext, x0) -> None:
        W, features = self.window(ctx.T), x0[0].numel()
        k = min(self.p.projection, features)
        self.first = ctx.T + 1 - W  # x_t for t in [first, T] are kept
        self.kept = torch.full((W, len(x0), k), float("nan"), dtype=torch.float32, device=x0.device)
        if k == features:
            self.project = None
        else:
            gen = torch.Generator().manual_seed(derive_seed(ctx.spec.experiment.seed, "orbit projection", features))
            self.project = (torch.randn(features, k, generator=gen, dtype=torch.float64) / k**0.5).to(x0.device)

    def state_dict(self):
        state = {"kept": self.kept, "first": torch.tensor(self.first)}
        return state if self.project is None else {**state, "project": self.project}

    def load_state_dict(self, state) -> None:
        self.kept, self.first = state["kept"], int(state["first"])
        self.project = state.get("project")

    def observe(self, ctx: PassContext, t, x, bufs, seg):
        if t >= self.first:
            flat = x.flatten(1)
            self.kept[t - self.first] = (flat if self.project is None else flat.double() @ self.project).float()

    def write(self, ctx: PassContext, bufs, seg):
        if not seg.last:
            return
        orbits = classify_orbits(self.kept, periodic_tol=self.p.periodic_tol, recurrence=self.p.recurrence)
        rows = (ctx.index, slice(None))
        ctx.store.write("orbit_class", rows, orbits.kind.cpu().numpy())
        ctx.store.write("orbit_period", rows, orbits.period.cpu().numpy())
        ctx.store.write("orbit_closest_return", rows, orbits.closest_return.cpu().numpy())
