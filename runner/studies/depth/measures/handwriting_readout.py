"""Handwriting task: the trajectory x_t, t in [t0, t0 + dT], writes "U" or "S" (Inoue et al. 2021,
Fig. 3C, Appendix E).

The samples are sentence pairs with a score (``[input] pair``, ``score``; the paper: STS-B).
Pairs scored below ``low`` = 1.0 ("unrelated") are to write the first letter, "U"; pairs above
``high`` = 4.0 ("similar") the second, "S"; the others are not used. A linear regression with two
outputs and a bias maps the state of one token (``token``, default 0: ``[CLS]``; the paper does
not say which vector) at each t in [t0, t0 + dT] to the letter's pen direction v_t; one regression
per (t0, dT), shared by both letters, fitted on the first ``train_fraction`` of the used pairs
(the paper does not give the split; 0.8) and scored by the NMSE of Appendix E on the others
(``analyses/handwriting.py``: letter outlines from the font ``font`` through matplotlib's
``TextPath``, the paper's Arial by default, matplotlib's DejaVu Sans when Arial is not installed;
the font used is recorded in the store's ``handwriting_font`` attribute). The grid of (t0, dT) is
not given by the paper; the default, t0 = 0..50 and dT = 4..50, holds its best cell (t0 = 7,
dT = 28), whose outputs on the held-out pairs are kept for the demonstration (``demo``).

The states of the used pairs over the window [min t0, max t0 + max dT] are kept on the device
(and in the durable points) and the grid is fitted when the window ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from analyses.handwriting import letter_path, nmse_grid, pen_directions
from runner.core.layout import counts
from runner.plugin.measures import MeasureTags, StepTags, hints
from runner.plugin.timings import StepMeasure
from runner.studies.depth.measure import PAPER, STUDY, DepthParams, PassContext

if TYPE_CHECKING:
    import torch


class Params(DepthParams):
    """NMSE grid over (t0, dT) of a linear regression from x_t, t in [t0, t0 + dT], to the pen directions
    of "U" (pairs scored < 1) and "S" (> 4) (Fig. 3C, Appendix E); needs sentence pairs ([input] pair, score)."""

    kind: Literal["handwriting_readout"]
    t0_start: int = Field(0, ge=0)
    """Smallest offset t0."""
    t0_stop: int = Field(50, ge=0)
    """Largest offset t0."""
    dt_start: int = Field(4, ge=1)
    """Smallest length dT."""
    dt_stop: int = Field(50, ge=1)
    """Largest length dT."""
    grid_every: int = Field(1, ge=1)
    """Spacing of the grid along t0 and dT."""
    demo: list[int] = Field([7, 28], min_length=2, max_length=2)
    """(t0, dT) whose held-out outputs are stored (the paper's Fig. 3C right: 7, 28)."""
    letters: list[str] = Field(["U", "S"], min_length=2, max_length=2)
    """The letters written for unrelated and for similar pairs."""
    low: float = 1.0
    """Pairs scored below this write the first letter (the paper: 1.0)."""
    high: float = 4.0
    """Pairs scored above this write the second letter (the paper: 4.0)."""
    font: str = "Arial"
    """Font family of the letters (the paper: Arial; matplotlib falls back to DejaVu Sans)."""
    token: int = Field(0, ge=0)
    """Token position read out (0: [CLS])."""
    train_fraction: float = Field(0.8, gt=0, lt=1)
    """The first used pairs the regression is fitted on; it is scored on the rest."""
    ridge: float = Field(1e-6, ge=0)
    """Ridge penalty relative to the mean diagonal of X^T X (conditioning only)."""

    def t0s(self) -> list[int]:
        return list(range(self.t0_start, self.t0_stop + 1, self.grid_every))

    def dts(self) -> list[int]:
        return list(range(self.dt_start, self.dt_stop + 1, self.grid_every))


# exit_period 1: it observes x_t only (its readouts are fitted to the stored states, not through f)
class HandwritingReadout(StepMeasure, study=STUDY, reference=PAPER, params=Params,
                         tags=MeasureTags("step", requires=("text",), step=StepTags(exit_period=1))):
    def window(self) -> tuple[int, int]:
        return self.p.t0_start, max(self.p.t0s()) + max(self.p.dts())

    def problems(self, view):
        return super().problems(view) + self._spec_problems(view.spec)

    def _spec_problems(self, spec):
        out = []
        p = self.p
        if spec.input.score is None or not spec.text_models:
            out.append(("kind", "handwriting_readout reads sentence pairs with a score: set [input] pair and score "
                                "(e.g. GLUE STS-B) and a text model"))
        if any(len(c) != 1 or c.isspace() for c in p.letters) or p.letters[0] == p.letters[1]:
            out.append(("letters", f"two different letters of one visible character each (e.g. [\"U\", \"S\"]), "
                                   f"not {p.letters}"))
        if p.t0_stop < p.t0_start or p.dt_stop < p.dt_start:
            out.append(("t0_stop" if p.t0_stop < p.t0_start else "dt_stop", "the grid is empty: stop < start"))
        elif self.window()[1] > spec.dynamics.steps:
            out.append(("t0_stop", f"the window ends at t0_stop + dt_stop = {self.window()[1]}, beyond [dynamics] "
                                   f"steps = {spec.dynamics.steps}"))
        elif p.demo[0] not in p.t0s() or p.demo[1] not in p.dts():
            out.append(("demo", f"({p.demo[0]}, {p.demo[1]}) is not a cell of the grid"))
        if not p.low <= p.high:
            out.append(("high", f"need low <= high; got {p.low}, {p.high}"))
        if p.token >= spec.input.tokens:
            out.append(("token", f"{p.token} is beyond the {spec.input.tokens} tokens of a sample"))
        return out

    def variables(self, b, shape) -> None:
        p = self.p
        b.coord("hw_t0", np.asarray(p.t0s(), dtype=np.int64), long_name="offset t0 (steps)", **counts("steps"))
        b.coord("hw_dt", np.asarray(p.dts(), dtype=np.int64), long_name="length dT (steps)", **counts("steps"))
        b.coord("hw_letter", list(p.letters), long_name="letter")
        b.index("hw_point", p.demo[1] + 1, long_name="point t - t0 of the demonstration")
        b.coord("pen", ["dx", "dy"], long_name="pen direction component")
        common = dict(letters=list(p.letters), low=p.low, high=p.high, font=p.font, token=p.token,
                      train_fraction=p.train_fraction)
        b.var("handwriting_nmse", "handwriting_readout", ("network", "hw_t0", "hw_dt"), "float64", np.nan,
              "handwriting NMSE", "1",
              "sum ||y(t) - d(t)||^2 / sum ||d(t)||^2 over t in [t0, t0 + dT] and the held-out pairs, y the output of a "
              "linear regression from [x_t[token], 1] to the pen directions d(t) of the letter (first: pairs scored < "
              "low, second: > high), fitted on the other pairs (Fig. 3C left, Appendix E); NaN for reference maps",
              **common, **hints(headline=("mean handwriting NMSE", "finite_mean")))
        b.var("handwriting_output", "handwriting_readout", ("network", "sample", "hw_point", "pen"), "float64", np.nan,
              "handwriting output at the demonstration cell", "1",
              "pen directions y(t), t = t0..t0 + dT at (t0, dT) = demo, of each held-out pair (NaN for the others; the "
              "pen position is their cumulative sum, Fig. 3C right)", demo=list(p.demo), **common)
        b.var("handwriting_target", "handwriting_readout", ("network", "hw_letter", "hw_point", "pen"), "float64",
              np.nan, "handwriting target at the demonstration cell", "1",
              "pen directions d(t) of each letter resampled to dT + 1 points (Appendix E)", demo=list(p.demo), **common)

    def _targets(self, n_points: int) -> torch.Tensor:
        import torch  # lazy: torch

        return torch.from_numpy(np.stack([pen_directions(self.paths[k], n_points) for k in range(2)]))

    def start(self, ctx: PassContext, x0) -> None:
        self.states = None

    def state_dict(self):
        return {} if getattr(self, "states", None) is None else {"states": self.states}

    def load_state_dict(self, state) -> None:
        self.states = state.get("states")

    def _setup(self, ctx) -> None:
        import torch  # lazy: torch

        scores = ctx.inputs.scores
        self.used = None
        if ctx.net.model.is_map or scores is None:
            return
        letter = torch.where(scores < self.p.low, 0, torch.where(scores > self.p.high, 1, -1))
        self.used = (letter >= 0).nonzero().flatten().to(ctx.device)  # host side: once per pass
        self.letter = letter[letter >= 0].to(ctx.device)
        self.train = torch.arange(len(self.letter), device=ctx.device) < int(self.p.train_fraction * len(self.letter))
        found = [letter_path(c, self.p.font) for c in self.p.letters]
        self.paths, self.font = [f[0] for f in found], found[0][1]
        self.result = None

    def observe(self, ctx: PassContext, t, x, bufs, seg):
        import torch  # lazy: torch

        first, last = self.window()
        if not first <= t <= last:
            return
        if not hasattr(self, "used"):
            self._setup(ctx)
        if self.used is None:
            return
        if getattr(self, "states", None) is None:
            self.states = torch.full((last - first + 1, len(self.used), x.shape[-1]), float("nan"), dtype=x.dtype,
                                     device=ctx.device)
        self.states[t - first] = x[self.used, self.p.token]
        if t == last:
            dts = self.p.dts()
            grid, kept = nmse_grid(self.states, self.letter, self.train, {d: self._targets(d + 1) for d in dts},
                                   self.p.t0s(), dts, first, self.p.ridge, keep=tuple(self.p.demo))
            self.result = grid, kept
            self.states = None  # the durable points after the window need not carry it

    def write(self, ctx: PassContext, bufs, seg):
        last = self.window()[1]
        if not (seg.start <= last < seg.end or (seg.last and last == seg.steps)) or getattr(self, "used", None) is None:
            return
        grid, kept = self.result
        ctx.store.write("handwriting_nmse", (ctx.index, slice(None), slice(None)), grid.cpu().numpy())
        out = np.full((ctx.S, self.p.demo[1] + 1, 2), np.nan)
        held = ~self.train.cpu().numpy()
        out[self.used.cpu().numpy()[held]] = kept.cpu().numpy()[held]
        ctx.store.write("handwriting_output", (ctx.index, slice(None), slice(None), slice(None)), out)
        ctx.store.write("handwriting_target", (ctx.index, slice(None), slice(None), slice(None)),
                        self._targets(self.p.demo[1] + 1).numpy())
        ctx.store.set_attrs(handwriting_font=self.font)
