"""Reduced iteration on the synchronised set: a sample whose tokens agree runs as one token.

A map that treats tokens alike (``DynamicalMap.token_equivariant``: ALBERT's shared layer, whose
positions enter only through x_0; globally coupled maps) maps the set "all tokens equal" into
itself, and on it acts as the same map on a one-token sequence (every attention score equal, each
token attending to copies of itself). Once a sample's tokens have synchronised (Inoue et al. 2021,
Eq. 5, Fig. 2B: D(t) falls by orders of magnitude within ~100 steps), its N_w tokens carry one
vector, and N_w - 1 of every token's computation repeats it (docs/performance.md, "Reduced
iteration").

**Entry.** Every ``reduce_every`` steps, a sample whose rows (x and its twins) all have a relative
token spread ``sqrt(D) / rms token norm`` below ``reduce_tolerance x u`` (u: the precision's unit
roundoff, :mod:`runner.studies.depth.precision`) is a candidate; with an attention mask, only
samples that attend to every token. Its rows are projected onto the set (each token replaced by
the tokens' mean, a change within the tolerance) and from then on ``f`` is applied to its first
token alone and broadcast, so every measure sees exactly the broadcast state.

**Guard.** Invariance is not stability: the synchronised state is only worth trusting where it is
transversally stable (Pecora & Carroll, PRL 80, 2109 (1998): the master stability function;
for attention, the collapse of tokens onto one another: Dong, Cordonnier & Loukas, ICML 2021;
Geshkovski et al. 2023). A candidate is expanded, perturbed by ``reduce_guard_size`` (relative rms)
in a direction that sums to zero over the tokens (seeded per network and step), iterated
``reduce_guard_steps`` steps at full width, and admitted only if its transverse spread shrank. A
reduced sample is guarded again every ``reduce_guard_every`` steps, and one whose perturbation grows
(or whose rows are no longer equal) returns to full width from that step and never reduces again;
``reduce_refused_step`` records it. With ``reduce_guard_steps = 0`` nothing is checked.

Decisions depend only on the step and the state, and their state is saved at durable points
(:meth:`SyncReduction.state_dict`), so a resumed run takes the same decisions; between checks the
row sets (and so every shape) are fixed. The only host syncs are at checks.
"""

from __future__ import annotations

import time

import torch
from torch import Tensor

from analyses.token_deviation import token_deviation
from runner.studies.depth.precision import UNIT_ROUNDOFF

def relative_spread(z: Tensor, block: int = 256) -> Tensor:
    """Per row of ``z`` (rows, tokens, hidden): sqrt(D) / rms token norm, with D of Eq. 5
    (:func:`analyses.token_deviation.token_deviation`); float64, ``block`` rows at a time (a check holds
    no float64 copy of the whole batch)."""
    out = torch.empty(len(z), dtype=torch.float64, device=z.device)
    for i in range(0, len(z), block):
        b = z[i : i + block].double()
        norm = b.square().sum(2).mean(1)  # the mean squared token norm
        out[i : i + block] = torch.sqrt(token_deviation(b) / norm.clamp_min(torch.finfo(torch.float64).tiny))
    return out


def _mean_square(x: Tensor) -> Tensor:
    """Per row of ``x``: the mean squared element, in float64."""
    return x.double().square().flatten(1).mean(1)


def unequal(z: Tensor) -> Tensor:
    """Per row: whether some finite token differs from the first, bit for bit (a mean in float64 need not
    be exact, so equality is not read off the spread)."""
    return ((z != z[:, :1]) & (z == z)).flatten(1).any(1)


def transverse_direction(shape: tuple[int, ...], generator: torch.Generator, dtype, device) -> Tensor:
    """Random directions that sum to zero over the tokens (dim 1), unit rms per row."""
    d = torch.randn(shape, generator=generator, dtype=torch.float32, device=generator.device).to(device)
    d = d - d.mean(1, keepdim=True)
    d = d / d.square().flatten(1).mean(1).sqrt().clamp_min(1e-30).view(-1, *([1] * (len(shape) - 1)))
    return d.to(dtype)


class SyncReduction:
    """Which samples run reduced, and the checks that admit and keep them.

    ``owner[r]`` is the sample of batch row r (its x row and its twin rows), as in early exit; ``mask``
    the pass's attention mask of those rows (None: every token attended). ``f(x, mask)`` applies the
    map to rows ``x`` (:meth:`apply` and the guard call it).
    """

    def __init__(self, owner: Tensor, samples: int, precision: str, *, tolerance: float, every: int,
                 guard_steps: int, guard_size: float, guard_every: int, seed: int, mask: Tensor | None = None):
        self.owner, self.S, self.mask = owner, samples, mask
        self.limit = tolerance * UNIT_ROUNDOFF[precision]
        self.every, self.guard_steps, self.guard_size, self.guard_every = every, guard_steps, guard_size, guard_every
        self.seed = seed
        dev = owner.device
        # a sample with a masked token does not treat its tokens alike: it stays at full width
        self.eligible = (torch.ones(samples, dtype=torch.bool, device=dev) if mask is None
                         else ~self._per_sample(~mask.bool().all(1)))
        self.reduced_step = torch.full((samples,), -1, dtype=torch.int64, device=dev)
        self.refused_step = torch.full((samples,), -1, dtype=torch.int64, device=dev)
        self.guard_seconds = 0.0
        self._rows()

    # ------------------------------------------------------------------ per step
    def apply(self, z: Tensor, f) -> Tensor:
        """u = f(z): at full width for the full rows, on the first token for the reduced rows, broadcast."""
        if not len(self.red_rows):
            return f(z, self.mask)
        u = torch.empty_like(z)
        if len(self.full_rows):
            u[self.full_rows] = f(z[self.full_rows], self.full_mask)
        u[self.red_rows] = f(z[self.red_rows, :1], None).expand(-1, z.shape[1], -1)
        return u

    def at(self, t: int, z: Tensor, f) -> Tensor:
        """At step t, before its observation: admit candidates (every ``every`` steps) and guard the
        reduced samples (every ``guard_every``); returns z, newly reduced rows projected in place."""
        check = t > 0 and t % self.every == 0
        recheck = t > 0 and t % self.guard_every == 0 and bool(len(self.red_rows))
        if not (check or recheck):
            return z
        none = torch.zeros(self.S, dtype=torch.bool, device=z.device)
        on = (self.reduced_step >= 0) & (self.refused_step < 0)
        # a reduced sample's rows are equal bit for bit; else something left the set (a twin's advance)
        broken = on & self._per_sample(unequal(z))
        kept = on & ~broken
        back = none
        if recheck and self.guard_steps and bool(kept.any()):
            back = kept & ~self._stable(t, z, kept, f, project=False)
        candidates = none
        if check:
            within = ~self._per_sample(~(relative_spread(z) <= self.limit))  # NaN spread: never within
            candidates = within & self.eligible & (self.reduced_step < 0) & (self.refused_step < 0)
        admit = candidates
        if self.guard_steps and bool(candidates.any()):  # the host sync of a check
            admit = candidates & self._stable(t, z, candidates, f, project=True)
        fail = broken | back | (candidates & ~admit)
        self.refused_step = torch.where(fail, t, self.refused_step)
        if bool(back.any()):
            self._unsynchronise(t, z, back)
        if bool(admit.any()):
            self.reduced_step = torch.where(admit, t, self.reduced_step)
            self._project(z, admit)
        if bool((admit | fail).any()):
            self._rows()
        return z

    def _per_sample(self, row_flags: Tensor, rows: Tensor | None = None) -> Tensor:
        """Whether any of each sample's rows (all, or those ``rows`` of the batch) is flagged."""
        owner = self.owner if rows is None else self.owner[rows]
        counts = torch.zeros(self.S, dtype=torch.int64, device=owner.device).index_add_(0, owner, row_flags.long())
        return counts > 0

    def _sample_rows(self, samples: Tensor) -> Tensor:
        return torch.isin(self.owner, samples.nonzero().flatten()).nonzero().flatten()

    def _project(self, z: Tensor, samples: Tensor) -> None:
        """Replace each token of the samples' rows by their mean, in place; a twin row keeps its distance to
        its x row (its difference is projected and rescaled), so a Lyapunov interval is not skewed."""
        rows = self._sample_rows(samples)
        x_rows, twin_rows = rows[rows < self.S], rows[rows >= self.S]
        owner_x = self.owner[twin_rows]  # x of sample s is row s
        d = z[twin_rows] - z[owner_x]  # before x moves
        flat = d.mean(1, keepdim=True).expand_as(d)
        norm, flat_norm = (v.double().flatten(1).norm(dim=1) for v in (d, flat))
        scale = torch.where(flat_norm > 0, norm / flat_norm.clamp_min(1e-300), 1.0).to(d.dtype).view(-1, 1, 1)
        z[x_rows] = z[x_rows].mean(1, keepdim=True).expand(-1, z.shape[1], -1)
        z[twin_rows] = z[owner_x] + flat * scale

    def _kick(self, x: Tensor, size: float, t: int, salt: int) -> Tensor:
        """``x`` plus a zero-sum direction across its tokens of relative rms ``size``, seeded by the network,
        the step and ``salt`` (so a resumed run draws the same)."""
        gen = torch.Generator(device=x.device).manual_seed((self.seed + salt + 1_000_003 * t) % 2**63)
        d = transverse_direction(tuple(x.shape), gen, x.dtype, x.device)
        return x + size * _mean_square(x).sqrt().to(x.dtype).view(-1, 1, 1) * d

    def _unsynchronise(self, t: int, z: Tensor, samples: Tensor) -> None:
        """Samples sent back to full width carry tokens equal bit for bit, which a full-width map may keep
        equal for ever; give them the largest spread a sample may have had when it was merged (relative rms
        ``reduce_tolerance`` u; one of u would round away), so a transverse instability can show, as it would
        from a full run's residual spread."""
        rows = self._sample_rows(samples)
        z[rows] = self._kick(z[rows], self.limit, t, salt=7)

    def admit_all(self) -> None:
        """Every eligible sample runs reduced from t = 0 (to time a reduced step: calibration, profiles)."""
        self.reduced_step = torch.where(self.eligible, 0, self.reduced_step)
        self._rows()

    # ------------------------------------------------------------------ the guard
    def _stable(self, t: int, z: Tensor, samples: Tensor, f, project: bool) -> Tensor:
        """Per sample (bool, over all samples): whether a zero-sum perturbation across the tokens of each
        row of ``samples`` shrank over ``guard_steps`` full-width steps."""
        t0 = time.monotonic()
        rows = self._sample_rows(samples)
        x = z[rows]
        if project:
            x = x.mean(1, keepdim=True).expand_as(x)
        y = self._kick(x, self.guard_size, t, salt=0)
        before = relative_spread(y)
        for _ in range(self.guard_steps):
            y = f(y, None)  # the samples checked attend to every token
        grew = ~(relative_spread(y) < before)  # NaN: not stable
        self.guard_seconds += time.monotonic() - t0
        return samples & ~self._per_sample(grew, rows)

    # ------------------------------------------------------------------ rows
    def _rows(self) -> None:
        on = (self.reduced_step >= 0) & (self.refused_step < 0)
        row_on = on[self.owner]
        self.red_rows = row_on.nonzero().flatten()
        self.full_rows = (~row_on).nonzero().flatten()
        # one tensor while the rows stay the same: the map caches the mask it builds by tensor
        self.full_mask = None if self.mask is None else self.mask[self.full_rows]

    def state_dict(self) -> dict[str, Tensor]:
        return {"reduced_step": self.reduced_step, "refused_step": self.refused_step}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        self.reduced_step, self.refused_step = state["reduced_step"], state["refused_step"]
        self._rows()


#: What a reduced run was compared with a full run of the same seeds on (benchmarks/reduced.py and
#: tests/depth/test_reduce.py): the paper's statistics agree within their 95% bootstrap intervals.
VALIDATED = ("validated against full runs for the mean lambda per network, the chaotic fraction, the "
             "transient-chaos lengths and their censoring, the synchronisation offset and the final N_eff "
             "(tiny ALBERT pre-trained and initial, 1e4 steps; ALBERT-base width random networks; CPU, fp32; "
             "docs/performance.md); D(t) after reduced_step is 0, not the full run's rounding floor")


def reduces(net) -> bool:
    """Whether the reduction can take a resolved network: several tokens, treated alike, the same map at
    every step."""
    family = net.model.family
    return net.n_tokens >= 2 and family.autonomous and family.token_equivariant(net.model.source)


def reduction_lines(spec, networks) -> list[str]:
    """What ``plan`` says of ``[dynamics] reduce``: the parameters, which networks it takes, what it is
    validated for."""
    d = spec.dynamics
    takes = [n.label for n in networks if reduces(n)]
    full = [n.label for n in networks if n.label not in takes]
    guard = (f"guard {d.reduce_guard_steps} steps of a {d.reduce_guard_size:g} perturbation across the tokens, at "
             f"entry and every {d.reduce_guard_every} steps" if d.reduce_guard_steps else
             "NO GUARD: transverse stability assumed, not checked")
    lines = [f"reduce     synchronized: a sample whose tokens agree within {d.reduce_tolerance:g} u (checked every "
             f"{d.reduce_every} steps) runs as one token; {guard}",
             f"           reduces: {', '.join(takes) or 'none'}"
             + (f"; full width: {', '.join(full)} (one token, or tokens not alike)" if full else ""),
             f"           {VALIDATED}"]
    return lines
