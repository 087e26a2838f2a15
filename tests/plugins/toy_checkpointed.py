"""A checkpointed study added without touching the engine: a model builder, a loss and data, the
rest from the kit (runner.checkpointed). Least squares trained by full-batch gradient descent,
measured at each checkpoint by the distance of its weights to the solution.

Known answer: after k steps, w_k - w* = (I - (2 lr / n) X^T X)^k (w_0 - w*).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from pydantic import Field

from runner.checkpointed.axes import declare_axes, declare_checkpoint_path, declare_train_loss, write_curves
from runner.checkpointed.files import load_weights
from runner.checkpointed.loop import train
from runner.checkpointed.schedule import checkpoint_resource, checkpoint_steps, train_task
from runner.checkpointed.session import Checkpoints, write_cell
from runner.layout import LayoutBuilder, network_coords
from runner.measures import Measure, MeasureParams, params_union, register
from runner.plan import Task, task_id
from runner.specfile import StudySpec, Table
from runner.study import Prepared, Study
from runner.study import register as register_study


class Descent(Table):
    samples: int = Field(32, ge=2)
    features: int = Field(4, ge=1)
    lr: float = Field(0.05, gt=0)
    epochs: int = Field(3, ge=1)
    steps_per_epoch: int = Field(10, ge=1)


class WeightErrorParams(MeasureParams):
    """||w - w*|| of a checkpoint (known answer: the closed form of the module's docstring)."""

    kind: Literal["weight_error"]


@register
class WeightError(Measure):
    study, when, Params = "descent", "checkpoint", WeightErrorParams


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


class Run:
    """The Trainable: one full-batch gradient step per batch, mean squared error."""

    curve_names = ("train_loss",)

    def __init__(self, d: Descent, seed: int):
        self.d, self.model, self.steps_per_epoch, self.epochs = d, build(d, seed), d.steps_per_epoch, d.epochs
        self.x, self.y, _ = problem(d, seed)

    def checkpoint_name(self, index, step):
        return f"step_{step:06d}.safetensors"

    def begin_epoch(self, epoch, batch):
        pass

    def step(self, epoch, batch, step, curves):
        self.model.zero_grad()
        loss = ((self.model(self.x).squeeze(1) - self.y) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            self.model.weight -= self.d.lr * self.model.weight.grad
        curves.train_loss.append(loss.item())

    def end_epoch(self, epochs_done, curves):
        return False  # no early stop

    def state(self, mid_epoch):
        return {}, {}  # plain gradient descent: nothing beyond the weights

    def restore(self, tensors, meta, mid_epoch):
        pass


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


class DescentSession:
    def __init__(self, p: Prepared):
        self.p, d, self.steps = p, p.spec.descent, p.state["steps"]
        b = LayoutBuilder(reference="a known answer: w_k - w* = (I - 2 lr X^T X / n)^k (w_0 - w*)")
        network_coords(b, ["gd"], ["descent"], [0])
        declare_axes(b, self.steps, d.steps_per_epoch, d.epochs, ["weights"])
        declare_checkpoint_path(b, "the weights at each checkpoint")
        declare_train_loss(b, "1", "mean squared error of the full batch", overlay=None)
        b.var("weight_error", "weight_error", ("network", "checkpoint"), "float64", np.nan, "distance to the solution",
              "1", "||w - w*||")
        self.layout, self.ckpts = b.build(), Checkpoints(p.store_path)

    def write_inputs(self, store):
        self.dir = store.state_dir / "checkpoints" / self.p.state["train_id"]
        files = {c: self.dir / f"step_{s:06d}.safetensors" for c, s in enumerate(self.steps)}
        self.ckpts.scan(0, files, self.p.state["train_id"])

    def available(self):
        return self.ckpts.available()

    def run(self, group, report):
        (t,) = group
        d, seed = self.p.spec.descent, self.p.spec.experiment.seed
        if t.kind == "train":
            items = train(Run(d, seed), seed, self.steps, t.id, "gd", self.dir, torch.device("cpu"), report.progress)
            done = self.ckpts.follow(items, 0, report, lambda c: write_curves(report.store, 0, {"train_loss": c.train_loss}))
            return {"resumed_from": done.resumed_from} if done else {}
        model = build(d, seed)
        load_weights(model, self.ckpts.paths[(0, t.checkpoint)], torch.device("cpu"))
        write_cell(report.store, "weight_error", t, float(torch.linalg.norm(model.weight[0] - problem(d, seed)[2])))
        return {}
