"""A checkpointed study added without touching the engine: a model builder, a loss and data, the
rest from the kit (runner.checkpointed). Least squares trained by full-batch gradient descent,
measured at each checkpoint by the distance of its weights to the solution.

Known answer: after k steps, w_k - w* = (I - (2 lr / n) X^T X)^k (w_0 - w*).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Literal, Protocol

import numpy as np
import torch
from pydantic import Field

from runner.checkpointed.axes import declare_axes, declare_checkpoint_path, declare_train_loss, write_curves
from runner.checkpointed.files import load_weights
from runner.checkpointed.loop import Trainable, train
from runner.checkpointed.schedule import checkpoint_resource, checkpoint_steps, train_task
from runner.checkpointed.session import CheckpointedSession
from runner.core.layout import LayoutBuilder, network_coords
from runner.plugin.measure_protocol import CheckpointContext
from runner.plugin.measures import MeasureParams, MeasureTags, declare, measures, params_union, register
from runner.plugin.timings import CheckpointMeasure
from runner.core.plan import Task, task_id
from runner.spec.specfile import StudySpec, Table
from runner.plugin.study import Prepared, Study, register as register_study


class Descent(Table):
    samples: int = Field(32, ge=2)
    features: int = Field(4, ge=1)
    lr: float = Field(0.05, gt=0)
    epochs: int = Field(3, ge=1)
    steps_per_epoch: int = Field(10, ge=1)


class WeightErrorParams(MeasureParams):
    """||w - w*|| of a checkpoint (known answer: the closed form of the module's docstring)."""
    kind: Literal["weight_error"]


class DescentContext(CheckpointContext, Protocol):  # and the network at a checkpoint, and w*
    solution: torch.Tensor
    def model(self, checkpoint: int) -> torch.nn.Linear: ...


@register
class WeightError(CheckpointMeasure):
    study, Params, tags = "descent", WeightErrorParams, MeasureTags("checkpoint")
    reference = "a known answer: w_k - w* = (I - 2 lr X^T X / n)^k (w_0 - w*)"

    def variables(self, b, shape) -> None:
        b.var("weight_error", "weight_error", ("network", "checkpoint"), "float64", np.nan, "distance to the solution", "1", "||w - w*||")

    def run(self, ctx: DescentContext, task) -> None:
        ctx.write("weight_error", task, float(torch.linalg.norm(ctx.model(task.checkpoint).weight[0] - ctx.solution)))


class DescentSpec(StudySpec):
    descent: Descent = Descent()
    measure: list[params_union("descent")] = Field(min_length=1)  # type: ignore[valid-type]


def problem(d: Descent, seed: int):
    """Data (X, y) and the least-squares solution w*."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(d.samples, d.features, generator=gen, dtype=torch.float64)
    y = x @ torch.randn(d.features, generator=gen, dtype=torch.float64) + 0.1 * torch.randn(d.samples, generator=gen, dtype=torch.float64)
    return x, y, torch.linalg.lstsq(x, y).solution


def build(d: Descent, seed: int) -> torch.nn.Linear:
    torch.manual_seed(seed)
    return torch.nn.Linear(d.features, 1, bias=False, dtype=torch.float64)


class Run(Trainable):
    """One full-batch gradient step per batch, mean squared error (the Trainable's defaults for the rest)."""

    curve_names = ("train_loss",)

    def __init__(self, d: Descent, seed: int):
        self.d, self.model, self.steps_per_epoch, self.epochs = d, build(d, seed), d.steps_per_epoch, d.epochs
        self.x, self.y, _ = problem(d, seed)

    def step(self, epoch, batch, step, curves):
        self.model.zero_grad()
        loss = ((self.model(self.x).squeeze(1) - self.y) ** 2).mean()
        loss.backward()
        self.model.weight.data -= self.d.lr * self.model.weight.grad
        curves.train_loss.append(loss.item())


@register_study
class DescentStudy(Study):
    name = "descent"
    description = "least squares by gradient descent (a toy checkpointed study of the engine's tests)"
    spec_factory = staticmethod(lambda: DescentSpec)
    table_models = {"descent": Descent}

    def prepare(self, spec, sf) -> Prepared:
        d, seed = spec.descent, spec.experiment.seed
        steps = checkpoint_steps(d.steps_per_epoch, d.epochs)
        trainer = train_task(0, {"descent": d.model_dump(), "seed": seed}, seed, len(steps), d.steps_per_epoch * d.epochs)
        tasks = [trainer] + [Task(task_id({"train": trainer.id, "checkpoint": c}), "weight_error", "weight_error", 0,
                                  "weight_error", deps=(trainer.id,), needs=(checkpoint_resource(0, c),), checkpoint=c)
                             for c in range(len(steps))]
        return Prepared(self, spec, sf, tasks, ["gd"], "cpu", state={"steps": steps, "train_id": trainer.id})

    def open(self, p, device, say):
        return DescentSession(p)


class DescentSession(CheckpointedSession):  # the kit drives it: scan, dispatch, training followed, writes
    def __init__(self, p: Prepared):
        super().__init__(p, torch.device("cpu"))
        d, self.steps, self.labels = p.spec.descent, p.state["steps"], ["gd"]
        b, self.names = LayoutBuilder(reference=WeightError.reference), self.labels  # names, write: a CheckpointContext
        network_coords(b, self.names, ["descent"], [0])
        declare_axes(b, self.steps, d.steps_per_epoch, d.epochs, ["weights"])
        declare_checkpoint_path(b, "the weights at each checkpoint")
        declare_train_loss(b, "1", "mean squared error of the full batch", overlay=None)
        for m in p.spec.measure:  # a CheckpointShape: names, layers, sentence
            declare(measures("descent")[m.kind](m), b, SimpleNamespace(names=self.names, layers=["weights"], sentence=[]))
        self.layout, self.solution = b.build(), problem(d, p.spec.experiment.seed)[2]

    def train_id(self, network):
        return self.p.state["train_id"]

    def checkpoint_files(self, network):
        return {c: (self.checkpoint_dir(self.store, 0) / f"step_{s:06d}.safetensors", s) for c, s in enumerate(self.steps)}

    def training(self, t, report):
        d, seed = self.p.spec.descent, self.p.spec.experiment.seed
        return train(Run(d, seed), seed, self.steps, t.id, "gd", self.checkpoint_dir(report.store, 0), self.device, report.progress)

    def write_curves(self, store, network, c):
        write_curves(store, network, {"train_loss": c.train_loss})

    def measure(self, group):
        (t,) = group
        measures("descent")[t.kind](next(m for m in self.p.spec.measure if m.kind == t.kind)).run(self, t)

    def model(self, checkpoint):  # with `solution`, what WeightError reads beside the CheckpointContext
        return load_weights(m := build(self.p.spec.descent, self.p.spec.experiment.seed), self.paths[(0, checkpoint)], "cpu") or m
