"""Diagnostic classifiers per checkpoint and layer (Saphra 2021, Ch. 4 Figs. 6-7)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from analyses.diagnostic import train_diagnostic_classifier
from runner.plugin.measures import MeasureTags, register
from runner.plugin.timings import CheckpointMeasure
from runner.studies.training.measure import PAPER, STUDY, TrainingParams
from runner.studies.training.spec import LAYERS, Layer, TagSet

if TYPE_CHECKING:  # pragma: no cover
    from runner.studies.training.context import Context


class Params(TrainingParams):
    """Diagnostic classifiers (ReLU + softmax) per checkpoint and layer (Ch. 4 Figs. 6-7)."""

    kind: Literal["diagnostic"]
    tagsets: list[TagSet] = Field(default_factory=lambda: ["upos"])
    layers: list[Layer] = Field(default_factory=lambda: list(LAYERS))
    epochs: int = Field(30, ge=1)
    lr: float = Field(1e-3, gt=0)


@register
class Diagnostic(CheckpointMeasure):
    study = STUDY
    reference = PAPER
    Params = Params
    tags = MeasureTags("checkpoint", suites=True, networks="networks", layers="layers", tagsets="tagsets")

    def variables(self, b, shape) -> None:
        p = self.p
        b.coord("tagset", list(p.tagsets), long_name="tag set")
        b.coord("tag_target", ["current", "next"], long_name="tag of x_t or of x_{t+1}")
        dims = ("network", "checkpoint", "layer", "tagset", "tag_target")
        b.var("probe_accuracy", "diagnostic", dims, "float64", np.nan, "diagnostic classifier accuracy", "1",
              "held-out accuracy of softmax(W2 relu(W1 h + b1) + b2) predicting the tag (Ch. 4 Figs. 6-7)",
              epochs=p.epochs, lr=p.lr)
        b.var("probe_majority", "diagnostic", dims, "float64", np.nan, "majority-class accuracy", "1",
              "held-out accuracy of always predicting the most frequent tag (chance baseline)")

    def run(self, ctx: Context, task) -> None:
        p = self.p
        acts = ctx.activations(task.network, task.checkpoint)
        li = ctx.layer_index()
        out = np.full((2, len(li), len(p.tagsets), 2), np.nan)
        for k, tagset in enumerate(p.tagsets):
            n_classes = len(ctx.corpus.tags[tagset].vocab)
            for target, labels in enumerate(ctx.tag_labels(tagset)):
                for layer in p.layers:
                    r = train_diagnostic_classifier(acts[layer], labels, n_classes, epochs=p.epochs, lr=p.lr,
                                                    seed=ctx.seed)
                    out[0, li[layer], k, target] = float(r.accuracy)
                    out[1, li[layer], k, target] = float(r.majority_accuracy)
        ctx.write("probe_accuracy", task, out[0])
        ctx.write("probe_majority", task, out[1])
