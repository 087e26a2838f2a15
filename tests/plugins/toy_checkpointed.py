"""A checkpointed study added without touching the engine: a model, its loss and its data. The kit
(runner.checkpointed.simple) plans, trains, checkpoints, resumes and measures it; SVCCA, entropy and layer
distances across its checkpoints come from the kit's measures, read at the hook points of the model's
named children (models.activations.ModuleActivations).

A next-token model (embedding, a tanh layer, logits) trained by full-batch gradient descent on a token
stream drawn from a random Markov chain.
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from pydantic import Field
from torch.nn import functional as F

from models.activations import tokens
from runner.checkpointed.loop import Trainable
from runner.checkpointed.simple import Analysis, SimpleStudy
from runner.plugin.study import register
from runner.spec.specfile import Table


class Chain(Table):
    vocab: int = Field(12, ge=2)
    width: int = Field(8, ge=4)
    length: int = Field(200, ge=16)
    lr: float = Field(0.5, gt=0)
    epochs: int = Field(3, ge=1)
    steps_per_epoch: int = Field(10, ge=1)
    sentence: int = Field(10, ge=2)
    """Tokens of the analysis sentence (the stream's first)."""


def stream(c: Chain, seed: int) -> torch.Tensor:
    """``length`` tokens of a Markov chain with random (seeded) transition probabilities."""
    gen = torch.Generator().manual_seed(seed)
    moves = torch.softmax(3 * torch.randn(c.vocab, c.vocab, generator=gen), 1)
    x = [0]
    for _ in range(c.length - 1):
        x.append(int(torch.multinomial(moves[x[-1]], 1, generator=gen)))
    return torch.tensor(x)


class Run(Trainable):
    """One full-batch gradient step per batch on the next-token cross-entropy."""

    curve_names = ("train_loss",)

    def __init__(self, model: torch.nn.Module, c: Chain, seed: int):
        self.model, self.lr, self.x = model, c.lr, stream(c, seed)
        self.epochs, self.steps_per_epoch = c.epochs, c.steps_per_epoch

    def step(self, epoch, batch, step, curves):
        self.model.zero_grad()
        loss = F.cross_entropy(self.model(self.x[None, :-1])[0], self.x[1:])
        loss.backward()
        for w in self.model.parameters():
            w.data -= self.lr * w.grad
        curves.train_loss.append(loss.item())


@register
class ChainStudy(SimpleStudy):
    """next-token prediction on a Markov chain (a toy checkpointed study of the engine's tests)"""

    name, table = "chain", Chain

    def build(self, c: Chain, seed: int) -> torch.nn.Module:
        torch.manual_seed(seed)
        return torch.nn.Sequential(OrderedDict(embedding=torch.nn.Embedding(c.vocab, c.width),
                                               hidden=torch.nn.Linear(c.width, c.width), act=torch.nn.Tanh(),
                                               logits=torch.nn.Linear(c.width, c.vocab)))

    def trainable(self, c: Chain, seed: int) -> Run:
        return Run(self.build(c, seed), c, seed)

    def analysis(self, c: Chain, seed: int) -> Analysis:
        x = stream(c, seed)
        return Analysis((tokens(x[None]),), tokens(x[None, :c.sentence]), tuple(f"w{int(i)}" for i in x[:c.sentence]))
