"""``rule_gradient``: the error gradient carried back from omega through the scaffold, by distance
(Saphra 2021, Ch. 5 paper, Appendix C, Fig. 12; :mod:`analyses.rule_gradient`).

On each scaffold test set (:mod:`.scaffold`), the mean over test rules alpha q omega of
||d e_omega / d h_{alpha+d}||, d = 0 (alpha's step) .. k (the step that predicts omega), h the top
LSTM layer's hidden state. Entries beyond a network's k are NaN.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np

from analyses.contextual_decomposition import lstm_weights
from analyses.rule_gradient import gradient_by_distance
from runner.plugin.timings import CheckpointMeasure
from runner.studies.training.data.scaffold import OMEGA, PAPER
from runner.studies.training.measure import STUDY
from runner.plugin.measures import hints
from runner.studies.training.measures.scaffold import (
    DOMAINS,
    RULE_TAGS,
    RuleParams,
    by_domain_and_step,
    domain_coord,
    rule_cases,
    step_coord,
)

if TYPE_CHECKING:  # pragma: no cover
    from runner.studies.training.context import Context


class GradientParams(RuleParams):
    """Mean magnitude of the error gradient at omega with respect to the hidden state d steps after
    alpha, d = 0 .. k (Ch. 5 App. C, Fig. 12)."""

    kind: Literal["rule_gradient"]


class RuleGradient(CheckpointMeasure, study=STUDY, reference=PAPER, params=GradientParams, tags=RULE_TAGS):
    def variables(self, b, shape) -> None:
        steps = step_coord(b, shape, "gradient_distance", "steps d from alpha to the hidden state the gradient is taken at")
        b.var("rule_gradient_norm", "rule_gradient", ("network", "checkpoint", domain_coord(b), steps),
              "float64", np.nan, "magnitude of the error gradient at omega, by distance from alpha (nats)", "1",
              "mean over test rules alpha q omega of ||d e / d h_{alpha+d}||, e = -log P(omega) at its step, h the "
              "top LSTM layer's hidden state (dimensionless), d = 0 .. k (Ch. 5 App. C, Fig. 12)",
              **hints(plot="curve", order=34))

    def run(self, ctx: Context, task) -> None:
        weights = lstm_weights(ctx.model(task.network, task.checkpoint))
        out = by_domain_and_step(ctx, "gradient_distance")
        for d, domain in enumerate(DOMAINS):
            x, tests = rule_cases(ctx, task, domain, self.p.cases)
            norms = gradient_by_distance(x, tests.alpha, tests.omega - 1, OMEGA, **weights)
            out[d, : tests.k + 1] = norms.mean(dim=0).cpu().numpy()
        ctx.write("rule_gradient_norm", task, out)
