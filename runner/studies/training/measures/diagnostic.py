"""Diagnostic classifiers per checkpoint and layer (Saphra 2021, Ch. 4 Figs. 6-7)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from analyses.diagnostic import against_majority, train_diagnostic_classifier, wilson_interval
from runner.core.layout import flags
from runner.plugin.measures import CheckpointTags, MeasureTags, Suites
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


#: The codes of ``probe_against_majority``, in order.
VERDICTS = ("above_majority", "cannot_tell_from_majority", "below_majority")


class Diagnostic(CheckpointMeasure, study=STUDY, reference=PAPER, params=Params,
                 tags=MeasureTags("checkpoint", checkpoint=CheckpointTags(suites=Suites(), networks="networks",
                                                                  layers="layers", tagsets="tagsets"))):
    version = 2  # 2: the held-out count, the accuracy's 95% interval and its verdict against the majority class

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
        b.var("probe_n", "diagnostic", dims, "float64", np.nan, "held-out tokens of the probe (tokens)", "1",
              "n: the held-out tokens probe_accuracy and probe_majority are counted on")
        for end in ("low", "high"):
            b.var(f"probe_accuracy_{end}", "diagnostic", dims, "float64", np.nan,
                  f"{end} end of the probe accuracy's 95% interval", "1",
                  "Wilson score interval (Wilson 1927) of probe_accuracy, a proportion of probe_n held-out tokens")
        b.var("probe_against_majority", "diagnostic", dims, "int8", -1, "probe against the majority class", None,
              "above_majority / below_majority: the 95% interval of probe_accuracy lies above / below probe_majority; "
              "cannot_tell_from_majority: it contains it (too few held-out tokens, or no better than the baseline)",
              **flags(*VERDICTS))

    def run(self, ctx: Context, task) -> None:
        p = self.p
        acts = ctx.activations(task.network, task.checkpoint)
        li = ctx.layer_index()
        out = np.full((3, len(li), len(p.tagsets), 2), np.nan)
        for k, tagset in enumerate(p.tagsets):
            n_classes = len(ctx.corpus.tags[tagset].vocab)
            for target, labels in enumerate(ctx.tag_labels(tagset)):
                for layer in p.layers:
                    r = train_diagnostic_classifier(acts[layer], labels, n_classes, epochs=p.epochs, lr=p.lr,
                                                    seed=ctx.seed)
                    out[0, li[layer], k, target] = float(r.accuracy)
                    out[1, li[layer], k, target] = float(r.majority_accuracy)
                    out[2, li[layer], k, target] = r.n_val
        accuracy, majority, n = out
        low, high = wilson_interval(np.round(accuracy * n), n)
        verdict = against_majority(low, high, majority)
        verdict[np.isnan(accuracy)] = -1  # layers not asked for
        for name, values in (("probe_accuracy", accuracy), ("probe_majority", majority), ("probe_n", n),
                             ("probe_accuracy_low", low), ("probe_accuracy_high", high),
                             ("probe_against_majority", verdict)):
            ctx.write(name, task, values)
