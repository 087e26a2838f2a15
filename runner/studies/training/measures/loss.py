"""The language model's loss on the analysis text at each checkpoint: the learning curve of a trained network
or of a published suite on one declared text.

L = -(1/T) sum_t log p(x_t | x_<t), nats per token: the quantity whose exponential is the perplexity of
Saphra 2021, Ch. 4 Fig. 2 (there on the validation split after each epoch); for a masked LM, the masked
tokens' -log p(x_t | x_masked) (Devlin et al. 2019, BERT, Sec. 3.1, 15% of the tokens)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from runner.plugin.measures import CheckpointTags, MeasureTags, Suites, hints
from runner.plugin.timings import CheckpointMeasure
from runner.studies.training.measure import PAPER, STUDY, TrainingParams

if TYPE_CHECKING:  # pragma: no cover
    from runner.studies.training.context import Context


class Params(TrainingParams):
    """Mean token cross-entropy of each language model on the analysis text, at every checkpoint."""

    kind: Literal["loss"]
    mask_fraction: float = Field(0.15, gt=0, lt=1)
    """Masked-LM suites (BERT): the fraction of tokens masked and predicted (Devlin et al. 2019, Sec. 3.1: 15%;
    the positions are drawn once per window from the experiment seed, the same at every checkpoint)."""


# head: it reads a suite's language-modelling head
class Loss(CheckpointMeasure, study=STUDY, reference=PAPER, params=Params,
           tags=MeasureTags("checkpoint", checkpoint=CheckpointTags(suites=Suites(head=True), networks="networks"))):
    def variables(self, b, shape) -> None:
        b.var("analysis_loss", "loss", ("network", "checkpoint"), "float64", np.nan,
              "loss on the analysis text (nats per token)", "1",
              "mean cross entropy -log p(x_t | context) over the analysis tokens: the next word (LSTM) or next "
              "token (causal suite), or the masked tokens (masked suite)", mask_fraction=self.p.mask_fraction,
              **hints(plot="curve", order=5, headline=("final analysis loss", "last")))

    def run(self, ctx: Context, task) -> None:
        from runner.studies.training.train import evaluate  # lazy: torch

        if hasattr(ctx, "suites"):
            total, n = ctx.lm_loss(task.network, task.checkpoint, self.p.mask_fraction)
            value = total / max(n, 1)
        else:
            value = evaluate(ctx.model(task.network, task.checkpoint), ctx.words, None, ctx.bptt)
        ctx.write("analysis_loss", task, np.asarray(value))
