"""Local Lyapunov exponent lambda(t) (Inoue et al. 2021, Algorithm A1, Appendix C; Fig. 2C, 4B)."""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from pydantic import Field

from analyses.lyapunov import initial_perturbation, renormalize
from runner.core.layout import flags
from runner.plugin.measures import MeasureTags, StepTags, Twin, hints, register
from runner.plugin.timings import StepMeasure
from runner.studies.depth.measure import PAPER, STUDY, DepthParams, PassContext
from runner.studies.depth.precision import perturbation_floor

#: k may be at most this fraction of a map's domain width (and a twin farther out than this has left
#: the domain): Algorithm A1 measures the linearised map only while the perturbation is small
#: against the scale on which the map bends, which a bounded domain sets.
MAX_K_OF_DOMAIN = 1e-3
#: The perturbation norm of the paper (Algorithm A1, for ALBERT's hidden states), the default of a
#: network without a domain.
DEFAULT_K = 1.0

#: The codes of ``lyapunov_twin``, in order of precedence (a sample keeps the highest it reached).
TWIN_OUTCOMES = ("stayed", "nonlinear", "twin_diverged", "left_domain", "diverged")


class Params(DepthParams):
    """Local Lyapunov exponent lambda(t), Algorithm A1 (Appendix C)."""

    kind: Literal["lyapunov"]
    k: float | None = Field(None, gt=0)
    """Perturbation norm (paper: 1.0, for ALBERT's hidden states). Default: 1.0, and for a map that
    declares its domain a k between rounding and nonlinearity there (stored per network in
    ``lyapunov_k``)."""
    tau: int = Field(10, ge=1)
    """Renormalisation interval (paper: 10 short-term, 50 long-term)."""


@register
class Lyapunov(StepMeasure):
    """The batch holds x and its twin y = x + k eps/||eps||; every tau steps lambda = ln(||y - x|| / k)
    and y is renormalised to distance k (Algorithm A1)."""

    study = STUDY
    reference = PAPER
    Params = Params
    version = 2  # 2: lyapunov_twin, what happened to the twin; lyapunov_k (its tasks rerun to write them)
    precision_checked = {"tf32": True, "bf16": False}
    # twins_in_key False: its twins came before the key listed twins, so specs with only them keep their
    # ids; shard "samples": one twin per sample, drawn for the whole batch and sliced, so a shard's lambda
    # is exact; exit_period tau: advance renormalises at multiples of tau; extends: intervals start at
    # multiples of tau, so the kept twins go on as in a longer run
    tags = MeasureTags("step", step=StepTags(strides=("tau",), twin=Twin(in_key=False), shard="samples",
                                             exit_period="tau", extends=True, extend_note="its twins' outcome"))

    def variables(self, b, shape) -> None:
        tau = self.p.tau
        b.var("lyapunov_k", "lyapunov", ("network",), "float64", np.nan, "Lyapunov perturbation norm k", "1",
              "||y_t - x_t|| after each renormalisation (Algorithm A1): the table's k, or its default for the "
              "network (1.0; a map with a domain: a k between its rounding and nonlinearity)")
        dim = b.axis("lyapunov_step", 0, (shape.steps // tau - 1) * tau, tau, long_name="interval start t")
        desc = "lambda(t) = ln(||y_{t+tau} - x_{t+tau}|| / k), y_t = x_t + k eps/||eps|| (Algorithm A1); -inf where " \
               "the perturbation collapsed to 0 in the working precision, NaN where the sample diverged"
        dtype = "float64" if shape.float64 else "float32"  # lambda is computed in float64; kept so when asked for
        b.var("lyapunov", "lyapunov", ("network", "sample", dim), dtype, np.nan,
              f"local Lyapunov exponent lambda(t) over tau = {tau} steps", "1", desc, **self._k_attrs(), tau=tau)
        b.var("lyapunov_per_step", "lyapunov", ("network", "sample", dim), dtype, np.nan,
              "local Lyapunov exponent per step", "1", "lambda(t) / tau", **self._k_attrs(), tau=tau,
              **hints(plot="series", order=0, headline=("mean lambda/step", "finite_mean")))
        b.var("lyapunov_twin", "lyapunov", ("network", "sample"), "int8", -1, "Lyapunov twin outcome", None,
              f"the worst of: stayed, the twin y stayed finite (and, for a map that declares a domain, within "
              f"{MAX_K_OF_DOMAIN:g} of its width from x at each renormalisation and inside it); nonlinear, ||y - x|| "
              f"grew beyond {MAX_K_OF_DOMAIN:g} of the domain's width within an interval, out of the linear regime "
              "(lower k or tau); twin_diverged, y became non-finite while x did not (lambda NaN); left_domain, y "
              "left the domain by more than that while x did not diverge (lambda there, NaN once y runs off, is not "
              "the map's); diverged, "
              "the state x diverged (see diverged_step)", **self._k_attrs(), tau=tau, **flags(*TWIN_OUTCOMES))

    def _k_attrs(self) -> dict:
        return {"k": self.p.k} if self.p.k is not None else {}  # else per network: lyapunov_k

    def k_for(self, net) -> float:
        """The perturbation norm for the resolved network ``net``: the table's k, or its default."""
        if self.p.k is not None:
            return self.p.k
        domain = net.model.family.domain(net.model.source)
        if domain is None:
            return DEFAULT_K
        return float(f"{valid_k(domain[1] - domain[0], net.precision, net.n_hidden):.0e}")

    _pass_bounds: tuple | None = None

    def _bounds(self, ctx: PassContext) -> tuple[float, tuple[float, float] | None, float | None]:
        """(k, the map's domain or None, how far beyond it a twin has left it) of this pass's network,
        worked out once per pass (one instance per pass) from the family's domain, as plan checks it."""
        if self._pass_bounds is None:
            domain = ctx.net.model.family.domain(ctx.net.model.source)
            margin = None if domain is None else MAX_K_OF_DOMAIN * (domain[1] - domain[0])
            self._pass_bounds = (self.k_for(ctx.net), domain, margin)
        return self._pass_bounds

    def _precision_problem(self, net):
        precision, n_tokens, n_hidden = net.precision, net.n_tokens, net.n_hidden
        floor = perturbation_floor(precision, n_tokens, n_hidden)
        if self.p.k is not None and self.p.k < floor:  # a default k is above the floor by construction
            return (f"k = {self.p.k:g} is not trusted in {precision} for a {n_tokens}x{n_hidden} state: rounding "
                    f"moves it by about {floor / 10:.2g} per step (need k >= {floor:.2g}); raise k or use "
                    "fp32/fp64")
        return None

    def problems(self, view) -> list[tuple[str, str]]:
        """Besides the strides: k must be small against the domain of every map that declares one, and (once
        the sizes are known) above the rounding of each network's precision."""
        spec = view.spec
        out = super().problems(view) + view.untrusted("k", self._precision_problem)
        if spec.dynamics.untrusted_perturbation or self.p.k is None:  # a default k is valid for each network
            return out
        for m in spec.model:
            domain = m.family.domain(m.source)
            if domain is None:
                continue
            width = domain[1] - domain[0]
            if self.p.k > MAX_K_OF_DOMAIN * width:
                n = m.family.dims(m.source, revision=None, params=m.params, n_tokens=1).n_hidden
                fix = valid_k(width, m.precision or spec.dynamics.precision, n)
                out.append(("k", f"{m.name}: k = {self.p.k:g} is not small against the domain [{domain[0]:g}, "
                            f"{domain[1]:g}] of {m.source} (need k <= {MAX_K_OF_DOMAIN:g} x its width = "
                            f"{MAX_K_OF_DOMAIN * width:g}): the twin leaves the linear regime, or the domain, and "
                            f"lambda is not the map's; set k = {fix:.0e} (or set [dynamics] untrusted_perturbation "
                            "= true)"))
                break
        return out

    def perturb(self, ctx: PassContext, x0):
        gen = torch.Generator().manual_seed(ctx.net.seed("perturbation"))
        return initial_perturbation(x0, self._bounds(ctx)[0], gen)

    def start(self, ctx: PassContext, x0):
        self.twin = torch.zeros(x0.shape[0], dtype=torch.int8, device=x0.device)  # TWIN_OUTCOMES codes

    def state_dict(self):
        return {"twin": self.twin}

    def load_state_dict(self, state):
        self.twin = state.get("twin")  # None: a checkpoint from before the outcome was kept (all "stayed" so far)

    def buffers(self, ctx: PassContext, seg):
        return {"lyapunov": self.nan((ctx.S, (seg.end - seg.start) // self.p.tau), torch.float64, ctx.device)}

    def observe(self, ctx: PassContext, t, x, bufs, seg):
        if t == ctx.T and self.twin is not None:  # the state at the end (tau need not divide the run)
            self._mark(x)
        return None

    def advance(self, ctx: PassContext, t, x, y, bufs, seg):
        tau = self.p.tau
        measures = "lyapunov" in bufs  # this pass measures it (a pass may iterate the twin for another measure's sake)
        if measures and self.twin is None:
            self.twin = torch.zeros(x.shape[0], dtype=torch.int8, device=x.device)
        k, domain, margin = self._bounds(ctx)
        if measures and domain is not None:
            out = ((y < domain[0] - margin) | (y > domain[1] + margin)).flatten(1).any(1)
            self._raise(out, "left_domain")
        if t % tau:
            return y
        lam, y = renormalize(x, y, k)
        if measures:
            bufs["lyapunov"][:, t // tau - 1 - seg.start // tau] = lam
            if margin is not None:
                self._raise(k * torch.exp(lam) > margin, "nonlinear")
            self._raise(torch.isnan(lam), "twin_diverged")
            self._mark(x)
        return y

    def _raise(self, where, outcome: str) -> None:
        """Samples ``where`` reached ``outcome`` (they keep the highest code)."""
        self.twin = torch.where(where, torch.clamp(self.twin, min=TWIN_OUTCOMES.index(outcome)), self.twin)

    def _mark(self, x):
        """Record a diverged state (its twin's NaN is then the state's)."""
        self._raise(~torch.isfinite(x.flatten(1)).all(1), "diverged")

    def write(self, ctx: PassContext, bufs, seg):
        tau = self.p.tau
        lam = bufs["lyapunov"].cpu().numpy()
        region = (ctx.index, slice(None), slice(seg.start // tau, seg.start // tau + lam.shape[1]))
        ctx.store.write("lyapunov", region, lam)  # the store casts to the variable's dtype (float32 unless fp64)
        ctx.store.write("lyapunov_per_step", region, lam / tau)
        if seg.last and self.twin is not None:
            ctx.store.write("lyapunov_twin", (ctx.index, slice(None)), self.twin.cpu().numpy())
        if seg.last:
            ctx.store.write("lyapunov_k", (ctx.index,), np.asarray(self._bounds(ctx)[0], dtype=np.float64))


def valid_k(width: float, precision: str, n_hidden: int) -> float:
    """A perturbation between rounding and nonlinearity for a map's state of ``n_hidden`` elements on
    a domain of ``width``: the geometric mean of the precision's floor and ``MAX_K_OF_DOMAIN * width``
    (this project's rule, no published source: as far from either bound in orders of magnitude)."""
    return (perturbation_floor(precision, 1, n_hidden) * MAX_K_OF_DOMAIN * width) ** 0.5
