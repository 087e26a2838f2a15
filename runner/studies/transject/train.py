"""The training task: the paper's recipe (App. B), a checkpoint every epoch, exact resume.

``torch.optim.Adam`` (lr 5e-4, betas (0.9, 0.98), eps 1e-9), batches of 32 in an order drawn anew each epoch from
``(seed, epoch)``, loss = cross entropy + ``reconstruction_weight`` x the eigenvalue reconstruction
loss (Approx. variants), and after every epoch the test loss and accuracy; training stops when
the test loss has not improved for ``patience`` epochs (early stopping on the test loss, as the
paper does). Files, in ``<store>.runner/checkpoints/<network>/<train task id>/``:

* ``epoch_000.safetensors`` ... : the weights after each epoch (000: at initialisation), kept;
* ``resume.safetensors``: weights, Adam's moments and step count, the RNG state, the curves so far,
  the best test loss and the epochs without improvement, rewritten atomically at every epoch end.
  A run killed at any moment resumes from the last epoch end and gives results bit-identical to an
  uninterrupted run (same device and thread count).

At the end the weights of the epoch with the lowest test loss are exported, with their config and
vocabulary, to ``<store>.runner/export/<network>/`` (the format a ``[[model]] checkpoint`` reads).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors.torch import load_file, safe_open, save
from torch import Tensor
from torch.nn import functional as F

from runner import interrupt
from runner.data.classification import Encoded
from runner.store import atomic_write_bytes
from runner.studies.transject.models import build, state_dict_of
from runner.studies.transject.spec import TrainingSpec


@dataclass
class Curves:
    train_loss: list[float] = field(default_factory=list)
    test_loss: list[float] = field(default_factory=list)
    test_accuracy: list[float] = field(default_factory=list)

    def tensors(self) -> dict[str, Tensor]:
        return {f"curves.{k}": torch.tensor(v, dtype=torch.float64) for k, v in vars(self).items()}

    @classmethod
    def from_tensors(cls, t: dict[str, Tensor]) -> Curves:
        return cls(*(t[f"curves.{k}"].tolist() for k in ("train_loss", "test_loss", "test_accuracy")))


@dataclass
class Saved:
    epoch: int
    path: Path
    curves: Curves


@dataclass
class Finished:
    curves: Curves
    resumed_from: int
    stopped_epoch: int
    """Epochs trained (fewer than ``epochs`` after an early stop)."""
    best_epoch: int


def _save(path: Path, tensors: dict[str, Tensor], meta: dict[str, str]) -> None:
    atomic_write_bytes(path, save({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, metadata=meta))


def read_meta(path: Path) -> dict | None:
    if not path.is_file():
        return None
    try:
        with safe_open(str(path), "pt") as f:
            return dict(f.metadata() or {})
    except Exception:  # a torn or foreign file
        return None


def epoch_file(ckpt_dir: Path, epoch: int) -> Path:
    return ckpt_dir / f"epoch_{epoch:03d}.safetensors"


def load_weights(model: torch.nn.Module, path: Path, device) -> None:
    state = {k.removeprefix("model."): v for k, v in load_file(str(path), device=str(device)).items()
             if k.startswith("model.")}
    model.load_state_dict(state)


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


def train(variant: str, params: dict, seed: int, tr: TrainingSpec, train: Encoded, test: Encoded, train_id: str,
          label: str, ckpt_dir: Path, device, progress: Callable[[int], None] | None = None,
          ) -> Iterator[Saved | Finished]:
    """Train (or resume) one network; yield after each epoch's checkpoint is saved, then Finished."""
    model = build(variant, params, seed, device)
    optimizer = torch.optim.Adam(model.parameters(), lr=tr.lr, betas=tr.betas, eps=tr.eps)
    n = len(train.labels)
    spe = steps_per_epoch(n, tr.batch_size)
    resume = ckpt_dir / "resume.safetensors"
    meta = read_meta(resume)
    if meta is not None and meta.get("train_id") == train_id:
        t = load_file(str(resume), device=str(device))
        load_weights(model, resume, device)
        optimizer.load_state_dict(_optimizer_state(optimizer, t))
        torch.set_rng_state(t["rng.cpu"].cpu())
        if device.type == "cuda" and "rng.cuda" in t:
            torch.cuda.set_rng_state(t["rng.cuda"].cpu(), device)
        epoch, best, best_epoch, bad = int(meta["epoch"]), float(meta["best"]), int(meta["best_epoch"]), int(meta["bad"])
        curves, resumed_from = Curves.from_tensors(t), epoch
    else:
        torch.manual_seed(seed)  # dropout and entropic draws (build seeded the initial weights)
        epoch, best, best_epoch, bad, curves, resumed_from = 0, math.inf, 0, 0, Curves(), 0

    def save_epoch(done: bool) -> Saved:
        tensors = {f"model.{k}": v for k, v in state_dict_of(model).items()}
        meta = {"train_id": train_id, "network": label, "epoch": str(epoch), "best": repr(best),
                "best_epoch": str(best_epoch), "bad": str(bad), "done": str(int(done))}
        path = epoch_file(ckpt_dir, epoch)
        _save(path, tensors, {**meta, "kind": "checkpoint"})
        state = dict(tensors)
        for i, moments in optimizer.state_dict()["state"].items():  # Adam's moments and step count
            state.update({f"adam.{i}.{k}": v for k, v in moments.items()})
        state["rng.cpu"] = torch.get_rng_state()
        if device.type == "cuda":
            state["rng.cuda"] = torch.cuda.get_rng_state(device)
        state.update(curves.tensors())
        _save(resume, state, {**meta, "kind": "resume"})
        return Saved(epoch, path, curves)

    stopped = meta is not None and meta.get("train_id") == train_id and meta.get("done") == "1"
    if resumed_from == 0 and not stopped:
        yield save_epoch(False)  # the initial network (rewritten identically after a kill in epoch 1)
    while not stopped and epoch < tr.epochs:
        model.train()
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 1_000_003 + epoch))
        for b in range(spe):
            idx = order[b * tr.batch_size:(b + 1) * tr.batch_size]
            x, m, y = train.ids[idx].to(device), train.mask[idx].to(device), train.labels[idx].to(device)
            model.zero_grad(set_to_none=True)
            out = model(x, m)
            loss = F.cross_entropy(out.logits, y)
            total = loss + tr.reconstruction_weight * out.reconstruction_loss if tr.reconstruction_weight else loss
            total.backward()
            optimizer.step()
            curves.train_loss.append(loss.item())
            step = epoch * spe + b + 1
            if progress is not None:
                progress(step)
            interrupt.check()
            interrupt.stall_point(ckpt_dir, label, step)
        epoch += 1
        test_loss, accuracy = evaluate(model, test, tr.batch_size, device, seed)
        curves.test_loss.append(test_loss)
        curves.test_accuracy.append(accuracy)
        if test_loss < best:
            best, best_epoch, bad = test_loss, epoch, 0
        else:
            bad += 1
        stopped = tr.patience is not None and bad >= tr.patience
        yield save_epoch(stopped or epoch == tr.epochs)
    yield Finished(curves, resumed_from, epoch, best_epoch)


def export(dir: Path, variant: str, params: dict, weights: Path, vocab: list[str]) -> None:
    """The format a ``[[model]] checkpoint`` reads: config.json, model.safetensors, vocab.json."""
    dir.mkdir(parents=True, exist_ok=True)
    tensors = {k.removeprefix("model."): v for k, v in load_file(str(weights)).items() if k.startswith("model.")}
    atomic_write_bytes(dir / "model.safetensors", save(tensors, metadata={"format": "pt"}))
    atomic_write_bytes(dir / "config.json", json.dumps({"variant": variant, "params": params}, indent=1).encode())
    atomic_write_bytes(dir / "vocab.json", json.dumps(vocab).encode())
