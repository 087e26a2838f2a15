"""Local Lyapunov exponent lambda(t) (Inoue et al. 2021, Algorithm A1, Appendix C; Fig. 2C, 4B)."""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from pydantic import Field

from analyses.lyapunov import initial_perturbation, renormalize
from runner.plugin.measures import MeasureTags, hints, register
from runner.plugin.timings import StepMeasure
from runner.studies.depth.measure import PAPER, STUDY, DepthParams, PassContext
from runner.studies.depth.precision import perturbation_floor


class Params(DepthParams):
    """Local Lyapunov exponent lambda(t), Algorithm A1 (Appendix C)."""

    kind: Literal["lyapunov"]
    k: float = Field(1.0, gt=0)
    """Perturbation norm (paper: 1.0)."""
    tau: int = Field(10, ge=1)
    """Renormalisation interval (paper: 10 short-term, 50 long-term)."""


@register
class Lyapunov(StepMeasure):
    """The batch holds x and its twin y = x + k eps/||eps||; every tau steps lambda = ln(||y - x|| / k)
    and y is renormalised to distance k (Algorithm A1)."""

    study = STUDY
    reference = PAPER
    Params = Params
    precision_checked = {"tf32": True, "bf16": False}
    # twins_in_key False: its twins came before the key listed twins, so specs with only them keep their
    # ids; shard "samples": one twin per sample, drawn for the whole batch and sliced, so a shard's lambda
    # is exact; exit_period tau: advance renormalises at multiples of tau
    tags = MeasureTags("step", strides=("tau",), twin=True, twins_in_key=False, shard="samples", exit_period="tau")

    def variables(self, b, shape) -> None:
        tau = self.p.tau
        dim = b.axis("lyapunov_step", 0, (shape.steps // tau - 1) * tau, tau, long_name="interval start t")
        desc = "lambda(t) = ln(||y_{t+tau} - x_{t+tau}|| / k), y_t = x_t + k eps/||eps|| (Algorithm A1); -inf where " \
               "the perturbation collapsed to 0 in the working precision, NaN where the sample diverged"
        dtype = "float64" if shape.float64 else "float32"  # lambda is computed in float64; kept so when asked for
        b.var("lyapunov", "lyapunov", ("network", "sample", dim), dtype, np.nan,
              f"local Lyapunov exponent lambda(t) over tau = {tau} steps", "1", desc, k=self.p.k, tau=tau)
        b.var("lyapunov_per_step", "lyapunov", ("network", "sample", dim), dtype, np.nan,
              "local Lyapunov exponent per step", "1/step", "lambda(t) / tau", k=self.p.k, tau=tau,
              **hints(plot="series", order=0, headline=("mean lambda/step", "finite_mean")))

    def precision_problem(self, precision, n_tokens, n_hidden):
        floor = perturbation_floor(precision, n_tokens, n_hidden)
        if self.p.k < floor:
            return "k", (f"k = {self.p.k:g} is not trusted in {precision} for a {n_tokens}x{n_hidden} state: rounding "
                         f"moves it by about {floor / 10:.2g} per step (need k >= {floor:.2g}); raise k or use "
                         "fp32/fp64")
        return None

    def perturb(self, ctx: PassContext, x0):
        gen = torch.Generator().manual_seed(ctx.net.seed("perturbation"))
        return initial_perturbation(x0, self.p.k, gen)

    def buffers(self, ctx: PassContext, seg):
        return {"lyapunov": self.nan((ctx.S, (seg.end - seg.start) // self.p.tau), torch.float64, ctx.device)}

    def advance(self, ctx: PassContext, t, x, y, bufs, seg):
        tau = self.p.tau
        if t % tau:
            return y
        lam, y = renormalize(x, y, self.p.k)
        if "lyapunov" in bufs:  # this pass measures it (a pass may iterate the twin for another measure's sake)
            bufs["lyapunov"][:, t // tau - 1 - seg.start // tau] = lam
        return y

    def write(self, ctx: PassContext, bufs, seg):
        tau = self.p.tau
        lam = bufs["lyapunov"].cpu().numpy()
        region = (ctx.index, slice(None), slice(seg.start // tau, seg.start // tau + lam.shape[1]))
        ctx.store.write("lyapunov", region, lam)  # the store casts to the variable's dtype (float32 unless fp64)
        ctx.store.write("lyapunov_per_step", region, lam / tau)
