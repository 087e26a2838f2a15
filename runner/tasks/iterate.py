"""Depth dynamics: iterate a network's map and stream the measures along the trajectory.

One *pass* runs every pending iterate task of one network together. The batch is the reference
trajectories x of all samples, followed by their perturbed twins y when the spec has a Lyapunov
measure (Algorithm A1 of Inoue et al. 2021), so a single application of f advances both.

Per step nothing leaves the device: measures write into device buffers that cover one *segment*
(``layout.segment`` steps). At the end of a segment the buffers are copied to the host once,
written to the store as chunk-aligned regions, and the pass state is checkpointed, so a killed
run resumes from the last segment with results equal to an uninterrupted run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from analyses.effective_dimension import effective_dimension
from analyses.lyapunov import initial_perturbation, renormalize
from analyses.pca import pca_projection
from analyses.token_deviation import SyncOffsetTracker, token_deviation
from runner import interrupt
from runner.layout import Layout
from runner.plan import Task
from runner.resolve import Network, derive_seed
from runner.spec import Spec
from runner.store import Store
from runner.tasks.checkpoint import load_checkpoint, save_checkpoint
from runner.tasks.device import apply_map, set_precision

DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "fp64": torch.float64}
Progress = Callable[[int], None]
Notify = Callable[..., None]


@dataclass
class PassInputs:
    input_ids: torch.Tensor | None
    attention_mask: torch.Tensor | None


def build_map(spec: Spec, net: Network, device: torch.device):
    dtype = DTYPES[net.precision]
    if net.model.is_map:
        from models.maps import build_map as build_reference_map

        return build_reference_map(net.model.map_name, dict(net.model.params), seed=net.seed("map"),
                                   dtype=dtype, device=device)
    from models.albert import load_albert
    from models.init import TruncatedNormalInit

    init = net.model.init
    return load_albert(net.location, revision=net.model.revision,
                       init=TruncatedNormalInit(std=init.std, clip=init.clip) if init else None,
                       seed=net.seed("init"), implementation=spec.dynamics.implementation,
                       dtype=dtype, device=device)


class IteratePass:
    """The pending iterate tasks of one network, run as one pass over the trajectory."""

    def __init__(self, spec: Spec, layout: Layout, net: Network, tasks: list[Task], store: Store,
                 inputs: PassInputs, device: torch.device, checkpoint: Path, notify: Notify | None = None):
        self.spec, self.layout, self.net, self.store = spec, layout, net, store
        self.notify = notify or (lambda event, **fields: None)
        self.tasks = {t.measure: t for t in tasks}
        self.params = {k: t.params for k, t in self.tasks.items()}
        self.device, self.checkpoint = device, checkpoint
        self.S, self.T = spec.input.samples, spec.dynamics.steps
        self.lyap = spec.measures().get("lyapunov")
        self.batch_size = spec.dynamics.batch_size
        self.inputs = inputs
        self.index = {k: torch.tensor(t.params["samples"], device=device)
                      for k, t in self.tasks.items() if "samples" in t.params}
        self.mask_x = inputs.attention_mask.to(device) if inputs.attention_mask is not None else None
        if "pca" in self.tasks:
            steps = layout.coords["pca_step"].values
            self.pca_window = (int(steps[0]), int(steps[-1]))

    # ------------------------------------------------------------------ state
    def _initial(self, model) -> dict:
        from models.base import MapInputs

        gen = torch.Generator().manual_seed(derive_seed(self.spec.experiment.seed, self.net.model.name, "initial_states"))
        ids = self.inputs.input_ids.to(self.device) if self.inputs.input_ids is not None else None
        mask = self.inputs.attention_mask.to(self.device) if self.inputs.attention_mask is not None else None
        with torch.no_grad():
            x = model.initial_state(MapInputs(samples=self.S, input_ids=ids, attention_mask=mask, generator=gen))
            z = x
            if self.lyap is not None:
                pgen = torch.Generator().manual_seed(self.net.seed("perturbation"))
                z = torch.cat([x, initial_perturbation(x, self.lyap.k, pgen)])
        state = {"t": 0, "z": z, "diverged": torch.full((self.S,), -1, dtype=torch.int64, device=self.device)}
        if "token_deviation" in self.tasks:
            state["sync"] = SyncOffsetTracker(self.S, self.tasks["token_deviation"].params["threshold"], self.device).state_dict()
        if "pca" in self.tasks:
            n_points = len(self.layout.coords["pca_step"].values)
            state["pca_points"] = torch.full((n_points, len(self.tasks["pca"].params["samples"]), *x.shape[1:]),
                                             float("nan"), dtype=x.dtype, device=self.device)
        return state

    def _mask(self) -> torch.Tensor | None:
        m = self.mask_x
        if m is None:
            return None
        return torch.cat([m, m]) if self.lyap is not None else m

    # ------------------------------------------------------------------ run
    def run(self, progress: Progress) -> int:
        """Iterate to the end, writing every segment; returns the step it resumed from."""
        set_precision(self.net.precision)
        model = build_map(self.spec, self.net, self.device)
        ids = sorted(t.id for t in self.tasks.values())
        state = load_checkpoint(self.checkpoint, ids, self.store.store_id, self.device) or self._initial(model)
        if state.get("batch_size"):
            self.batch_size = state["batch_size"]
        start = state["t"]
        sync = None
        if "sync" in state:
            sync = SyncOffsetTracker(self.S, self.tasks["token_deviation"].params["threshold"], self.device)
            sync.load_state_dict(state["sync"])
        mask = self._mask()
        L = self.layout.segment
        diverged = int((state["diverged"] >= 0).sum())
        t_loop = time.monotonic()
        with torch.no_grad():
            for seg_start in range(start, self.T, L):
                seg_end = min(seg_start + L, self.T)
                last = seg_end == self.T
                bufs = self._buffers(seg_start, seg_end, last)
                z = state["z"]
                for t in range(seg_start, seg_end):
                    self._record(t, z, state, sync, bufs, seg_start, model)
                    z, self.batch_size = apply_map(model, z, mask, self.batch_size)
                    if self.lyap is not None and (t + 1) % self.lyap.tau == 0:
                        lam, y = renormalize(z[: self.S], z[self.S :], self.lyap.k)
                        z = torch.cat([z[: self.S], y])
                        if "lyapunov" in bufs:
                            bufs["lyapunov"][:, (t + 1) // self.lyap.tau - 1 - seg_start // self.lyap.tau] = lam
                    progress(t + 1)
                    interrupt.check()
                    interrupt.stall_point(self.store.state_dir, self.net.label, t + 1)
                if last:
                    self._record(self.T, z, state, sync, bufs, seg_start, model)
                state["z"], state["t"] = z, seg_end
                if sync is not None:
                    state["sync"] = sync.state_dict()
                self._write(bufs, state, seg_start, seg_end, last)
                save_checkpoint(self.checkpoint, state, ids, self.store.store_id, self.batch_size)
                now_diverged = int((state["diverged"] >= 0).sum())  # one host sync per segment
                if now_diverged > diverged:
                    first = int(state["diverged"][state["diverged"] >= 0].min())
                    self.notify("nonfinite", samples=now_diverged, first_step=first, step=seg_end)
                    diverged = now_diverged
        self.loop_seconds = time.monotonic() - t_loop
        return start

    # ------------------------------------------------------------------ measures per step
    def _buffers(self, seg_start: int, seg_end: int, last: bool) -> dict[str, torch.Tensor]:
        def n_kept(every: int) -> int:
            hi = self.T // every + 1 if last else seg_end // every
            return hi - seg_start // every

        nan = dict(fill_value=float("nan"), device=self.device)
        bufs: dict[str, torch.Tensor] = {}
        p = {k: t.params for k, t in self.tasks.items()}
        if "token_deviation" in p:
            bufs["deviation"] = torch.full((self.S, n_kept(p["token_deviation"]["every"])), dtype=torch.float32, **nan)
        if "lyapunov" in p:
            bufs["lyapunov"] = torch.full((self.S, (seg_end - seg_start) // p["lyapunov"]["tau"]), dtype=torch.float64, **nan)
        if "effective_dimension" in p:
            bufs["effective_dimension"] = torch.full((n_kept(p["effective_dimension"]["every"]),), dtype=torch.float64, **nan)
        if "trajectory" in p:
            q = p["trajectory"]
            bufs["trace"] = torch.full((len(q["samples"]), n_kept(q["every"]), len(q["tokens"]), len(q["elements"])),
                                       dtype=torch.float32, **nan)
        if "attention" in p:
            shape = self.layout.vars["attention"].shape
            bufs["attention"] = torch.full((shape[1], n_kept(p["attention"]["every"]), *shape[3:]), dtype=torch.float32, **nan)
        return bufs

    def _record(self, t: int, z: torch.Tensor, state: dict, sync, bufs: dict, seg_start: int, model) -> None:
        x = z[: self.S]
        p = self.params
        if sync is not None:
            D = token_deviation(x)
            sync.update(t, D)
            every = p["token_deviation"]["every"]
            if t % every == 0:
                bufs["deviation"][:, t // every - seg_start // every] = D
            finite = torch.isfinite(D)  # D is NaN or Inf exactly when the state holds one
        else:
            finite = torch.isfinite(x.flatten(1).sum(1))
        d = state["diverged"]
        state["diverged"] = torch.where((d < 0) & ~finite, t, d)
        if "effective_dimension" in p and t % p["effective_dimension"]["every"] == 0:
            every = p["effective_dimension"]["every"]
            bufs["effective_dimension"][t // every - seg_start // every] = effective_dimension(x)
        if "trajectory" in p and t % p["trajectory"]["every"] == 0:
            q = p["trajectory"]
            bufs["trace"][:, t // q["every"] - seg_start // q["every"]] = self._trace(x)
        if "attention" in p and t % p["attention"]["every"] == 0:
            q = p["attention"]
            idx = self.index["attention"]
            probs = model.attention_probs(x[idx], self.mask_x[idx] if self.mask_x is not None else None)
            if probs is not None:
                bufs["attention"][:, t // q["every"] - seg_start // q["every"], : probs.shape[1]] = probs
        if "pca" in p:
            first, last = self.pca_window
            if first <= t <= last and (t - first) % p["pca"]["every"] == 0:
                state["pca_points"][(t - first) // p["pca"]["every"]] = x[self.index["pca"]]

    def _trace(self, x: torch.Tensor) -> torch.Tensor:
        """x[samples][:, tokens][:, :, elements], NaN where a token or element does not exist (maps)."""
        if not hasattr(self, "_trace_index"):
            q = self.tasks["trajectory"].params
            tok = torch.tensor(q["tokens"], device=self.device)
            el = torch.tensor(q["elements"], device=self.device)
            valid = (tok < x.shape[1])[:, None] & (el < x.shape[2])[None, :]
            self._trace_index = (tok.clamp(max=x.shape[1] - 1), el.clamp(max=x.shape[2] - 1), valid)
        tok, el, valid = self._trace_index
        out = x[self.index["trajectory"]][:, tok][:, :, el].float()
        return torch.where(valid, out, torch.full_like(out, float("nan")))

    # ------------------------------------------------------------------ writing
    def _write(self, bufs: dict, state: dict, seg_start: int, seg_end: int, last: bool) -> None:
        i = self.net.index
        host = {k: v.cpu().numpy() for k, v in bufs.items()}

        def span(every: int, length: int) -> slice:
            return slice(seg_start // every, seg_start // every + length)

        p = {k: t.params for k, t in self.tasks.items()}
        if "deviation" in host:
            d = host["deviation"]
            self.store.write("deviation", (i, slice(None), span(p["token_deviation"]["every"], d.shape[1])), d)
        if "lyapunov" in host:
            tau = p["lyapunov"]["tau"]
            lam = host["lyapunov"]
            region = (i, slice(None), slice(seg_start // tau, seg_start // tau + lam.shape[1]))
            self.store.write("lyapunov", region, lam.astype(np.float32))
            self.store.write("lyapunov_per_step", region, (lam / tau).astype(np.float32))
        if "effective_dimension" in host:
            n = host["effective_dimension"]
            self.store.write("effective_dimension", (i, span(p["effective_dimension"]["every"], len(n))), n)
        if "trace" in host:
            tr = host["trace"]
            self.store.write("trace", (i, slice(None), span(p["trajectory"]["every"], tr.shape[1])), tr)
        if "attention" in host:
            a = host["attention"]
            self.store.write("attention", (i, slice(None), span(p["attention"]["every"], a.shape[1])), a)
        if last:
            self.store.write("diverged_step", (i, slice(None)), state["diverged"].cpu().numpy())
            if "token_deviation" in p:
                self.store.write("sync_offset", (i, slice(None)), state["sync"]["offset"].cpu().numpy())
            if "pca" in p:
                self._write_pca(state["pca_points"], p["pca"]["components"])

    def _write_pca(self, points: torch.Tensor, components: int) -> None:
        n_points, n_samples = points.shape[:2]
        proj = np.full((n_samples, n_points, components), np.nan, dtype=np.float32)
        ratio = np.full((n_samples, components), np.nan)
        for s in range(n_samples):
            pts = points[:, s].flatten(1)
            keep = torch.isfinite(pts).all(1)
            n = min(components, int(keep.sum()) - 1, pts.shape[1])
            if n >= 1:
                pr, r = pca_projection(pts[keep], n)
                proj[s, keep.cpu().numpy(), :n] = pr.cpu().numpy()
                ratio[s, :n] = r.cpu().numpy()
        self.store.write("pca_projection", (self.net.index,), proj)
        self.store.write("pca_explained_variance", (self.net.index,), ratio)


def run_pass(spec, layout, net, tasks, store, inputs, device, checkpoint, progress,
             notify: Notify | None = None) -> tuple[int, float, float]:
    """Run a pass; returns (step it resumed from, total seconds, seconds of the iteration loop).
    ``notify(event, **fields)`` is called when samples diverge (event ``nonfinite``)."""
    t0 = time.monotonic()
    p = IteratePass(spec, layout, net, tasks, store, inputs, device, checkpoint, notify)
    start = p.run(progress)
    return start, time.monotonic() - t0, p.loop_seconds
