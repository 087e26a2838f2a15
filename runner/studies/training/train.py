"""The training task: the thesis' recipe, checkpoints as safetensors, exact resume.

Recipe (pytorch/examples ``word_language_model``, which the thesis matches): batchified streams,
truncated BPTT of ``bptt`` tokens with the hidden state carried (detached) across batches, SGD
with the gradient's l2 norm clipped, and after every epoch the validation loss decides the rate:
kept when it improved, divided by ``lr_decay`` (4: "quartered") when it did not.

Files, in ``<store>.runner/checkpoints/<network>/<train task id>/``:

* ``step_00000123.safetensors``: the weights at a scheduled checkpoint (kept);
* ``resume.safetensors``: everything needed to continue exactly -- weights, optimizer buffers,
  the RNG states, the carried hidden state, the position in the data, the rate and best
  validation loss, and the curves so far -- rewritten atomically at every checkpoint and at
  every epoch end. A run killed at any moment resumes from it and produces bit-identical
  results to an uninterrupted one (same device and thread count).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, safe_open, save
from torch import Tensor

from models.registry import family_for
from runner import interrupt
from runner.store import atomic_write_bytes
from runner.data.tokens import batchify, get_batch
from runner.data.corpus import Corpus
from runner.studies.training.spec import NetworkSpec, TrainingSpec


def build_model(net: NetworkSpec, training: TrainingSpec, corpus: Corpus, seed: int, device="cpu"):
    """The network of a spec entry, initialised from ``seed`` (the LSTM family of :mod:`models.registry`)."""
    sizes = dict(vocab_size=len(corpus.vocab), embedding_dim=training.embedding_dim, hidden_dim=training.hidden_dim,
                 dropout=training.dropout)
    if net.kind == "lm":
        source, params = "builtin:lstm-lm", dict(sizes, num_layers=training.num_layers)
    else:
        source, params = "builtin:lstm-tagger", dict(sizes, n_tags=len(corpus.tags[net.tagset].vocab), mode=net.mode)
    return family_for(source).build(source, params=params, seed=seed, device=device)


def steps_per_epoch(n_tokens: int, training: TrainingSpec) -> int:
    rows = n_tokens // training.batch_size
    return len(range(0, rows - 1, training.bptt))


def checkpoint_dir(state_dir: Path, network: str, train_id: str) -> Path:
    return state_dir / "checkpoints" / network / train_id


def checkpoint_file(state_dir: Path, network: str, train_id: str, step: int) -> Path:
    return checkpoint_dir(state_dir, network, train_id) / f"step_{step:08d}.safetensors"


def _save(path: Path, tensors: dict[str, Tensor], metadata: dict[str, str]) -> None:
    atomic_write_bytes(path, save({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, metadata=metadata))


def load_weights(model: torch.nn.Module, path: Path, device: torch.device) -> None:
    state = {k.removeprefix("model."): v for k, v in load_file(str(path), device=str(device)).items()
             if k.startswith("model.")}
    model.load_state_dict(state)


def checkpoint_exists(path: Path, train_id: str) -> bool:
    if not path.is_file():
        return False
    try:
        with safe_open(str(path), "pt") as f:
            return (f.metadata() or {}).get("train_id") == train_id
    except Exception:  # a torn or foreign file
        return False


@dataclass
class Curves:
    train_loss: list[float]
    lr: list[float]
    val_loss: list[float]
    epoch_train_loss: list[float]
    epoch_lr: list[float]

    def tensors(self) -> dict[str, Tensor]:
        return {f"curves.{k}": torch.tensor(v, dtype=torch.float64) for k, v in vars(self).items()}

    @classmethod
    def from_tensors(cls, t: dict[str, Tensor]) -> Curves:
        return cls(**{k: t[f"curves.{k}"].tolist() for k in ("train_loss", "lr", "val_loss", "epoch_train_loss",
                                                              "epoch_lr")})


@dataclass
class Saved:
    """Yielded by :func:`train` after each scheduled checkpoint is on disk."""

    index: int
    step: int
    epoch: float
    path: Path
    curves: Curves
    resumed_from: int


class SGD:
    """Plain SGD, torch.optim.SGD's update (buf = momentum buf + g; p -= lr buf), without its
    first-call import of torch._dynamo (seconds per process); buffers are saved for resume."""

    def __init__(self, params: list[torch.nn.Parameter], momentum: float = 0.0):
        self.params, self.momentum = params, momentum
        self.buffers: list[Tensor | None] = [None] * len(params)

    @torch.no_grad()
    def step(self, lr: float) -> None:
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            g = p.grad
            if self.momentum:
                if self.buffers[i] is None:
                    self.buffers[i] = g.clone()
                else:
                    self.buffers[i].mul_(self.momentum).add_(g)
                g = self.buffers[i]
            p.add_(g, alpha=-lr)


@dataclass
class Finished:
    """Yielded last by :func:`train`: the whole run is done (also when it was already done)."""

    curves: Curves
    resumed_from: int
    steps_per_epoch: int


def evaluate(model, words: Tensor, tags: Tensor | None, bptt: int) -> float:
    """Mean token loss over a batchified stream (dropout off)."""
    model.eval()
    total, count = 0.0, 0
    hidden = model.init_hidden(words.shape[1])
    with torch.no_grad():
        for i in range(0, words.shape[0] - 1, bptt):
            x, y = get_batch(words, i, bptt)
            if tags is not None:
                t, nt = get_batch(tags, i, bptt)
                y = model.targets(t, nt)
            logits, hidden = model(x, hidden)
            n = int((y != -100).sum())
            total += float(model.loss(logits, y)) * n
            count += n
    return total / max(count, 1)


def own_steps(steps: list[int], spe: int, corpus: Corpus, net: NetworkSpec, training: TrainingSpec) -> list[int]:
    """The checkpoint steps of a network: the schedule's, which counts steps of the LM corpus; a tagger
    of another corpus (GMB, the longest documents) keeps checkpoint k at the same fraction of training
    (``round(step * spe / spe_lm)``), so epoch ends stay epoch ends."""
    if net.kind != "tagger" or corpus.tags[net.tagset].words is None:
        return list(steps)
    ref = steps_per_epoch(corpus.train.numel(), training)
    return [min(spe * training.epochs, round(s * spe / ref)) for s in steps] if ref != spe else list(steps)


def train(net: NetworkSpec, seed: int, training: TrainingSpec, corpus: Corpus, steps: list[int], train_id: str,
          ckpt_dir: Path, device: torch.device, progress: Callable[[int, int], None] | None = None,
          ) -> Iterator[Saved]:
    """Train (or resume) one network; yield after each scheduled checkpoint is saved."""
    train_stream, valid_stream = (corpus.tagger_streams(net.tagset) if net.kind == "tagger"
                                  else corpus.streams(net.corpus_variant))
    spe = steps_per_epoch(train_stream.numel(), training)
    total = spe * training.epochs
    schedule: dict[int, list[int]] = {}
    for k, s in enumerate(own_steps(steps, spe, corpus, net, training)):
        schedule.setdefault(s, []).append(k)
    words = batchify(train_stream, training.batch_size).to(device)
    val_words = batchify(valid_stream, training.eval_batch_size).to(device)
    tags = val_tags = None
    if net.kind == "tagger":
        train_tags = corpus.shuffled_train_tags(net.tagset, seed) if net.shuffled else corpus.tags[net.tagset].train
        tags = batchify(train_tags, training.batch_size).to(device)
        val_tags = batchify(corpus.tags[net.tagset].valid, training.eval_batch_size).to(device)
    model = build_model(net, training, corpus, seed, device)
    optimizer = SGD(list(model.parameters()), training.momentum)
    resume = ckpt_dir / "resume.safetensors"
    meta = _read_meta(resume)
    resumed = meta is not None and meta.get("train_id") == train_id
    epoch_loss, epoch_n = 0.0, 0
    if resumed:
        t = load_file(str(resume), device=str(device))
        load_weights(model, resume, device)
        for i in range(len(optimizer.params)):
            if f"optim.{i}" in t:
                optimizer.buffers[i] = t[f"optim.{i}"]
        torch.set_rng_state(t["rng.cpu"].cpu())
        if device.type == "cuda" and "rng.cuda" in t:
            torch.cuda.set_rng_state(t["rng.cuda"].cpu(), device)
        step, epoch, batch = int(meta["step"]), int(meta["epoch"]), int(meta["batch"])
        lr, best = float(meta["lr"]), float(meta["best_val"])
        epoch_loss, epoch_n = float(meta["epoch_loss"]), int(meta["epoch_n"])
        hidden = tuple((t[f"hidden.{k}.h"], t[f"hidden.{k}.c"]) for k in range(model.num_layers)) if batch else None
        curves = Curves.from_tensors(t)
        resumed_from = step
    else:
        torch.manual_seed(seed)  # dropout stream (build_model seeded the initial weights)
        step, epoch, batch, lr, best, hidden = 0, 0, 0, training.lr, math.inf, None
        curves = Curves([], [], [], [], [])
        resumed_from = 0

    def save(kind_step: int | None, done_epochs: int, next_batch: int) -> list[Saved]:
        tensors = {f"model.{k}": v for k, v in model.state_dict().items()}
        meta = {"train_id": train_id, "network": net.name, "step": str(step), "epoch": str(done_epochs),
                "batch": str(next_batch), "lr": repr(lr), "best_val": repr(best), "seed": str(seed),
                "epoch_loss": repr(epoch_loss), "epoch_n": str(epoch_n)}
        out = []
        if kind_step is not None:
            path = ckpt_dir / f"step_{step:08d}.safetensors"
            _save(path, tensors, {**meta, "kind": "checkpoint"})
            out = [Saved(k, step, step / spe, path, curves, resumed_from) for k in schedule[step]]
        state = dict(tensors)
        for i, buf in enumerate(optimizer.buffers):
            if buf is not None:
                state[f"optim.{i}"] = buf
        state["rng.cpu"] = torch.get_rng_state()
        if device.type == "cuda":
            state["rng.cuda"] = torch.cuda.get_rng_state(device)
        if next_batch and hidden is not None:
            for k, (h, c) in enumerate(hidden):
                state[f"hidden.{k}.h"], state[f"hidden.{k}.c"] = h, c
        state.update(curves.tensors())
        _save(resume, state, {**meta, "kind": "resume"})
        return out

    if resumed_from == 0 and not resumed and 0 in schedule:
        yield from save(0, 0, 0)
    while epoch < training.epochs:
        model.train()
        if batch == 0:
            hidden = model.init_hidden(training.batch_size)
            epoch_loss, epoch_n = 0.0, 0
        for b in range(batch, spe):
            x, y = get_batch(words, b * training.bptt, training.bptt)
            if tags is not None:
                t, nt = get_batch(tags, b * training.bptt, training.bptt)
                y = model.targets(t, nt)
            hidden = model.detach_hidden(hidden)
            model.zero_grad(set_to_none=True)
            logits, hidden = model(x, hidden)
            loss = model.loss(logits, y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), training.clip)
            optimizer.step(lr)
            step += 1
            value = loss.item()
            epoch_loss, epoch_n = epoch_loss + value, epoch_n + 1
            if step % training.log_every == 0:
                curves.train_loss.append(value)
                curves.lr.append(lr)
            if progress is not None:
                progress(step, total)
            interrupt.check()
            interrupt.stall_point(ckpt_dir, net.name, step)
            if step in schedule and b + 1 < spe:
                yield from save(step, epoch, b + 1)
        batch = 0
        epoch += 1
        val = evaluate(model, val_words, val_tags, training.bptt)
        curves.val_loss.append(val)
        curves.epoch_train_loss.append(epoch_loss / max(epoch_n, 1))
        curves.epoch_lr.append(lr)
        if val < best:
            best = val
        else:
            lr /= training.lr_decay
        yield from save(step if step in schedule else None, epoch, 0)
    yield Finished(curves, resumed_from, spe)


def _read_meta(path: Path) -> dict | None:
    if not path.is_file():
        return None
    try:
        with safe_open(str(path), "pt") as f:
            return dict(f.metadata() or {})
    except Exception:
        return None


def curves_json(curves: Curves) -> str:
    return json.dumps(vars(curves))
