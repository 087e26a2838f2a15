"""The training task: the thesis' recipe, checkpoints as safetensors, exact resume.

Recipe (pytorch/examples ``word_language_model``, which the thesis matches): batchified streams,
truncated BPTT of ``bptt`` tokens with the hidden state carried (detached) across batches, SGD
with the gradient's l2 norm clipped, and after every epoch the validation loss decides the rate:
kept when it improved, divided by ``lr_decay`` (4: "quartered") when it did not.

The loop, its checkpoint files (``step_00000123.safetensors`` at each scheduled step, and
``resume.safetensors``) and the exact resume after a kill are the engine's
(:mod:`runner.checkpointed`); :class:`LSTMRun` is the recipe it runs: the batches, the step, the
epoch's evaluation and rate, and the state to resume (SGD buffers, the carried hidden state, the
rate, the best validation loss, the epoch's running loss).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from torch import Tensor

from models.registry import family_for
from runner.checkpointed import loop as checkpointed
from runner.checkpointed.loop import Finished, Saved
from runner.studies.training.data.tokens import batchify, get_batch
from runner.studies.training.data.corpus import Corpus
from runner.studies.training.spec import NetworkSpec, LSTMTraining


def build_model(net: NetworkSpec, training: LSTMTraining, corpus: Corpus, seed: int, device="cpu"):
    """The network of a spec entry, initialised from ``seed`` (the LSTM family of :mod:`models.registry`)."""
    sizes = dict(vocab_size=len(corpus.vocab), embedding_dim=training.embedding_dim, hidden_dim=training.hidden_dim,
                 dropout=training.dropout)
    if net.kind == "lm":
        params = dict(sizes, num_layers=training.num_layers)
    else:
        params = dict(sizes, n_tags=len(corpus.tags[net.tagset].vocab), mode=net.mode)
    return family_for(source_of(net)).build(source_of(net), params=params, seed=seed, device=device)


def source_of(net: NetworkSpec) -> str:
    """The model family's source of a trained network (:mod:`models.registry`)."""
    return "builtin:lstm-lm" if net.kind == "lm" else "builtin:lstm-tagger"


def steps_per_epoch(n_tokens: int, training: LSTMTraining) -> int:
    rows = n_tokens // training.batch_size
    return len(range(0, rows - 1, training.bptt))


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


def own_steps(steps: list[int], spe: int, corpus: Corpus, net: NetworkSpec, training: LSTMTraining) -> list[int]:
    """The checkpoint steps of a network: the schedule's, which counts steps of the LM corpus; a tagger
    of another corpus (GMB, the longest documents) keeps checkpoint k at the same fraction of training
    (``round(step * spe / spe_lm)``), so epoch ends stay epoch ends."""
    if net.kind != "tagger" or corpus.tags[net.tagset].words is None:
        return list(steps)
    ref = steps_per_epoch(corpus.train.numel(), training)
    return [min(spe * training.epochs, round(s * spe / ref)) for s in steps] if ref != spe else list(steps)


def checkpoint_name(index: int, step: int) -> str:
    return f"step_{step:08d}.safetensors"


class LSTMRun:
    """One network trained with the thesis' recipe, as a :class:`runner.checkpointed.loop.Trainable`."""

    curve_names = ("train_loss", "lr", "val_loss", "epoch_train_loss", "epoch_lr")
    checkpoint_name = staticmethod(checkpoint_name)

    def __init__(self, net: NetworkSpec, seed: int, training: LSTMTraining, corpus: Corpus, device: torch.device):
        self.training, self.epochs = training, training.epochs
        train_stream, valid_stream = (corpus.tagger_streams(net.tagset) if net.kind == "tagger"
                                      else corpus.streams(net.corpus_variant))
        self.steps_per_epoch = steps_per_epoch(train_stream.numel(), training)
        self.words = batchify(train_stream, training.batch_size).to(device)
        self.val_words = batchify(valid_stream, training.eval_batch_size).to(device)
        self.tags = self.val_tags = None
        if net.kind == "tagger":
            train_tags = corpus.shuffled_train_tags(net.tagset, seed) if net.shuffled else corpus.tags[net.tagset].train
            self.tags = batchify(train_tags, training.batch_size).to(device)
            self.val_tags = batchify(corpus.tags[net.tagset].valid, training.eval_batch_size).to(device)
        self.model = build_model(net, training, corpus, seed, device)
        self.optimizer = SGD(list(self.model.parameters()), training.momentum)
        self.seed, self.lr, self.best, self.hidden = seed, training.lr, math.inf, None
        self.epoch_loss, self.epoch_n = 0.0, 0

    def begin_epoch(self, epoch: int, batch: int) -> None:
        if batch == 0:
            self.hidden = self.model.init_hidden(self.training.batch_size)
            self.epoch_loss, self.epoch_n = 0.0, 0

    def step(self, epoch: int, batch: int, step: int, curves) -> None:
        tr, model = self.training, self.model
        x, y = get_batch(self.words, batch * tr.bptt, tr.bptt)
        if self.tags is not None:
            t, nt = get_batch(self.tags, batch * tr.bptt, tr.bptt)
            y = model.targets(t, nt)
        self.hidden = model.detach_hidden(self.hidden)
        model.zero_grad(set_to_none=True)
        logits, self.hidden = model(x, self.hidden)
        loss = model.loss(logits, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), tr.clip)
        self.optimizer.step(self.lr)
        value = loss.item()
        self.epoch_loss, self.epoch_n = self.epoch_loss + value, self.epoch_n + 1
        if step % tr.log_every == 0:
            curves.train_loss.append(value)
            curves.lr.append(self.lr)

    def end_epoch(self, epochs_done: int, curves) -> bool:
        val = evaluate(self.model, self.val_words, self.val_tags, self.training.bptt)
        curves.val_loss.append(val)
        curves.epoch_train_loss.append(self.epoch_loss / max(self.epoch_n, 1))
        curves.epoch_lr.append(self.lr)
        if val < self.best:
            self.best = val
        else:
            self.lr /= self.training.lr_decay
        return False

    def state(self, mid_epoch: bool) -> tuple[dict[str, Tensor], dict[str, str]]:
        tensors = {f"optim.{i}": buf for i, buf in enumerate(self.optimizer.buffers) if buf is not None}
        if mid_epoch and self.hidden is not None:
            for k, (h, c) in enumerate(self.hidden):
                tensors[f"hidden.{k}.h"], tensors[f"hidden.{k}.c"] = h, c
        return tensors, {"lr": repr(self.lr), "best_val": repr(self.best), "seed": str(self.seed),
                         "epoch_loss": repr(self.epoch_loss), "epoch_n": str(self.epoch_n)}

    def restore(self, t: dict[str, Tensor], meta: dict[str, str], mid_epoch: bool) -> None:
        for i in range(len(self.optimizer.params)):
            if f"optim.{i}" in t:
                self.optimizer.buffers[i] = t[f"optim.{i}"]
        self.lr, self.best = float(meta["lr"]), float(meta["best_val"])
        self.epoch_loss, self.epoch_n = float(meta["epoch_loss"]), int(meta["epoch_n"])
        if mid_epoch:
            self.hidden = tuple((t[f"hidden.{k}.h"], t[f"hidden.{k}.c"]) for k in range(self.model.num_layers))


def train(net: NetworkSpec, seed: int, training: LSTMTraining, corpus: Corpus, steps: list[int], train_id: str,
          ckpt_dir: Path, device: torch.device, progress: Callable[[int], None] | None = None,
          ) -> Iterator[Saved | Finished]:
    """Train (or resume) one network; yield after each scheduled checkpoint is saved, then Finished."""
    run = LSTMRun(net, seed, training, corpus, device)
    yield from checkpointed.train(run, seed, own_steps(steps, run.steps_per_epoch, corpus, net, training), train_id,
                                  net.name, ckpt_dir, device, progress)
