"""Local Lyapunov exponent lambda(t) (Inoue et al. 2021, Algorithm A1, Appendix C; Fig. 2C, 4B), with
checks of its own regime on the run.

Algorithm A1 measures the linearised map only while the twin's separation stays small against the
scale on which the map bends, and large against the rounding of the state. Both are checked for
every map, on the run:

- **resolution**: an interval whose separation at its end fell to within ``RESOLUTION`` times the
  rounding of the state (eps ||x||, :func:`analyses.lyapunov.unresolved`) measured rounding; a sample
  with more than ``UNRESOLVED_SHARE`` of such intervals is ``unresolved``;
- **linearity**: the first ``check_samples`` samples carry a second twin at ``check`` x k, in the same
  direction (Benettin et al. 1980: the exponent is the limit of vanishing separation). Their exponents,
  pooled over the checked samples' resolved intervals, must agree within
  :data:`~analyses.lyapunov.LINEARITY_RTOL` (or :data:`~analyses.lyapunov.LINEARITY_ATOL` per step);
  where they do not, k is outside the map's linear regime and every sample of the pass is ``nonlinear``.

``show``'s headline leaves out samples with any outcome but ``stayed`` and says how many; ``apply``
warns once per network.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from analyses.lyapunov import (LINEARITY_ATOL, RESOLUTION, initial_perturbation, nonlinear, renormalize, rounding_noise,
                               unresolved)
from runner.core.layout import flags
from runner.plugin.measures import MeasureTags, StepTags, Twin, hints
from runner.plugin.timings import StepMeasure
from runner.studies.depth.measure import PAPER, STUDY, DepthParams, PassContext
from runner.studies.depth.precision import UNIT_ROUNDOFF, perturbation_floor

if TYPE_CHECKING:
    import torch

#: k may be at most this fraction of a map's domain width (and a twin farther out than this has left
#: the domain): Algorithm A1 measures the linearised map only while the perturbation is small
#: against the scale on which the map bends, which a bounded domain sets.
MAX_K_OF_DOMAIN = 1e-3
#: A sample whose twin ended more than this share of its intervals at the rounding floor is
#: ``unresolved``: lambda there is the rounding's, and biased towards it (this project's choice).
UNRESOLVED_SHARE = 0.01

#: The codes of ``lyapunov_twin``, in order of precedence (a sample keeps the highest it reached).
TWIN_OUTCOMES = ("stayed", "unresolved", "nonlinear", "twin_diverged", "left_domain", "diverged")


def default_k_fraction(precision: str) -> float:
    """k over the states' RMS norm for a map with no declared domain: the square root of the unit
    roundoff, as far (in orders of magnitude) from the rounding of the state as from its size
    (fp64: 1.5e-8, fp32: 3.5e-4; Press et al., Numerical Recipes, Sec. 5.7, the same rule for the
    step of a finite difference)."""
    return UNIT_ROUNDOFF[precision] ** 0.5


class Params(DepthParams):
    """Local Lyapunov exponent lambda(t), Algorithm A1 (Appendix C)."""

    kind: Literal["lyapunov"]
    k: float | None = Field(None, gt=0)
    """Perturbation norm (paper: 1.0, for ALBERT's hidden states). Default, per network (stored in
    ``lyapunov_k``): for a map that declares its domain, a k between rounding and nonlinearity there;
    otherwise sqrt(unit roundoff) x the RMS norm of the states at t = 0 (:func:`default_k_fraction`)."""
    tau: int = Field(10, ge=1)
    """Renormalisation interval (paper: 10 short-term, 50 long-term)."""
    check: float = Field(0.1, gt=0, lt=1)
    """The linearity check's twin is at ``check`` x k, in the same direction as the first."""
    check_samples: int = Field(16, ge=0)
    """The first ``check_samples`` samples of each pass (shard) carry the check's twin (0: no check);
    it costs one more row of the batch each."""


# twins_in_key False: its twins came before the key listed twins, so specs with only them keep their
# ids; shard "samples": one twin per sample, drawn for the whole batch and sliced, so a shard's lambda
# is exact (each shard checks its own first samples); exit_period tau: advance renormalises at
# multiples of tau; extends: intervals start at multiples of tau, so the kept twins go on as in a
# longer run
class Lyapunov(StepMeasure, study=STUDY, reference=PAPER, params=Params,
               tags=MeasureTags("step", step=StepTags(strides=("tau",), twin=Twin(in_key=False), shard="samples",
                                                      exit_period="tau", extends=True,
                                                      extend_note="its twins' outcome"))):
    """The batch holds x and its twin y = x + k eps/||eps||; every tau steps lambda = ln(||y - x|| / k)
    and y is renormalised to distance k (Algorithm A1)."""

    version = 3  # 2: lyapunov_twin, what happened to the twin; lyapunov_k (its tasks rerun to write them);
    # 3: the linearity check's twins, unresolved intervals (lyapunov_regime), a default k from the states
    precision_checked = {"tf32": True, "bf16": False}

    def variables(self, b, shape) -> None:
        tau = self.p.tau
        b.var("lyapunov_k", "lyapunov", ("network",), "float64", np.nan, "Lyapunov perturbation norm k", "1",
              "||y_t - x_t|| after each renormalisation (Algorithm A1): the table's k, or its default for the "
              "network (a map with a domain: a k between its rounding and nonlinearity; otherwise sqrt(unit "
              "roundoff) x the RMS norm of the states at t = 0)")
        dim = b.axis("lyapunov_step", 0, (shape.steps // tau - 1) * tau, tau, long_name="interval start t")
        desc = "lambda(t) = ln(||y_{t+tau} - x_{t+tau}|| / k), y_t = x_t + k eps/||eps|| (Algorithm A1); -inf where " \
               "the perturbation collapsed to 0 in the working precision, NaN where the sample diverged"
        dtype = "float64" if shape.float64 else "float32"  # lambda is computed in float64; kept so when asked for
        b.var("lyapunov", "lyapunov", ("network", "sample", dim), dtype, np.nan,
              f"local Lyapunov exponent lambda(t) over tau = {tau} steps", "1", desc, **self._k_attrs(), tau=tau)
        b.var("lyapunov_per_step", "lyapunov", ("network", "sample", dim), dtype, np.nan,
              "local Lyapunov exponent per step", "1", "lambda(t) / tau", **self._k_attrs(), tau=tau,
              **hints(plot="series", order=0, headline=("mean lambda/step", "finite_mean"),
                      valid=("lyapunov_twin", ("stayed",))))
        b.var("lyapunov_regime", "lyapunov", ("network", "sample", dim), "int8", -1, "Lyapunov interval regime",
              None, f"resolved, the twin's separation at the interval's end was more than {RESOLUTION:g} times the "
              "rounding of the state (eps ||x||); unresolved, it was not: the twin collapsed onto the orbit in the "
              "working precision and lambda there measures rounding; nonlinear (checked samples only), both twins "
              "were resolved and their lambda over the interval disagreed beyond the linearity tolerance",
              **flags("resolved", "unresolved", "nonlinear"))
        b.var("lyapunov_check", "lyapunov", ("network", "sample"), "float64", np.nan,
              "Lyapunov exponent per step at check x k", "1",
              f"the mean of lambda/tau of the linearity check's twin, at {self.p.check:g} k in the direction of the "
              "first, over the intervals where both twins were resolved (NaN: no check's twin); lambda_per_step's mean "
              "over the same intervals must agree with it, pooled over the checked samples, or the pass is nonlinear",
              check=self.p.check)
        b.var("lyapunov_twin", "lyapunov", ("network", "sample"), "int8", -1, "Lyapunov twin outcome", None,
              f"the worst of: stayed, the twin y stayed finite, resolved and in the linear regime; unresolved, in more "
              f"than {UNRESOLVED_SHARE:.0%} of its intervals the twin's separation fell to the rounding floor (see "
              f"lyapunov_regime); nonlinear, the exponent at k disagreed with the check's at {self.p.check:g} k "
              "(pooled over the pass's checked samples; see lyapunov_check), or, for a map that declares a domain, "
              f"||y - x|| grew beyond {MAX_K_OF_DOMAIN:g} of the domain's width within an interval: k is outside the "
              "linear regime (lower k or tau); twin_diverged, y became non-finite while x did not (lambda NaN); "
              f"left_domain, y left the domain by more than {MAX_K_OF_DOMAIN:g} of its width while x did not diverge "
              "(lambda there, NaN once y runs off, is not the map's); diverged, the state x diverged (see "
              "diverged_step)", **self._k_attrs(), tau=tau, **flags(*TWIN_OUTCOMES))

    def _k_attrs(self) -> dict:
        return {"k": self.p.k} if self.p.k is not None else {}  # else per network: lyapunov_k

    def k_for(self, net, x0=None) -> float | None:
        """The perturbation norm for the resolved network ``net``: the table's k, its domain's default,
        or (None without ``x0``, the states at t = 0 of all samples) the default from the states."""
        if self.p.k is not None:
            return self.p.k
        domain = net.model.family.domain(net.model.source)
        if domain is not None:
            return float(f"{valid_k(domain[1] - domain[0], net.precision, net.n_hidden):.0e}")
        if x0 is None:
            return None
        rms = float(x0.flatten(1).double().norm(dim=1).pow(2).mean().sqrt())
        rms = rms if rms > 0 and np.isfinite(rms) else 1.0
        return float(f"{default_k_fraction(net.precision) * rms:.1e}")

    def default_note(self, net) -> str | None:
        """What ``plan`` says of the network's default k (None: the table gives k)."""
        if self.p.k is not None:
            return None
        k = self.k_for(net)
        return f"k={k:g}" if k is not None else f"k={default_k_fraction(net.precision):.1e} x RMS ||x_0||"

    def _bounds(self, ctx: PassContext) -> tuple[float, tuple[float, float] | None, float | None]:
        """(k, the map's domain or None, how far beyond it a twin has left it) of this pass's network."""
        domain = ctx.net.model.family.domain(ctx.net.model.source)
        margin = None if domain is None else MAX_K_OF_DOMAIN * (domain[1] - domain[0])
        return self.k, domain, margin

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

    # ------------------------------------------------------------------ twins
    def n_twins(self, samples: int) -> int:
        return samples + min(self.p.check_samples, samples)

    def rows(self, ctx: PassContext) -> torch.Tensor:
        """One twin per sample, then the check's twins of the first ``check_samples``."""
        import torch  # lazy: torch

        return torch.cat([torch.arange(ctx.S, device=ctx.device),
                          torch.arange(min(self.p.check_samples, ctx.S), device=ctx.device)])

    def perturb(self, ctx: PassContext, x0):
        return self.perturb_shard(ctx, x0, slice(None))

    def perturb_shard(self, ctx: PassContext, x_all, rows: slice):
        """The twins of the samples ``rows`` of all samples' states ``x_all``: drawn for all and sliced,
        with k from all samples' states, so a shard's lambda is the whole batch's."""
        import torch  # lazy: torch

        self.k = self.k_for(ctx.net, x_all)
        gen = torch.Generator().manual_seed(ctx.net.seed("perturbation"))
        x, y = x_all[rows], initial_perturbation(x_all, self.k, gen)[rows]
        c = min(self.p.check_samples, x.shape[0])
        return torch.cat([y, x[:c] + (y[:c] - x[:c]) * self.p.check])

    def start(self, ctx: PassContext, x0):
        import torch  # lazy: torch

        S, c = x0.shape[0], min(self.p.check_samples, x0.shape[0])
        self.twin = torch.zeros(S, dtype=torch.int8, device=x0.device)  # TWIN_OUTCOMES codes
        self.tally = {"intervals": torch.zeros(S, dtype=torch.int64, device=x0.device),
                      "unresolved": torch.zeros(S, dtype=torch.int64, device=x0.device),
                      "checked": torch.zeros(c, dtype=torch.int64, device=x0.device),
                      "sum_k": torch.zeros(c, dtype=torch.float64, device=x0.device),
                      "sum_check": torch.zeros(c, dtype=torch.float64, device=x0.device)}

    def state_dict(self):
        import torch  # lazy: torch

        out = {"k": torch.tensor(self.k, dtype=torch.float64)} if getattr(self, "k", None) is not None else {}
        if getattr(self, "twin", None) is not None:
            out["twin"] = self.twin
        return out | {f"tally.{n}": v for n, v in getattr(self, "tally", {}).items()}

    def load_state_dict(self, state):
        self.twin = state.get("twin")  # None: a checkpoint from before the outcome was kept (all "stayed" so far)
        if "k" in state:
            self.k = float(state["k"])
        self.tally = {n.removeprefix("tally."): v for n, v in state.items() if n.startswith("tally.")}

    def buffers(self, ctx: PassContext, seg):
        import torch  # lazy: torch

        n = (seg.end - seg.start) // self.p.tau
        return {"lyapunov": self.nan((ctx.S, n), torch.float64, ctx.device),
                "regime": torch.full((ctx.S, n), -1, dtype=torch.int8, device=ctx.device)}

    def observe(self, ctx: PassContext, t, x, bufs, seg):
        if t == ctx.T and self.twin is not None:  # the state at the end (tau need not divide the run)
            self._mark(x)
        return None

    def advance(self, ctx: PassContext, t, x, y, bufs, seg):
        import torch  # lazy: torch

        tau = self.p.tau
        measures = "lyapunov" in bufs  # this pass measures it (a pass may iterate the twin for another measure's sake)
        S = x.shape[0]
        if measures and self.twin is None:
            self.twin = torch.zeros(S, dtype=torch.int8, device=x.device)
        k, domain, margin = self._bounds(ctx)
        if measures and domain is not None:
            out = ((y[:S] < domain[0] - margin) | (y[:S] > domain[1] + margin)).flatten(1).any(1)
            self._raise(out, "left_domain")
        if t % tau:
            return y
        c = y.shape[0] - S
        lam, y_main = renormalize(x, y[:S], k)
        lam_c, _ = renormalize(x[:c], y[S:], k * self.p.check)
        # the check's twin starts every interval in the first twin's direction: the two differ only by
        # their size, so their exponents differ only by the map's nonlinearity (and rounding)
        y_check = x[:c] + (y_main[:c] - x[:c]) * self.p.check
        if measures:
            j = t // tau - 1 - seg.start // tau
            bufs["lyapunov"][:, j] = lam
            gone = unresolved(lam, k, x, RESOLUTION)
            gone_c = unresolved(lam_c, k * self.p.check, x[:c], RESOLUTION)
            regime = gone.to(torch.int8)
            noise = torch.clamp(rounding_noise(lam_c, k * self.p.check, x[:c], tau), min=LINEARITY_ATOL * tau)
            regime[:c] = torch.where(~gone[:c] & ~gone_c & nonlinear(lam[:c], lam_c, atol=noise), 2, regime[:c])
            bufs["regime"][:, j] = regime
            if margin is not None:
                self._raise(k * torch.exp(lam) > margin, "nonlinear")
            self._raise(torch.isnan(lam), "twin_diverged")
            self._mark(x)
            self._count(lam, lam_c, gone, gone_c)
        return torch.cat([y_main, y_check])

    def _count(self, lam, lam_c, gone, gone_c) -> None:
        """Add an interval to the tallies: resolved or not, and (both twins resolved and finite) the
        checked samples' exponents at k and at check x k."""
        import torch  # lazy: torch

        if not getattr(self, "tally", None):  # a checkpoint from before the tallies were kept
            return
        seen = torch.isfinite(lam) | (lam == float("-inf"))
        self.tally["intervals"] += seen
        self.tally["unresolved"] += gone & seen
        c = lam_c.shape[0]
        both = ~gone[:c] & ~gone_c & torch.isfinite(lam[:c]) & torch.isfinite(lam_c)
        self.tally["checked"] += both
        self.tally["sum_k"] += torch.where(both, lam[:c], 0.0)
        self.tally["sum_check"] += torch.where(both, lam_c, 0.0)

    def _verdict(self) -> tuple[bool, float, float] | None:
        """(nonlinear, rate at k, rate at check x k) pooled over the checked samples' intervals where
        both twins were resolved; None: none was."""
        n = int(self.tally["checked"].sum())
        if not n:
            return None
        rate = float(self.tally["sum_k"].sum()) / n / self.p.tau
        rate_small = float(self.tally["sum_check"].sum()) / n / self.p.tau
        return bool(nonlinear(rate, rate_small)), rate, rate_small

    def _settle(self, ctx: PassContext) -> None:
        """At the run's end: the samples with too many unresolved intervals, and the pass's verdict on
        linearity; one warning when any sample is flagged."""
        import torch  # lazy: torch

        tally = getattr(self, "tally", None)
        if not tally:
            return
        self._raise(tally["unresolved"] > UNRESOLVED_SHARE * tally["intervals"], "unresolved")
        verdict = self._verdict()
        if verdict and verdict[0]:
            self._raise(torch.ones_like(self.twin, dtype=torch.bool), "nonlinear")
        counts = torch.bincount(self.twin.long().clamp(min=0), minlength=len(TWIN_OUTCOMES)).tolist()
        flagged = {o: n for o, n in zip(TWIN_OUTCOMES, counts) if n and o not in ("stayed", "diverged")}
        if not flagged:
            return
        said = ", ".join(f"{n} {o}" for o, n in flagged.items())
        why = []
        if "nonlinear" in flagged and verdict and verdict[0]:
            why.append(f"lambda/step {verdict[1]:.4g} at k = {self.k:.2g} against {verdict[2]:.4g} at "
                       f"{self.p.check:g} k: lower k (or tau)")
        elif "nonlinear" in flagged:
            why.append(f"the separation grew beyond {MAX_K_OF_DOMAIN:g} of the map's domain within an interval "
                       f"at k = {self.k:.2g}: lower k or tau")
        if "unresolved" in flagged:
            why.append("the twin collapsed to the rounding of the state: raise k, shorten tau or use fp64")
        if "twin_diverged" in flagged or "left_domain" in flagged:
            why.append(f"the twin ran off the orbit at k = {self.k:.2g}: lower k")
        ctx.warn(f"lyapunov: {said} of {self.twin.shape[0]} samples, left out of show's headline "
                 f"({'; '.join(why)}; see lyapunov_twin)")

    def _raise(self, where, outcome: str) -> None:
        """Samples ``where`` reached ``outcome`` (they keep the highest code)."""
        import torch  # lazy: torch

        self.twin = torch.where(where, torch.clamp(self.twin, min=TWIN_OUTCOMES.index(outcome)), self.twin)

    def _mark(self, x):
        """Record a diverged state (its twin's NaN is then the state's)."""
        import torch  # lazy: torch

        self._raise(~torch.isfinite(x.flatten(1)).all(1), "diverged")

    def write(self, ctx: PassContext, bufs, seg):
        tau = self.p.tau
        lam = bufs["lyapunov"].cpu().numpy()
        region = (ctx.index, slice(None), slice(seg.start // tau, seg.start // tau + lam.shape[1]))
        ctx.store.write("lyapunov", region, lam)  # the store casts to the variable's dtype (float32 unless fp64)
        ctx.store.write("lyapunov_per_step", region, lam / tau)
        ctx.store.write("lyapunov_regime", region, bufs["regime"].cpu().numpy())
        if not seg.last:
            return
        if self.twin is not None:
            self._settle(ctx)
            ctx.store.write("lyapunov_twin", (ctx.index, slice(None)), self.twin.cpu().numpy())
        check = np.full(ctx.S, np.nan)
        if getattr(self, "tally", None):
            n = self.tally["checked"].cpu().numpy()
            c = n.shape[0]
            with np.errstate(invalid="ignore", divide="ignore"):
                check[:c] = np.where(n > 0, self.tally["sum_check"].cpu().numpy() / n / tau, np.nan)
        ctx.store.write("lyapunov_check", (ctx.index, slice(None)), check)
        ctx.store.write("lyapunov_k", (ctx.index,), np.asarray(self.k, dtype=np.float64))


def valid_k(width: float, precision: str, n_hidden: int) -> float:
    """A perturbation between rounding and nonlinearity for a map's state of ``n_hidden`` elements on
    a domain of ``width``: the geometric mean of the precision's floor and ``MAX_K_OF_DOMAIN * width``
    (this project's rule, no published source: as far from either bound in orders of magnitude), and at
    least ten times the separation below which an interval is unresolved for a state as large as the
    domain (``RESOLUTION`` x eps x width x sqrt(n_hidden); fp32 on [0, 1]: 1.2e-4, not 2.4e-5)."""
    resolved = 10 * RESOLUTION * 2 * UNIT_ROUNDOFF[precision] * width * n_hidden ** 0.5
    return max((perturbation_floor(precision, 1, n_hidden) * MAX_K_OF_DOMAIN * width) ** 0.5, resolved)
