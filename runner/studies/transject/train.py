"""The training task: the paper's recipe (App. B), a checkpoint every epoch, exact resume.

``torch.optim.Adam`` (lr 5e-4, betas (0.9, 0.98), eps 1e-9), batches of 32 in an order drawn anew each epoch from
``(seed, epoch)``, loss = cross entropy + ``reconstruction_weight`` x the eigenvalue reconstruction
loss (Approx. variants), and after every epoch the test loss and accuracy; training stops when
the test loss has not improved for ``patience`` epochs (early stopping on the test loss, as the
paper does). The loop, its files (``epoch_000.safetensors`` ...: the weights after each epoch,
000 at initialisation; ``resume.safetensors``) and the exact resume after a kill are the engine's
(:mod:`runner.checkpointed`); :class:`TransJectRun` is the recipe it runs, with Adam's moments
and step count, the best test loss and the epochs without improvement as its resume state.

At the end the weights of the epoch with the lowest test loss are exported, with their config and
vocabulary, to ``<store>.runner/export/<network>/`` (the format a ``[[model]] checkpoint`` reads).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from safetensors.torch import save
from torch import Tensor
from torch.nn import functional as F

from runner.checkpointed import loop as checkpointed
from runner.checkpointed.loop import Finished, Saved
from runner.studies.transject.data.classification import Encoded
from runner.storage.checkpoint import read_tensors
from runner.storage.store import atomic_write_bytes
from runner.studies.transject.models import build
from runner.studies.transject.spec import TransJectTraining


@torch.no_grad()
def evaluate(model, data: Encoded, batch_size: int, device, seed: int) -> tuple[float, float]:
    """Mean cross entropy and accuracy over ``data`` (eval mode; an entropic draw from ``seed``)."""
    model.eval()
    gen = torch.Generator(device=device).manual_seed(seed)
    loss, correct = 0.0, 0
    for i in range(0, len(data.labels), batch_size):
        x, m, y = (t[i:i + batch_size].to(device) for t in (data.ids, data.mask, data.labels))
        logits = model(x, m, generator=gen).logits
        loss += float(F.cross_entropy(logits, y, reduction="sum"))
        correct += int((logits.argmax(-1) == y).sum())
    n = max(len(data.labels), 1)
    return loss / n, correct / n


def steps_per_epoch(n_train: int, batch_size: int) -> int:
    return -(-n_train // batch_size)


def _optimizer_state(optimizer: torch.optim.Optimizer, saved: dict[str, Tensor]) -> dict:
    """The optimizer's state dict with the moments saved by ``save_epoch`` (``adam.<param>.<key>``)."""
    state: dict[int, dict[str, Tensor]] = {}
    for name, value in saved.items():
        if name.startswith("adam."):
            _, i, key = name.split(".", 2)
            state.setdefault(int(i), {})[key] = value
    return {"state": state, "param_groups": optimizer.state_dict()["param_groups"]}


def checkpoint_name(index: int, step: int) -> str:
    return f"epoch_{index:03d}.safetensors"


class TransJectRun:
    """One network trained with the paper's recipe, as a :class:`runner.checkpointed.loop.Trainable`."""

    curve_names = ("train_loss", "test_loss", "test_accuracy")
    checkpoint_name = staticmethod(checkpoint_name)

    def __init__(self, variant: str, params: dict, seed: int, tr: TransJectTraining, train: Encoded, test: Encoded, device):
        self.model = build(variant, params, seed, device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=tr.lr, betas=tr.betas, eps=tr.eps)
        self.tr, self.train, self.test, self.seed, self.device = tr, train, test, seed, device
        self.epochs, self.steps_per_epoch = tr.epochs, steps_per_epoch(len(train.labels), tr.batch_size)
        self.best, self.best_epoch, self.bad = math.inf, 0, 0

    def begin_epoch(self, epoch: int, batch: int) -> None:
        self.order = torch.randperm(len(self.train.labels),
                                    generator=torch.Generator().manual_seed(self.seed * 1_000_003 + epoch))

    def step(self, epoch: int, batch: int, step: int, curves) -> None:
        idx = self.order[batch * self.tr.batch_size:(batch + 1) * self.tr.batch_size]
        x, m, y = (t[idx].to(self.device) for t in (self.train.ids, self.train.mask, self.train.labels))
        self.model.zero_grad(set_to_none=True)
        out = self.model(x, m)
        loss = F.cross_entropy(out.logits, y)
        w = self.tr.reconstruction_weight
        (loss + w * out.reconstruction_loss if w else loss).backward()
        self.optimizer.step()
        curves.train_loss.append(loss.item())

    def end_epoch(self, epochs_done: int, curves) -> bool:
        test_loss, accuracy = evaluate(self.model, self.test, self.tr.batch_size, self.device, self.seed)
        curves.test_loss.append(test_loss)
        curves.test_accuracy.append(accuracy)
        if test_loss < self.best:
            self.best, self.best_epoch, self.bad = test_loss, epochs_done, 0
        else:
            self.bad += 1
        return self.tr.patience is not None and self.bad >= self.tr.patience

    def state(self, mid_epoch: bool) -> tuple[dict[str, Tensor], dict[str, str]]:
        tensors = {f"adam.{i}.{k}": v for i, moments in self.optimizer.state_dict()["state"].items()
                   for k, v in moments.items()}  # Adam's moments and step count
        return tensors, {"best": repr(self.best), "best_epoch": str(self.best_epoch), "bad": str(self.bad)}

    def restore(self, t: dict[str, Tensor], meta: dict[str, str], mid_epoch: bool) -> None:
        self.optimizer.load_state_dict(_optimizer_state(self.optimizer, t))
        self.best, self.best_epoch, self.bad = float(meta["best"]), int(meta["best_epoch"]), int(meta["bad"])


def train_run(run: TransJectRun, train_id: str, label: str, ckpt_dir: Path, device,
              progress: Callable[[int], None] | None = None) -> Iterator[Saved | Finished]:
    """Train (or resume) ``run`` with a checkpoint at every epoch end (0: initialisation), then Finished."""
    steps = [e * run.steps_per_epoch for e in range(run.epochs + 1)]
    yield from checkpointed.train(run, run.seed, steps, train_id, label, ckpt_dir, device, progress)


def train(variant: str, params: dict, seed: int, tr: TransJectTraining, train: Encoded, test: Encoded, train_id: str,
          label: str, ckpt_dir: Path, device, progress: Callable[[int], None] | None = None,
          ) -> Iterator[Saved | Finished]:
    """Train (or resume) one network of the spec; yield after each epoch's checkpoint is saved, then Finished."""
    yield from train_run(TransJectRun(variant, params, seed, tr, train, test, device), train_id, label, ckpt_dir,
                         device, progress)


def export(dir: Path, variant: str, params: dict, weights: Path, vocab: list[str]) -> None:
    """The format a ``[[model]] checkpoint`` reads: config.json, model.safetensors, vocab.json."""
    dir.mkdir(parents=True, exist_ok=True)
    tensors = {k.removeprefix("model."): v for k, v in read_tensors(weights).items() if k.startswith("model.")}
    atomic_write_bytes(dir / "model.safetensors", save(tensors, metadata={"format": "pt"}))
    atomic_write_bytes(dir / "config.json", json.dumps({"variant": variant, "params": params}, indent=1).encode())
    atomic_write_bytes(dir / "vocab.json", json.dumps(vocab).encode())
