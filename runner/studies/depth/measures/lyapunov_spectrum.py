"""Lyapunov spectrum: the m largest exponents by Benettin's QR method (Benettin et al., Meccanica 15,
9-30 (1980)), the Kaplan-Yorke dimension (Kaplan & Yorke 1979) and the sum of the positive exponents
(Pesin 1977), per network and sample (:mod:`analyses.lyapunov_spectrum`); Engelken, Wolf & Abbott,
Phys. Rev. Research 5, 043044 (2023) for random tanh networks.

At each step t the pass's x_t is taken as the linearisation point: m tangent vectors Q_t are pushed
through the map by forward-mode Jacobian-vector products (``torch.func.jvp`` on the m x samples
copies of x_t, one batched call: about m forward passes), and every ``every`` steps re-orthonormalised
by QR; ln|R_ii| / every are the local exponents of the interval, their average from ``start`` the
spectrum. Nothing leaves the device per step; the basis, the sums and the synchronisation steps are
the durable state, so a resumed run equals an uninterrupted one bit for bit.

**Which spectrum.** ``space = "full"``: the tangent vectors span the whole state (tokens x hidden).
``"synchronized"``: for a map that treats tokens alike (``token_equivariant``: ALBERT's shared layer),
the set "all tokens equal" is invariant and on it the map is the same map on one token; the spectrum
within that set has the width of one token and costs m one-token passes per step. It is measured at
the tokens' mean and averaged over the intervals after the sample synchronised (relative token spread
below ``[dynamics] reduce_tolerance`` unit roundoffs, as the reduced iteration decides,
:mod:`runner.studies.depth.reduce`); a sample that never synchronised, or has a masked token (its
tokens are not treated alike), has none (NaN). ``"auto"``
(default): the within-set spectrum for such maps with more than :data:`FULL_LIMIT` state elements (an
ALBERT-size state), else the full one. The store says which (the ``space`` attribute of
``lyapunov_spectrum``, per network in ``lyapunov_spectrum_space``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from analyses.lyapunov_spectrum import initial_basis, kaplan_yorke, positive_sum, qr_step
from runner.core.layout import flags
from runner.plugin.measures import MeasureTags, StepTags, hints
from runner.plugin.timings import StepMeasure
from runner.studies.depth.measure import STUDY, DepthParams, PassContext
from runner.studies.depth.precision import UNIT_ROUNDOFF

if TYPE_CHECKING:
    import torch

REFERENCE = ("Benettin, Galgani, Giorgilli & Strelcyn, Meccanica 15, 9-30 (1980); Kaplan & Yorke, Lect. Notes "
             "Math. 730, 204-227 (1979); Engelken, Wolf & Abbott, Phys. Rev. Research 5, 043044 (2023)")
#: ``space = "auto"`` takes the within-set spectrum of a token-equivariant map whose state has more
#: elements than this (this project's line: tiny ALBERT's 16 x 64 = 1024 full, ALBERT-base's 128 x 768 not).
FULL_LIMIT = 4096
#: What ``lyapunov_spectrum_space`` holds, per network.
SPACES = ("full", "synchronized")


class Params(DepthParams):
    """Lyapunov spectrum, Kaplan-Yorke dimension and the sum of the positive exponents (Benettin's QR
    method). It costs about m forward passes of the map per step for each measured sample (forward-mode
    Jacobian-vector products), beside the one of the iteration: measure a subset of the samples
    (``samples``) when the run has many, since the spectrum of each sample is a time average and a few
    samples give its spread."""

    kind: Literal["lyapunov_spectrum"]
    m: int = Field(8, ge=1)
    """How many of the largest exponents (at most the dimension of the space measured; more are NaN)."""
    every: int = Field(1, ge=1)
    """Steps between QR re-orthonormalisations. 1 (default): a QR of an n x m matrix per sample and step
    is small against the m Jacobian-vector products, and the vectors never have time to collapse onto
    the leading direction (over ``every`` steps they separate by (lambda_1 - lambda_m) x every, which must
    stay well below ln(1/u): 16 in fp32); 10 as the paper's tau thins the stored local exponents."""
    samples: int | None = Field(16, ge=1)
    """Measure the first ``samples`` samples (None: all). Each costs m passes per step; take a subset
    when the run has many samples (the others are NaN)."""
    start: int = Field(0, ge=0)
    """The run-end spectrum averages the intervals from step ``start`` on (a multiple of ``every``): the
    basis, carried from t = 0, aligns with the leading directions in an O(1) transient first."""
    space: Literal["auto", "full", "synchronized"] = "auto"
    """``full``: the whole state's tangent space; ``synchronized``: within the synchronised set (one
    token's width, maps that treat tokens alike, from each sample's synchronisation on); ``auto``: the
    within-set spectrum for such maps of more than 4096 state elements, else the full one."""


# precision_checked: none (never compared with fp32 in a reduced precision; plan says nothing of it)
# no shards (a sample subset, the first ones), no early exit (its tangent vectors advance at every
# step), no extension (a longer run recomputes it)
class LyapunovSpectrum(StepMeasure, study=STUDY, reference=REFERENCE, params=Params,
                       tags=MeasureTags("step", step=StepTags(strides=("every",)))):
    """m tangent vectors carried by Jacobian-vector products, re-orthonormalised every ``every`` steps."""


    # ------------------------------------------------------------------ declarations
    def space_for(self, net) -> str:
        """``full`` or ``synchronized`` for the resolved network ``net``."""
        if self.p.space != "auto":
            return self.p.space
        equivariant = net.n_tokens >= 2 and net.model.family.token_equivariant(net.model.source)
        return "synchronized" if equivariant and net.n_tokens * net.n_hidden > FULL_LIMIT else "full"

    def _dims(self, net) -> int:
        return net.n_hidden if self.space_for(net) == "synchronized" else net.n_tokens * net.n_hidden

    def default_note(self, net) -> str | None:
        """What ``plan`` says for the network: the space, the exponents measured and the extra cost."""
        n = self._dims(net)
        m = min(self.p.m, n)
        width = "one token" if self.space_for(net) == "synchronized" else "tokens x hidden"
        cost = f"~{m} {'one-token ' if self.space_for(net) == 'synchronized' else ''}passes/step per measured sample"
        itemsize = 8 if net.precision == "fp64" else 4
        basis = (self.p.samples or 0) * n * m * itemsize * 3  # the basis, its images, the m copies of x
        mem = f", tangent basis ~{basis / 2**20:.2g} MiB" if self.p.samples else ""
        return f"space={self.space_for(net)} ({width}, n={n}), m={m}: {cost}{mem}"

    def problems(self, view) -> list[tuple[str, str]]:
        out = super().problems(view)
        if self.p.start % self.p.every:
            out.append(("start", f"{self.p.start} is not a multiple of every = {self.p.every}"))
        if self.p.start >= view.steps:
            out.append(("start", f"{self.p.start} is not before the run's end ({view.steps_name} = {view.steps})"))
        if self.p.space == "synchronized":
            for net in view.networks:
                if net.n_hidden and net.n_tokens < 2:
                    out.append(("space", f"{net.label}: one token per sample: the synchronised set is the whole "
                                "state; use space = \"full\""))
                    break
        return out

    def state_nbytes(self, steps: int, sample_nbytes: int) -> int:
        """The m copies of the measured samples' states, their tangent vectors and images (``samples =
        None``, every sample, is counted as one here: the sample count is not known to this hook); the
        forward-mode pass' own intermediates (about those of a forward pass of m x samples rows) are not."""
        return 3 * self.p.m * (self.p.samples or 1) * sample_nbytes

    def variables(self, b, shape) -> None:
        every, m = self.p.every, self.p.m
        b.coord("exponent", list(range(1, m + 1)), long_name="exponent index i (lambda_1 >= lambda_2 >= ...)")
        dim = b.axis("spectrum_step", 0, (shape.steps // every - 1) * every, every, long_name="interval start t")
        attrs = {"every": every, "space": self.p.space, "start": self.p.start}
        b.var("lyapunov_spectrum", "lyapunov_spectrum", ("network", "sample", "exponent"), "float64", np.nan,
              "Lyapunov exponents per step", "1",
              "lambda_i = mean over the intervals from step start on of ln|R_ii| / every, R of the QR decomposition "
              "of the tangent vectors' images (Benettin et al. 1980); NaN: a sample not measured (see the samples "
              "parameter), an exponent beyond the space's dimension, a diverged sample, or (space synchronized) a "
              "sample that never synchronised", **attrs)
        b.var("lyapunov_spectrum_local", "lyapunov_spectrum", ("network", "sample", dim, "exponent"), "float64",
              np.nan, "local Lyapunov exponents per step over an interval", "1",
              "ln|R_ii| / every of the interval starting at t (its window); NaN before a sample synchronised "
              "(space synchronized)", **attrs)
        b.var("lyapunov_spectrum_1", "lyapunov_spectrum", ("network", "sample"), "float64", np.nan,
              "largest Lyapunov exponent per step (spectrum)", "1", "lambda_1 of lyapunov_spectrum",
              **hints(plot="histogram", order=20, headline=("lambda_1/step (spectrum)", "finite_mean")))
        if m >= 2:
            b.var("lyapunov_spectrum_2", "lyapunov_spectrum", ("network", "sample"), "float64", np.nan,
                  "second Lyapunov exponent per step", "1", "lambda_2 of lyapunov_spectrum",
                  **hints(headline=("lambda_2/step", "finite_mean")))
        b.var("kaplan_yorke", "lyapunov_spectrum", ("network", "sample"), "float64", np.nan,
              "Kaplan-Yorke dimension", "1",
              "D_KY = j + sum_{i<=j} lambda_i / |lambda_{j+1}|, j the largest index with sum_{i<=j} lambda_i >= 0 "
              "(Kaplan & Yorke 1979); 0 when lambda_1 < 0; m, a lower bound, when the partial sums of all m "
              "measured exponents are >= 0 (see kaplan_yorke_bound)",
              **hints(plot="histogram", order=21, headline=("Kaplan-Yorke dimension", "finite_mean")))
        b.var("kaplan_yorke_bound", "lyapunov_spectrum", ("network", "sample"), "int8", -1,
              "Kaplan-Yorke dimension kind", None,
              "estimate, j < m; lower_bound, the partial sums of all m measured exponents are >= 0: the dimension "
              "is at least m (measure more exponents)", **flags("estimate", "lower_bound"))
        b.var("kaplan_yorke_running", "lyapunov_spectrum", ("network", "sample", dim), "float64", np.nan,
              "Kaplan-Yorke dimension of the running spectrum", "1",
              "D_KY of the spectrum averaged from step start (or the sample's synchronisation) to the end of the "
              "interval starting at t; NaN before", **attrs)
        b.var("lyapunov_positive_sum", "lyapunov_spectrum", ("network", "sample"), "float64", np.nan,
              "sum of the positive Lyapunov exponents per step", "1",
              "sum of lambda_i > 0: an upper bound on the Kolmogorov-Sinai entropy per step (Ruelle's inequality; "
              "Pesin's identity where equal); a lower bound of the sum when all m measured exponents are positive",
              **hints(headline=("sum lambda_i > 0 per step", "finite_mean")))
        b.var("lyapunov_spectrum_steps", "lyapunov_spectrum", ("network", "sample"), "float64", np.nan,
              "steps averaged in the spectrum (steps)", "1",
              "the steps whose intervals lyapunov_spectrum averages (from start, or from the sample's "
              "synchronisation); 0 where none")
        b.var("lyapunov_spectrum_space", "lyapunov_spectrum", ("network",), "int8", -1,
              "Lyapunov spectrum space", None,
              "full, the tangent space of the whole state (tokens x hidden); synchronized, within the set of "
              "states whose tokens are all equal (one token's width), after each sample synchronised",
              **flags(*SPACES))

    # ------------------------------------------------------------------ the pass
    def _setup(self, ctx: PassContext) -> None:
        """Per pass: the space, the measured samples, the map's JVP (its mask copies made once)."""
        import torch  # lazy: torch

        net = ctx.net
        self.space = self.space_for(net)
        self.n = self._dims(net)
        self.k = min(self.p.m, self.n)  # exponents measured
        self.s = min(self.p.samples or ctx.S, ctx.S)
        mask = None
        if self.space == "full" and ctx.mask_x is not None:
            mask = ctx.mask_x[: self.s].repeat(self.k, 1)
        self.mask = mask
        if self.space == "synchronized":
            self.limit = ctx.spec.dynamics.reduce_tolerance * UNIT_ROUNDOFF[net.precision]
            # a sample with a masked token does not treat its tokens alike: its tokens never count as one
            self.eligible = None if ctx.mask_x is None else ctx.mask_x[: self.s].bool().all(1)
        self.token_shape = (1, net.n_hidden) if self.space == "synchronized" else None
        self._torch = torch

    def start(self, ctx: PassContext, x0) -> None:
        import torch  # lazy: torch

        self._setup(ctx)
        gen = torch.Generator().manual_seed(ctx.net.seed("lyapunov_spectrum"))
        self.q = initial_basis(self.n, self.k, self.s, gen, x0.dtype, x0.device)
        self.total = torch.zeros((self.s, self.k), dtype=torch.float64, device=x0.device)
        self.steps = torch.zeros(self.s, dtype=torch.int64, device=x0.device)
        self.synced = torch.full((self.s,), -1 if self.space == "synchronized" else 0, dtype=torch.int64,
                                 device=x0.device)
        self._ready = True

    def state_dict(self):
        if getattr(self, "q", None) is None:
            return {}
        return {"q": self.q, "total": self.total, "steps": self.steps, "synced": self.synced}

    def load_state_dict(self, state):
        self.q, self.total = state.get("q"), state.get("total")
        self.steps, self.synced = state.get("steps"), state.get("synced")
        self._ready = False

    def buffers(self, ctx: PassContext, seg):
        import torch  # lazy: torch

        if not getattr(self, "_ready", False):  # resumed: the per-pass setup once
            self._setup(ctx)
            self._ready = True
        n = (seg.end - seg.start) // self.p.every
        return {"local": self.nan((self.s, n, self.k), torch.float64, ctx.device),
                "running": self.nan((self.s, n), torch.float64, ctx.device)}

    def _images(self, ctx: PassContext, t: int, x):
        """J(x_t) Q_t: the tangent vectors' images ``(s, n, k)`` (one JVP call over k x s copies)."""
        torch = self._torch
        s, k = self.s, self.k
        if self.space == "synchronized":
            point = x[:s].mean(1, keepdim=True)  # on the set: every token is the mean
        else:
            point = x[:s]
        shape = point.shape[1:]
        tangents = self.q.permute(2, 0, 1).reshape(k * s, *shape)
        points = point.repeat(k, *([1] * len(shape)))
        if not ctx.model.autonomous:
            ctx.model.at(t)
        mask = self.mask
        # forward-mode AD through attention needs its reference (math) kernel: the fused ones have no JVP
        with torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.MATH]):
            _, v = torch.func.jvp(lambda z: ctx.model.step(z, mask), (points,), (tangents,))
        return v.reshape(k, s, self.n).permute(1, 2, 0)

    def observe(self, ctx: PassContext, t, x, bufs, seg):
        torch = self._torch
        if t >= ctx.T:
            return None
        every = self.p.every
        if self.space == "synchronized":
            from runner.studies.depth.reduce import relative_spread  # lazy: torch

            now = relative_spread(x[: self.s]) <= self.limit
            if self.eligible is not None:
                now = now & self.eligible
            self.synced = torch.where((self.synced < 0) & now, t, self.synced)
        images = self._images(ctx, t, x)
        if (t + 1) % every:
            self.q = images
            return None
        self.q, logs = qr_step(images)
        lo = t + 1 - every  # the interval [lo, t + 1)
        counted = (self.synced >= 0) & (self.synced <= lo)
        j = lo // every - seg.start // every
        bufs["local"][:, j] = torch.where(counted.unsqueeze(1), logs / every, float("nan"))
        if lo >= self.p.start:
            self.total += torch.where(counted.unsqueeze(1), logs, 0.0)
            self.steps += counted * every
            bufs["running"][:, j] = self._dimension(self.total, self.steps)[0]
        return None

    def _spectrum(self, total, steps):
        torch = self._torch
        return torch.where((steps > 0).unsqueeze(1), total / steps.clamp(min=1).unsqueeze(1), float("nan"))

    def _dimension(self, total, steps):
        return kaplan_yorke(self._spectrum(total, steps))

    def write(self, ctx: PassContext, bufs, seg):
        every, s, k, S = self.p.every, self.s, self.k, ctx.S
        local = bufs["local"].cpu().numpy()
        n = local.shape[1]
        region = (ctx.index, slice(0, s), slice(seg.start // every, seg.start // every + n), slice(0, k))
        ctx.store.write("lyapunov_spectrum_local", region, local)
        ctx.store.write("kaplan_yorke_running", region[:3], bufs["running"].cpu().numpy())
        if not seg.last:
            return
        lam = self._spectrum(self.total, self.steps)
        d, bound = kaplan_yorke(lam)
        full = np.full((S, self.p.m), np.nan)
        full[:s, :k] = lam.cpu().numpy()
        ctx.store.write("lyapunov_spectrum", (ctx.index, slice(None), slice(None)), full)
        per_sample = {"lyapunov_spectrum_1": full[:, 0], "kaplan_yorke": self._pad(d, S),
                      "lyapunov_positive_sum": self._pad(positive_sum(lam), S),
                      "lyapunov_spectrum_steps": self._pad(self.steps.double(), S)}
        if self.p.m >= 2:
            per_sample["lyapunov_spectrum_2"] = full[:, 1]
        for name, values in per_sample.items():
            ctx.store.write(name, (ctx.index, slice(None)), values)
        kind = np.full(S, -1, dtype=np.int8)
        kind[:s] = np.where(np.isnan(d.cpu().numpy()), -1, bound.cpu().numpy().astype(np.int8))
        ctx.store.write("kaplan_yorke_bound", (ctx.index, slice(None)), kind)
        ctx.store.write("lyapunov_spectrum_space", (ctx.index,), np.asarray(SPACES.index(self.space), dtype=np.int8))

    @staticmethod
    def _pad(values, S: int) -> np.ndarray:
        out = np.full(S, np.nan)
        v = values.cpu().numpy()
        out[: len(v)] = v
        return out
