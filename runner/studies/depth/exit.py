"""Early exit: a sample whose whole state has become periodic leaves f's batch.

A sample's *state* is its rows of the pass's batch: its reference row x and its twins (the
Lyapunov exponent's, a raw twin). One step is ``u_t = f(z_t)``, then ``z_{t+1} = advance_{t+1}(u_t)``
(a twin measure's renormalisation), where ``advance`` depends on t only through ``t mod p_m`` (the
measure's tags' ``exit_period``, :class:`~runner.plugin.timings.StepMeasure`). With
``P = lcm(exit_period of [dynamics], every p_m)``, if a sample's rows at step c equal, bit for
bit, its rows at c - P, its future is P-periodic: ``u_t = u_{t-P}`` for every t >= c - P. So after
recording its ``u`` for P steps it can leave the batch, and its ``u_t`` is replayed from that
record (slot ``t mod P``) for the rest of the run. Nothing else changes: ``observe`` and
``advance`` still run on the whole batch (the replayed rows included), in the same shapes as
without exit, so every measure keeps its exact values (an exited sample still contributes its
x_t to N_eff, its lambda to the exponent series, ...), as long as f applied to fewer rows gives
each row the same bits (see docs/architecture.md: elementwise maps always; GEMMs on the CPU when
the row count stays a multiple of their blocking).

No D(t) threshold is asked for: the repeat alone makes the replay exact, and a synchronised
state (D(t) ~ 0) may still move chaotically.

Comparisons are bitwise (integer views), so -0.0 differs from 0.0, and a NaN state that repeats
its bits also exits. The comparison runs on the device every ``check`` steps; its result is
read by the host once per check (``check`` >= 64 steps, a multiple of P), the only host sync
exit adds. Everything here is saved in the pass's durable points (:meth:`state_dict`).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

_INT = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
MIN_CHECK = 64
"""Steps between host reads of the comparison (at least)."""


def _bits(z: Tensor) -> Tensor:
    return z.view(_INT[z.element_size()])


class EarlyExit:
    """Which samples have left f's batch, and their recorded f outputs.

    ``owner[r]`` is the sample of batch row r (its x row and its twin rows).
    """

    def __init__(self, owner: Tensor, samples: int, period: int):
        self.owner, self.S, self.P = owner, samples, period
        self.check = period * math.ceil(MIN_CHECK / period)
        dev = owner.device
        self.exit_step = torch.full((samples,), -1, dtype=torch.int64, device=dev)
        self.exit_period = torch.full((samples,), -1, dtype=torch.int64, device=dev)
        self.out_rows = torch.zeros(0, dtype=torch.int64, device=dev)  # rows replayed from ``ring``
        self.ring: Tensor | None = None  # (P, len(out_rows), ...): u_t of those rows at slot t mod P
        self.rec_samples = torch.zeros(0, dtype=torch.int64, device=dev)  # samples being recorded
        self.rec_rows = torch.zeros(0, dtype=torch.int64, device=dev)
        self.rec: Tensor | None = None
        self.snapshot: Tensor | None = None  # z at the last step c - P before a check c
        self._active()

    # ------------------------------------------------------------------ per step
    def apply(self, t: int, z: Tensor, f) -> Tensor:
        """u_t = f(z_t): ``f(rows)`` (None: all) for the rows still iterated, the rest replayed."""
        if self.ring is None:
            u = f(None)
        else:
            u = torch.empty_like(z)
            if len(self.active):
                u[self.active] = f(self.active)
            u[self.out_rows] = self.ring[t % self.P]
        if self.rec is not None and self.rec_start <= t < self.rec_start + self.P:
            self.rec[t % self.P] = u[self.rec_rows]
        return u

    def after(self, s: int, z: Tensor) -> None:
        """At step s (z = z_s): exit the recorded samples and look for new ones at a check; snapshot
        z P steps before the next check."""
        if s % self.check == 0 and s > 0:
            if self.rec is not None:
                self._leave(s)
            if self.snapshot is not None:
                self._compare(s, z)
        if (s + self.P) % self.check == 0:
            self.snapshot = z.clone()

    # ------------------------------------------------------------------ checks
    def _compare(self, s: int, z: Tensor) -> None:
        differs = (_bits(z) != _bits(self.snapshot)).flatten(1).any(1)
        bad = torch.zeros(self.S, dtype=torch.int64, device=z.device).index_add_(0, self.owner, differs.long())
        periodic = (bad == 0) & (self.exit_step < 0)
        self.snapshot = None
        samples = periodic.nonzero().flatten()  # the host sync of a check
        if len(samples):
            self.rec_samples = samples
            self.rec_rows = torch.isin(self.owner, samples).nonzero().flatten()
            self.rec = torch.empty((self.P, len(self.rec_rows), *z.shape[1:]), dtype=z.dtype, device=z.device)
            self.rec_start = s

    def _leave(self, s: int) -> None:
        """The recorded samples leave f's batch at s; ``exit_period`` is x's least period (divides P)."""
        self.exit_step[self.rec_samples] = s
        x_slots = self.rec[:, : len(self.rec_samples)]  # x rows come first in rec_rows (rows 0..S-1)
        period = torch.full((len(self.rec_samples),), self.P, dtype=torch.int64, device=self.rec.device)
        for q in reversed([q for q in range(1, self.P) if self.P % q == 0]):
            same = (_bits(x_slots) == _bits(x_slots.roll(q, 0))).flatten(2).all(2).all(0)
            period = torch.where(same, q, period)
        self.exit_period[self.rec_samples] = period
        self.out_rows = torch.cat([self.out_rows, self.rec_rows])
        self.ring = self.rec if self.ring is None else torch.cat([self.ring, self.rec], 1)
        self.rec = None
        self.rec_samples = self.rec_samples[:0]
        self.rec_rows = self.rec_rows[:0]
        self._active()

    def _active(self) -> None:
        gone = torch.zeros(len(self.owner), dtype=torch.bool, device=self.owner.device)
        gone[self.out_rows] = True
        self.active = (~gone).nonzero().flatten()

    # ------------------------------------------------------------------ durable points
    def state_dict(self) -> dict[str, Tensor]:
        out = {"exit_step": self.exit_step, "exit_period": self.exit_period, "out_rows": self.out_rows,
               "rec_samples": self.rec_samples, "rec_rows": self.rec_rows}
        for name in ("ring", "rec", "snapshot"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.rec is not None:
            out["rec_start"] = torch.tensor(self.rec_start)
        return out

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        for name in ("exit_step", "exit_period", "out_rows", "rec_samples", "rec_rows"):
            setattr(self, name, state[name])
        for name in ("ring", "rec", "snapshot"):
            setattr(self, name, state.get(name))
        if self.rec is not None:
            self.rec_start = int(state["rec_start"])
        self._active()
