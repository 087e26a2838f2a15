"""A checkpointed study of two networks on a device, added without touching the engine: the kit
(runner.checkpointed.simple) plans, trains, checkpoints, resumes and measures each of them.

Two next-token models that differ only in their nonlinearity (``tanh`` and ``relu``: embedding, a hidden
layer, the nonlinearity, logits), trained by gradient descent with momentum (its velocity kept in the
resume file) on a made-up counting task: each token is the one before plus a step of 1, 2 or 3 (mod the
vocabulary), the steps drawn with fixed odds.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Literal

import torch
from pydantic import Field
from torch.nn import functional as F

from models.activations import tokens
from runner.checkpointed.loop import Trainable
from runner.checkpointed.simple import Analysis, Network, SimpleStudy
from runner.core.device import DeviceName
from runner.plugin.study import register
from runner.spec.specfile import Table

Nonlinearity = Literal["tanh", "relu"]


class Counting(Table):
    nonlinearities: list[Nonlinearity] = Field(["tanh", "relu"], min_length=1)
    """One network per entry, each labelled by its nonlinearity."""
    vocab: int = Field(10, ge=4)
    width: int = Field(12, ge=4)
    length: int = Field(240, ge=16)
    lr: float = Field(0.3, gt=0)
    momentum: float = Field(0.9, ge=0, lt=1)
    epochs: int = Field(3, ge=1)
    steps_per_epoch: int = Field(8, ge=1)
    sentence: int = Field(8, ge=2)
    """Tokens of the analysis sentence (the stream's first)."""
    device: DeviceName = "cpu"


class Net(Counting):
    """The settings of one network: the study's, and its nonlinearity."""

    nonlinearity: Nonlinearity


def stream(c: Net, seed: int) -> torch.Tensor:
    """``length`` tokens, each the last plus 1, 2 or 3 (odds 6:3:1), mod ``vocab``."""
    gen = torch.Generator().manual_seed(seed)
    moves = 1 + torch.multinomial(torch.tensor([6.0, 3.0, 1.0]), c.length - 1, replacement=True, generator=gen)
    return torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(moves, 0)]) % c.vocab


class Run(Trainable):
    """Full-batch gradient descent with momentum on the next-token cross-entropy."""

    curve_names = ("train_loss",)

    def __init__(self, model: torch.nn.Module, c: Net, seed: int):
        self.model, self.lr, self.momentum, self.x = model, c.lr, c.momentum, stream(c, seed)
        self.epochs, self.steps_per_epoch = c.epochs, c.steps_per_epoch
        self.velocity = [torch.zeros_like(w) for w in model.parameters()]

    def step(self, epoch, batch, step, curves):
        self.model.zero_grad()
        loss = F.cross_entropy(self.model(self.x[None, :-1])[0], self.x[1:])
        loss.backward()
        for w, v in zip(self.model.parameters(), self.velocity):
            v.mul_(self.momentum).add_(w.grad)
            w.data -= self.lr * v
        curves.train_loss.append(loss.item())

    def state(self, mid_epoch):
        return {f"velocity.{i}": v for i, v in enumerate(self.velocity)}, {}

    def restore(self, tensors, meta, mid_epoch):
        self.velocity = [tensors[f"velocity.{i}"] for i in range(len(self.velocity))]


@register
class CountingStudy(SimpleStudy):
    """next-token prediction of a made-up counting task by a tanh and a relu network (a toy study of two
    networks of the engine's tests)"""

    name, table = "counting", Counting

    def networks(self, c: Counting, seed: int) -> list[Network]:
        return [Network(f, seed, Net(**c.model_dump(), nonlinearity=f)) for f in c.nonlinearities]

    def build(self, c: Net, seed: int) -> torch.nn.Module:
        torch.manual_seed(seed)
        act = torch.nn.Tanh() if c.nonlinearity == "tanh" else torch.nn.ReLU()
        return torch.nn.Sequential(OrderedDict(embedding=torch.nn.Embedding(c.vocab, c.width),
                                               hidden=torch.nn.Linear(c.width, c.width), act=act,
                                               logits=torch.nn.Linear(c.width, c.vocab)))

    def trainable(self, c: Net, seed: int) -> Run:
        return Run(self.build(c, seed), c, seed)

    def analysis(self, c: Net, seed: int) -> Analysis:
        x = stream(c, seed)
        return Analysis((tokens(x[None]),), tokens(x[None, :c.sentence]), tuple(f"w{int(i)}" for i in x[:c.sentence]))
