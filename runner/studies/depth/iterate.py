"""Depth dynamics: iterate a network's map and stream its measures along the trajectory.

One *pass* runs every pending trajectory measure of one network together. The batch is the
reference trajectories x of all samples, followed by the perturbed twins of each measure of the
spec that needs them (the Lyapunov exponent's, renormalised every tau steps, Algorithm A1 of
Inoue et al. 2021; the raw twins of Fig. 4A), so a single application of f advances them all; x_t
is computed in the same batch shape in every pass.

Per step nothing leaves the device: measures write into device buffers that cover one *segment*
(``layout.segment`` steps). At the end of a segment the buffers are copied to the host once,
written to the store as chunk-aligned regions, and the pass state is saved, so a killed run
resumes from the last segment with results equal to an uninterrupted run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import torch

from models.base import MapInputs
from models.init import TruncatedNormalInit
from runner.core import interrupt
from runner.core.device import set_precision
from runner.storage import kept
from runner.storage.checkpoint import load_checkpoint, save_checkpoint
from runner.core.layout import Layout, never_as_nan
from runner.plugin.measures import measures
from runner.storage.store import Store
from runner.studies.depth.exit import EarlyExit
from runner.plugin.timings import StepMeasure
from runner.studies.depth.measure import Segment
from runner.studies.depth.micro_batches import apply_map
from runner.studies.depth.reduce import SyncReduction, reduces
from runner.studies.depth.resolve import Network, derive_seed
from runner.studies.depth.spec import DepthSpec

DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "fp64": torch.float64, "bf16": torch.bfloat16}


@dataclass
class PassInputs:
    input_ids: torch.Tensor | None
    attention_mask: torch.Tensor | None
    masked: torch.Tensor | None = None
    """Bool (samples, tokens): tokens replaced by ``mask_token_id`` in x_0 of text models (a measure
    with ``input_masking``); ``input_ids`` keep the original tokens (the labels)."""
    mask_token_id: int | None = None
    scores: torch.Tensor | None = None
    """Float64 (samples,): each sentence pair's annotated score (``[input] score``), else None."""


def build_map(spec: DepthSpec, net: Network, device: torch.device):
    init = net.model.init
    return net.model.family.build(
        net.model.source, revision=net.model.revision, params=dict(net.model.params),
        init=TruncatedNormalInit(std=init.std, clip=init.clip) if init else None,
        seed=net.seed("map" if net.model.is_map else "init"), dtype=DTYPES[net.precision], device=device,
        implementation=spec.dynamics.implementation)


class IteratePass:
    """The pending trajectory measures of one network, run as one pass (the context measures see)."""

    def __init__(self, spec: DepthSpec, layout: Layout, net: Network, kinds: list[str], ids: list[str], store: Store,
                 inputs: PassInputs, device: torch.device, checkpoint: Path, report, rows: slice | None = None,
                 final: Path | None = None, source: tuple[Path, list[str]] | None = None):
        """``rows``: iterate only these samples (a shard, :mod:`runner.studies.depth.shards`; ``store``
        is then the shard's sink); x_0 is drawn for all samples and sliced, so a shard's states are
        those of the whole batch. ``final``: where to keep the state before the last step's
        observation, for a longer run; ``source``: such a state of a finished pass (path, its task
        ids) that this longer pass continues (:mod:`runner.studies.depth.extend`)."""
        self.spec, self.layout, self.net, self.store = spec, layout, net, store
        self.index = net.index
        self.report = report
        self.device, self.checkpoint, self.ids = device, checkpoint, sorted(ids)
        self.rows, self.sharded = rows or slice(0, spec.input.samples), rows is not None
        self.S, self.T = len(range(spec.input.samples)[self.rows]), spec.dynamics.steps
        self.batch_size = spec.dynamics.batch_size
        self.inputs = inputs
        self.mask_all = inputs.attention_mask.to(device) if inputs.attention_mask is not None else None
        self.mask_x = self.mask_all[self.rows] if self.mask_all is not None else None
        registry = measures("depth")
        everything = {m.kind: registry[m.kind](m) for m in spec.measure if registry[m.kind].tags.timing == "step"}
        self.active: list[StepMeasure] = [everything[k] for k in everything if k in kinds]
        # twins are iterated whenever the spec has a measure that needs them, measured or not this pass
        self.twins: list[StepMeasure] = [m for m in everything.values() if m.tags.step.twin]
        self.twin_rows: dict[str, slice] = {}
        lo = self.S
        for m in self.twins:
            n = len(m.rows(self))
            self.twin_rows[m.kind()], lo = slice(lo, lo + n), lo + n
        self.z: torch.Tensor | None = None
        self.loop_seconds = 0.0
        self.final, self.source = final, source
        self.extended_from: int | None = None
        period = spec.exit_period()
        self.owner = torch.cat([torch.arange(self.S, device=device)] + [m.rows(self) for m in self.twins])
        self.exit = None if period is None else EarlyExit(self.owner, self.S, period)
        self.reduce: SyncReduction | None = None  # made once the map is built (whether it treats tokens alike)
        self.reduced_from_start = False
        """Every sample the reduction may take runs reduced from t = 0 (to time a reduced step)."""

    # ------------------------------------------------------------------ state
    def _start(self) -> tuple[int, torch.Tensor, torch.Tensor]:
        saved = load_checkpoint(self.checkpoint, self.ids, self.store.store_id, self.device)
        if saved is None and self.source is not None:
            saved = self._extend(*self.source)
        if saved is not None:
            tensors, meta = saved
            self.batch_size = meta.get("batch_size", self.batch_size)
            for m in self._stateful():
                prefix = f"{m.kind()}."
                m.load_state_dict({k.removeprefix(prefix): v for k, v in tensors.items() if k.startswith(prefix)})
            if self.exit:
                self.exit.load_state_dict({k.removeprefix("exit."): v for k, v in tensors.items()
                                           if k.startswith("exit.")})
            if self.reduce:
                self.reduce.load_state_dict({k.removeprefix("reduce."): v for k, v in tensors.items()
                                             if k.startswith("reduce.")})
            return int(meta["t"]), tensors["z"], tensors["diverged"]
        gen = torch.Generator().manual_seed(derive_seed(self.spec.experiment.seed, self.net.model.name, "initial_states"))
        ids = self.inputs.input_ids.to(self.device) if self.inputs.input_ids is not None else None
        if ids is not None and self.inputs.masked is not None and not self.net.model.is_map:
            ids = torch.where(self.inputs.masked.to(self.device), self.inputs.mask_token_id, ids)
        x_all = self.model.initial_state(MapInputs(samples=self.spec.input.samples, input_ids=ids,
                                                   attention_mask=self.mask_all, generator=gen))
        x = x_all[self.rows]
        # a shard's twins are the whole batch's, sliced (twin measures that shard have one per sample)
        z = torch.cat([x] + [m.perturb_shard(self, x_all, self.rows) if self.sharded else m.perturb(self, x)
                             for m in self.twins])
        for m in self.active:
            m.start(self, x)
        if self.exit:
            self.exit.after(0, z)
        return 0, z, torch.full((self.S,), -1, dtype=torch.int64, device=self.device)

    def _extend(self, path: Path, ids: list[str]) -> tuple[dict, dict] | None:
        """The state a finished pass kept at its end, as this longer run has it there (each measure's
        ``extend_state``); the chunks it wrote count as this pass's (its values stay in place)."""
        found = load_checkpoint(path, ids, self.store.store_id, self.device)
        if found is None:  # gone, foreign or altered: from t = 0 (the same values, later)
            why = kept.problem(path) or "there is no kept state"
            self.report.warn(f"{self.net.label}: {path}: {why}; the longer run starts from t = 0")
            return None
        tensors, meta = found
        old = int(meta["t"])
        for m in self.active:
            prefix = f"{m.kind()}."
            state = m.extend_state({k.removeprefix(prefix): v for k, v in tensors.items() if k.startswith(prefix)},
                                   old, self.T)
            tensors = {**{k: v for k, v in tensors.items() if not k.startswith(prefix)},
                       **{prefix + k: v for k, v in state.items()}}
        kinds = {m.kind() for m in self.active}
        for v in self.layout.vars.values():
            if v.measure in kinds and "network" in v.dims:
                self.store.claim(v.name, tuple(self.index if d == "network" else slice(None) for d in v.dims))
        self.extended_from = old
        return tensors, meta

    def _stateful(self) -> list[StepMeasure]:
        """The measures whose state a durable point keeps: the active ones, and the twin measures that
        are iterated without being measured (their twins' state, e.g. a perturbation size)."""
        return self.active + [m for m in self.twins if m not in self.active]

    def warn(self, message: str) -> None:
        """One warning line of a measure, naming the network."""
        self.report.warn(f"{self.net.label}: {message}")

    def _save(self, t: int, z: torch.Tensor, diverged: torch.Tensor, path: Path | None = None) -> None:
        tensors = {"z": z, "diverged": diverged}
        for m in self._stateful():
            tensors.update({f"{m.kind()}.{k}": v for k, v in m.state_dict().items()})
        if self.exit:
            tensors.update({f"exit.{k}": v for k, v in self.exit.state_dict().items()})
        if self.reduce:
            tensors.update({f"reduce.{k}": v for k, v in self.reduce.state_dict().items()})
        save_checkpoint(path or self.checkpoint, tensors, self.ids, self.store.store_id, t=t,
                        batch_size=self.batch_size, network=self.net.label)

    # ------------------------------------------------------------------ run
    def run(self) -> int:
        """Iterate to the end, writing every segment; returns the step it resumed from."""
        set_precision(self.net.precision)
        self.model = build_map(self.spec, self.net, self.device)
        if self.spec.dynamics.compile:
            # shapes recompile: OOM halving, exits; the reduction's row counts change at each admission, so
            # there torch marks the batch dimension dynamic after its first recompile
            dynamic = None if self.spec.dynamics.reduction() else False
            self.model.step = torch.compile(self.model.step, dynamic=dynamic)
        mask = None if self.mask_x is None else torch.cat([self.mask_x] + [self.mask_x[m.rows(self)] for m in self.twins])
        self.reduce = self._reduction(mask)
        if self.reduce and self.reduced_from_start:
            self.reduce.admit_all()
        L = self.layout.segment
        t_loop = time.monotonic()
        with torch.no_grad():
            start, z, diverged = self._start()
            n_diverged = int((diverged >= 0).sum())
            for seg_start in range(start, self.T, L):
                seg = Segment(seg_start, min(seg_start + L, self.T), min(seg_start + L, self.T) == self.T, self.T)
                bufs = {m.kind(): m.buffers(self, seg) for m in self.active}
                for t in range(seg.start, seg.end):
                    if self.reduce:
                        z = self.reduce.at(t, z, self._f)
                    diverged = self._observe(t, z, diverged, bufs, seg)
                    z = self._step(t, z, mask)
                    for m in self.twins:
                        rows = self.twin_rows[m.kind()]
                        y = z[rows]
                        advanced = m.advance(self, t + 1, z[: self.S], y, bufs.get(m.kind(), {}), seg)
                        if advanced is not y:  # between renormalisations the twins are advanced in place
                            z[rows] = advanced
                    if self.exit:
                        self.exit.after(t + 1, z)
                    self.report.progress(t + 1)
                    interrupt.check()
                    interrupt.stall_point(self.store.state_dir, self.net.label, t + 1)
                if seg.last:
                    if self.final is not None:  # what a longer run resumes from at step T
                        self._save(self.T, z, diverged, self.final)
                    if self.reduce:
                        z = self.reduce.at(self.T, z, self._f)
                    diverged = self._observe(self.T, z, diverged, bufs, seg)
                for m in self.active:
                    m.write(self, bufs[m.kind()], seg)
                if seg.last:
                    self.store.write("diverged_step", (self.index, slice(None)), never_as_nan(diverged))
                    if self.spec.dynamics.reduction():
                        self._write_reduction()
                    if self.exit:
                        self.store.write("exit_step", (self.index, slice(None)), never_as_nan(self.exit.exit_step))
                        self.store.write("exit_period", (self.index, slice(None)), never_as_nan(self.exit.exit_period))
                self._save(seg.end, z, diverged)
                now_diverged = int((diverged >= 0).sum())  # one host sync per segment
                if now_diverged > n_diverged:
                    first = int(diverged[diverged >= 0].min())
                    self.report.note("nonfinite", samples=now_diverged, first_step=first, step=seg.end)
                    self.report.warn(f"{self.net.label}: {now_diverged} of {self.S} samples diverged (NaN or Inf from "
                                     f"step {first}); their values are NaN, see diverged_step")
                    n_diverged = now_diverged
        self.loop_seconds = time.monotonic() - t_loop
        return start

    def _step(self, t: int, z: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """u_t = f(z_t) (with early exit: on the rows still iterated, the others replayed; with the
        reduction: the reduced rows on their first token, broadcast)."""
        if not self.model.autonomous:
            self.model.at(t)
        if self.reduce is not None:
            return self.reduce.apply(z, self._f)
        if self.exit is None:
            return self._f(z, mask)
        return self.exit.apply(t, z, lambda rows: self._f(z, mask) if rows is None else
                               self._f(z[rows], None if mask is None else mask[rows]))

    def _f(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """f of the rows ``x``, in micro-batches that halve on device OOM (the size kept for later steps)."""
        u, self.batch_size = apply_map(self.model, x, mask, self.batch_size)
        return u

    def _reduction(self, mask: torch.Tensor | None) -> SyncReduction | None:
        """The reduction of this pass (``[dynamics] reduce``), for a network it can take
        (:func:`~runner.studies.depth.reduce.reduces`); ``mask``: the batch's attention mask."""
        d = self.spec.dynamics
        if d.reduction() is None or not reduces(self.net):
            return None
        return SyncReduction(self.owner, self.S, self.net.precision, tolerance=d.reduce_tolerance,
                             every=d.reduce_every, guard_steps=d.reduce_guard_steps, guard_size=d.reduce_guard_size,
                             guard_every=d.reduce_guard_every, seed=self.net.seed("reduce_guard"), mask=mask)

    def _write_reduction(self) -> None:
        never = torch.full((self.S,), -1, dtype=torch.int64)  # a network the reduction cannot take
        steps = ((never, never) if self.reduce is None else (self.reduce.reduced_step, self.reduce.refused_step))
        for name, value in zip(("reduced_step", "reduce_refused_step"), steps):
            self.store.write(name, (self.index, slice(None)), never_as_nan(value))

    def twin(self, m: StepMeasure) -> torch.Tensor:
        """The current state of ``m``'s twins (its rows of the batch)."""
        return self.z[self.twin_rows[m.kind()]]

    def _observe(self, t: int, z: torch.Tensor, diverged: torch.Tensor, bufs: dict, seg: Segment) -> torch.Tensor:
        self.z = z
        x = z[: self.S]
        finite = None
        for m in self.active:
            f = m.observe(self, t, x, bufs[m.kind()], seg)
            if finite is None:
                finite = f
        if finite is None:
            finite = torch.isfinite(x.flatten(1).sum(1))
        return torch.where((diverged < 0) & ~finite, t, diverged)
