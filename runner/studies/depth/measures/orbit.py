"""What each sample's orbit settled on at the end of the run, by recurrence and the 0-1 test for chaos
(:func:`analyses.orbits.classify_orbits`): beside the paper's sign criterion (Inoue et al. 2021,
Sec. II.B, ``transient_chaos``), which reads a smooth oscillation as chaos."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from analyses.orbits import (CHAOS_DRAWS, CHAOS_K, GAP, GROWTH, KAPPA, MIN_CHAOS_STATES, NOISE, ORBIT_CLASSES,
                             PERIODIC_TOL, RECURRENCE, REPETITIONS, ROUNDING, classify_orbits)
from runner.core.layout import flags
from runner.plugin.measures import MeasureTags, StepTags, hints
from runner.plugin.timings import StepMeasure
from runner.studies.depth.measure import STUDY, DepthParams, PassContext
from runner.studies.depth.resolve import derive_seed

#: The codes of ``orbit_class``: the classes, and not applicable.
OUTCOMES = (*ORBIT_CLASSES, "not_applicable")
CHAOS_01 = ("Gottwald & Melbourne 2004, A new test for chaos in deterministic systems, Proc. R. Soc. A 460, 603; "
            "Gottwald & Melbourne 2009, On the implementation of the 0-1 test for chaos, SIAM J. Appl. Dyn. Syst. 8, "
            "129")


class Params(DepthParams):
    """Orbit class per sample from the last states (recurrence; Lathrop & Kostelich 1989, Marwan et al. 2007)."""

    kind: Literal["orbit"]
    window: int = Field(1024, ge=8)
    """Last states classified (at most half the run's steps)."""
    projection: int = Field(16, ge=1)
    """States are kept as random projections to this many dimensions (distances kept up to a small
    factor); a state with fewer elements is kept whole."""
    periodic_tol: float = Field(PERIODIC_TOL, gt=0, lt=1)
    """Periodic at least when every state returns, p steps later, within this fraction of the orbit's RMS
    radius (a noisy cycle: within its own noise level, estimated from the returns)."""
    recurrence: float = Field(RECURRENCE, gt=0)
    """Recurrence-plot threshold, as a fraction of the orbit's RMS radius (quasi-periodic below it)."""
    repetitions: int = Field(REPETITIONS, ge=4)
    """A period is accepted only if the window holds it this many times (a longer cycle reads quasi-periodic)."""


# extends: the window's first step never moves back as the run grows (extend_state)
class Orbit(StepMeasure, study=STUDY, params=Params,
            tags=MeasureTags("step", step=StepTags(shard="samples", extends=True,
                                                   extend_note="the orbit classes of its last states"))):
    version = 3  # 2: fundamental periods, tolerances relative to the orbit's extent, drifting (issue 35);
    # 3: periods of noisy cycles from their own noise level, the 0-1 test for chaos (orbit_chaos_01) (issue 49)
    reference = ("Lathrop & Kostelich 1989, Characterization of an experimental strange attractor by periodic orbits, "
                 "Phys. Rev. A 40, 4028; Marwan, Romano, Thiel & Kurths 2007, Recurrence plots for the analysis of "
                 f"complex systems, Phys. Rep. 438, 237; {CHAOS_01}")

    # no exit_period (the default None): it keeps every state of its window, which a sample that
    # leaves the batch early would not give

    def window(self, steps: int) -> int:
        return min(self.p.window, steps // 2 + 1)

    def extend_state(self, state, old_steps, new_steps):
        """The window of a longer run starts no earlier (first = T + 1 - W is non-decreasing in T):
        the kept states it shares move to their new places, the rest wait for the steps to come."""
        import torch  # lazy: torch

        kept, first = state["kept"], int(state["first"])
        W = self.window(new_steps)
        new_first = new_steps + 1 - W
        moved = torch.full((W, *kept.shape[1:]), float("nan"), dtype=kept.dtype, device=kept.device)
        n = min(W, first + len(kept) - new_first)
        if n > 0:
            moved[:n] = kept[new_first - first: new_first - first + n]
        return {**state, "kept": moved, "first": torch.tensor(new_first)}

    def variables(self, b, shape) -> None:
        m, W = "orbit", self.window(shape.steps)
        p = self.p
        tolerances = {"window": W, "periodic_tol": p.periodic_tol, "recurrence": p.recurrence,
                      "repetitions": p.repetitions, "rounding_ulps": ROUNDING, "growth": GROWTH, "noise_within": KAPPA,
                      "noise_gap": GAP, "noise_max": NOISE, "chaos_01_regular_below": CHAOS_K}
        b.var("orbit_class", m, ("network", "sample"), "int8", -1, "orbit class at the end of the run", None,
              f"recurrence over the last {W} states, the last half classified, tolerances relative to the "
              f"orbit's RMS radius s (analyses.orbits): fixed point (stopped to within {ROUNDING:g} units in the "
              "last place, or contracting onto a point), periodic (at the fundamental period orbit_period, at most "
              f"{W // p.repetitions} steps: the RMS return at it and its multiples within {KAPPA:g} times the noise "
              f"level, the smallest RMS return, every other lag at least {GAP:g} times it, noise level at most "
              f"{NOISE:g} s; or every state returns within {p.periodic_tol:g} s, or contracting onto that cycle), "
              f"quasi-periodic (bounded, no period, returns within {p.recurrence:g} s at a fixed lag, or regular by "
              f"the 0-1 test for chaos, orbit_chaos_01 below {CHAOS_K:g}), chaotic (bounded, neither: chaos, or a "
              "transient still going), diverged (not finite, or running away), censored (too few states, or a "
              "slowing drift with more way left than it went), drifting (finite, moving away: unbounded as far as "
              "the window shows); compare chaos_outcome, the paper's sign criterion",
              **flags(*OUTCOMES), **tolerances)
        b.var("orbit_period", m, ("network", "sample"), "float64", np.nan, "orbit period (steps)", "1",
              "the fundamental period of a periodic orbit (the smallest lag at which it returns within its own noise "
              "level, or within periodic_tol of its RMS radius); for a quasi-periodic one the lag of its closest "
              "return; NaN otherwise",
              **hints(headline=("median orbit period", "median")), **tolerances)
        b.var("orbit_closest_return", m, ("network", "sample"), "float64", np.nan,
              "closest return relative to the orbit's size", "1",
              "min over lags p of max_t ||x_t - x_{t-p}|| / s (s the orbit's RMS radius), over the last half of the "
              f"window: 0 for an exact period, below {p.recurrence:g} quasi-periodic")
        b.var("orbit_chaos_01", m, ("network", "sample"), "float32", np.nan, "0-1 test for chaos K", "1",
              f"K of the 0-1 test for chaos (Gottwald & Melbourne 2004) over the last {W} states projected on a fixed "
              f"random direction: the median over {CHAOS_DRAWS} seeded c in (pi/5, 4 pi/5) of the correlation of the "
              "mean square displacement D_c(n) with n, n up to a tenth of the window (Gottwald & Melbourne 2009, "
              f"Sec. 3): near 0 regular, near 1 chaotic; an orbit with no period is quasi-periodic where K < "
              f"{CHAOS_K:g}; NaN with fewer than {MIN_CHAOS_STATES} states, non-finite or constant ones",
              reference=CHAOS_01)

    def mark_not_applicable(self, store, network: int) -> None:
        n = len(store.read("orbit_class", (network,)))
        store.write("orbit_class", (network,), np.full(n, OUTCOMES.index("not_applicable"), np.int8))

    def start(self, ctx: PassContext, x0) -> None:
        import torch  # lazy: torch

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
        import torch  # lazy: torch

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
        orbits = classify_orbits(self.kept, periodic_tol=self.p.periodic_tol, recurrence=self.p.recurrence,
                                 repetitions=self.p.repetitions)
        rows = (ctx.index, slice(None))
        ctx.store.write("orbit_class", rows, orbits.kind.cpu().numpy())
        ctx.store.write("orbit_period", rows, orbits.period.cpu().numpy())
        ctx.store.write("orbit_closest_return", rows, orbits.closest_return.cpu().numpy())
        ctx.store.write("orbit_chaos_01", rows, orbits.chaos_01.float().cpu().numpy())
