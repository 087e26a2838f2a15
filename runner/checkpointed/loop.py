"""The resumable training loop of training as time, over a study's :class:`Trainable`.

The loop counts optimizer steps in epochs of ``steps_per_epoch`` batches, saves a checkpoint at
every scheduled step (mid-epoch, or at an epoch end after the epoch's evaluation) and rewrites
``resume.safetensors`` with it and at every epoch end: the weights, the study's extra state
(optimizer buffers, a carried hidden state, its rates and best losses), the RNG states, the
position (step, epoch, next batch) and the curves so far. A run killed at any moment resumes from
its last durable point and gives results bit-identical to an uninterrupted one (same device and
thread count); a finished run (``done``: the last epoch, or an early stop) is not trained again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch
from torch import Tensor

from runner.core import interrupt
from runner.storage import kept
from runner.storage.checkpoint import read_tensors
from runner.checkpointed.files import RESUME, load_weights, read_resume, save, weights
from runner.checkpointed.schedule import by_step


class Curves:
    """Named series of floats recorded while training (``curves.train_loss`` ...), kept in the resume file."""

    def __init__(self, names: tuple[str, ...] = (), **series: list[float]):
        self.__dict__.update({k: [] for k in names}, **series)

    def tensors(self) -> dict[str, Tensor]:
        return {f"curves.{k}": torch.tensor(v, dtype=torch.float64) for k, v in vars(self).items()}

    @classmethod
    def from_tensors(cls, t: dict[str, Tensor], names: tuple[str, ...]) -> Curves:
        return cls(**{k: t[f"curves.{k}"].tolist() for k in names})


class Trainable(Protocol):
    """A study's network, data, loss and optimizer, as the loop drives them. A class that subclasses it
    inherits the defaults: checkpoints named by step, no early stop, no state beyond the weights."""

    model: torch.nn.Module
    steps_per_epoch: int
    epochs: int
    curve_names: tuple[str, ...]

    def checkpoint_name(self, index: int, step: int) -> str:
        """File name of checkpoint ``index`` (at optimizer step ``step``)."""
        return f"step_{step:06d}.safetensors"

    def begin_epoch(self, epoch: int, batch: int) -> None:
        """Before the batches of epoch ``epoch`` (0-based), from batch ``batch`` (> 0 after a mid-epoch resume)."""

    def step(self, epoch: int, batch: int, step: int, curves: Curves) -> None:
        """One optimizer step on batch ``batch``; ``step`` counts it (1-based over the run)."""

    def end_epoch(self, epochs_done: int, curves: Curves) -> bool:
        """After an epoch's batches: evaluate, adapt (rates, best losses); True stops training early."""
        return False

    def state(self, mid_epoch: bool) -> tuple[dict[str, Tensor], dict[str, str]]:
        """Extra tensors and string metadata the study needs to continue exactly (kept in the resume file)."""
        return {}, {}

    def restore(self, tensors: dict[str, Tensor], meta: dict[str, str], mid_epoch: bool) -> None:
        """Take back :meth:`state` from a resume file (the weights are already loaded)."""


@dataclass
class Saved:
    """Yielded by :func:`train` after a scheduled checkpoint is on disk."""

    index: int
    step: int
    epoch: float
    path: Path
    curves: Curves


@dataclass
class Finished:
    """Yielded last by :func:`train`: the run is done (also when it was done before)."""

    curves: Curves
    resumed_from: int
    """The optimizer step it resumed from (0: started afresh)."""
    resumed_epoch: int
    """The epochs done when it resumed."""
    epochs: int
    """Epochs trained (fewer than ``epochs`` after an early stop)."""


def train(run: Trainable, seed: int, steps: list[int], train_id: str, label: str, ckpt_dir: Path, device,
          progress: Callable[[int], None] | None = None) -> Iterator[Saved | Finished]:
    """Train (or resume) ``run``, keeping checkpoint k at optimizer step ``steps[k]``; yield after each
    is saved, then :class:`Finished`. Afresh, the torch RNG is seeded with ``seed`` (dropout; the
    study's builder seeded the initial weights)."""
    spe, schedule = run.steps_per_epoch, by_step(steps)
    resume = ckpt_dir / RESUME
    stood = read_resume(resume, train_id)
    # an altered or torn resume file is not continued from: the run starts afresh (the same values)
    resumed = stood is not None and kept.problem(resume) is None
    if resumed:
        t = read_tensors(resume, device)
        load_weights(run.model, resume, device)
        epoch, batch = stood.epoch, stood.batch
        step = stood.step if stood.step is not None else epoch * spe
        run.restore(t, stood.meta, batch > 0)
        torch.set_rng_state(t["rng.cpu"].cpu())
        if device.type == "cuda" and "rng.cuda" in t:
            torch.cuda.set_rng_state(t["rng.cuda"].cpu(), device)
        curves = Curves.from_tensors(t, run.curve_names)
    else:
        torch.manual_seed(seed)
        step, epoch, batch, curves = 0, 0, 0, Curves(run.curve_names)
    resumed_from, resumed_epoch = step, epoch
    stopped = resumed and stood.done

    def durable(checkpoint: bool, next_batch: int, done: bool) -> list[Saved]:
        tensors = weights(run.model)
        extra, own = run.state(next_batch > 0)
        info = {"train_id": train_id, "network": label, "step": str(step), "epoch": str(epoch),
                "batch": str(next_batch), "done": str(int(done)), **own}
        out = []
        if checkpoint:
            path = ckpt_dir / run.checkpoint_name(schedule[step][0], step)
            save(path, tensors, {**info, "kind": "checkpoint"})
            out = [Saved(k, step, step / spe, path, curves) for k in schedule[step]]
        state = dict(tensors)
        state.update(extra)
        state["rng.cpu"] = torch.get_rng_state()
        if device.type == "cuda":
            state["rng.cuda"] = torch.cuda.get_rng_state(device)
        state.update(curves.tensors())
        save(resume, state, {**info, "kind": "resume"})
        return out

    if not resumed and 0 in schedule:
        yield from durable(True, 0, False)
    while not stopped and epoch < run.epochs:
        run.model.train()
        run.begin_epoch(epoch, batch)
        for b in range(batch, spe):
            run.step(epoch, b, step + 1, curves)
            step += 1
            if progress is not None:
                progress(step)
            interrupt.check()
            interrupt.stall_point(ckpt_dir, label, step)
            if step in schedule and b + 1 < spe:
                yield from durable(True, b + 1, False)
        batch = 0
        epoch += 1
        stopped = run.end_epoch(epoch, curves)
        yield from durable(step in schedule, 0, stopped or epoch == run.epochs)
    yield Finished(curves, resumed_from, resumed_epoch, epoch)
