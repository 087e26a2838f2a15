"""Rule measures on the synthetic scaffold test sets (Saphra 2021, Ch. 5 paper Sec. 4.3, Figs. 7-10).

Each test case is ``context`` random tokens, then alpha q omega (:mod:`runner.studies.training.data.scaffold`); the
network reads it from a zero state, dropout off. Four registrations:

* ``rule_probability``: mean P(x_t = omega | x_<t) at omega's step (Fig. 7), in- and out-domain;
* ``rule_cd_probability``: mean softmax(v_beta)[omega] there with alpha, the scaffold, or both in
  focus (Fig. 8: alpha in focus, out-domain; Fig. 11: scaffold in focus);
* ``rule_cd_prefix``: the same with alpha and the first i scaffold words in focus, i = 0 .. k (Fig. 9);
* ``rule_interdependence``: mean DI(alpha, scaffold) at the last scaffold step, the step that predicts
  omega (Fig. 10: in-domain).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from analyses.contextual_decomposition import interdependence, lstm_weights
from analyses.rule_probability import cd_target_probability, target_probability
from runner.studies.training.data.scaffold import OMEGA, PAPER
from runner.plugin.measures import CheckpointTags, MeasureTags, hints
from runner.plugin.timings import CheckpointMeasure
from runner.studies.training.measure import STUDY, TrainingParams

if TYPE_CHECKING:  # pragma: no cover
    from runner.studies.training.context import Context

DOMAINS = ("in_domain", "out_domain")
Focus = Literal["alpha", "scaffold", "rule"]


class RuleParams(TrainingParams):
    cases: int | None = Field(None, ge=1)
    """Test cases used per domain (default: all of ``[corpus.scaffold] test_cases``)."""


def rule_cases(ctx, task, domain: str, limit: int | None):
    import torch  # lazy: torch

    variant = ctx.study.model[task.network].corpus_variant
    tests = ctx.corpus.variants[variant].tests[domain]
    inputs = torch.as_tensor(tests.inputs[:limit] if limit else tests.inputs, device=ctx.device)
    return inputs[:, : tests.omega], tests  # omega itself is never read


def domain_coord(b) -> str:
    return b.coord("test_domain", list(DOMAINS), long_name="test scaffolds: the training phrases (in) or random (out)")


def step_coord(b, shape, name: str, long_name: str) -> str:
    """A coordinate 0 .. k for the largest scaffold length k of the spec's corpora (a measure by the
    steps after alpha; entries beyond a network's own k stay NaN)."""
    lengths = [int(v.coords.get("scaffold_length", 0)) for v in getattr(shape.corpus, "variants", {}).values()]
    return b.coord(name, list(range(max(lengths, default=0) + 1)), long_name=long_name)


def by_domain_and_step(ctx, name: str) -> np.ndarray:
    """NaNs of one task's (test_domain, ``name``) cell, for a measure over steps after alpha."""
    return np.full((len(DOMAINS), len(ctx.layout.coords[name].values)), np.nan)


#: The tags of a rule measure: it needs networks trained on a scaffold corpus.
RULE_TAGS = MeasureTags("checkpoint", requires=("scaffold",), checkpoint=CheckpointTags(networks="networks"))


class ProbabilityParams(RuleParams):
    """Mean marginal probability of omega at its step in a rule (Ch. 5 Fig. 7)."""

    kind: Literal["rule_probability"]


class RuleProbability(CheckpointMeasure, study=STUDY, reference=PAPER, params=ProbabilityParams, tags=RULE_TAGS):
    def variables(self, b, shape) -> None:
        b.var("rule_target_probability", "rule_probability", ("network", "checkpoint", domain_coord(b)), "float64",
              np.nan, "marginal probability of the close symbol", "1",
              "mean over test rules alpha q omega of softmax(model logits at the last scaffold step)[omega] "
              "(Ch. 5 Fig. 7)", **hints(plot="curve", order=30))

    def run(self, ctx: Context, task) -> None:
        import torch  # lazy: torch

        model = ctx.model(task.network, task.checkpoint)
        out = []
        for domain in DOMAINS:
            x, tests = rule_cases(ctx, task, domain, self.p.cases)
            with torch.no_grad():
                logits, _ = model(x)
            out.append(float(target_probability(logits, tests.omega - 1, OMEGA).mean()))
        ctx.write("rule_target_probability", task, np.asarray(out))


class CDParams(RuleParams):
    """Mean probability of omega at its step from the words in focus alone, by CD (Ch. 5 Figs. 8, 11)."""

    kind: Literal["rule_cd_probability"]
    focus: list[Focus] = Field(default_factory=lambda: ["alpha", "scaffold"], min_length=1)
    """Words in focus: ``alpha`` (Fig. 8), ``scaffold`` (Fig. 11), ``rule`` (alpha and scaffold)."""


class RuleCDProbability(CheckpointMeasure, study=STUDY, reference=PAPER, params=CDParams, tags=RULE_TAGS):
    def variables(self, b, shape) -> None:
        b.coord("cd_focus", list(self.p.focus), long_name="words in focus of contextual decomposition")
        b.var("rule_cd_probability", "rule_cd_probability", ("network", "checkpoint", domain_coord(b), "cd_focus"),
              "float64", np.nan, "probability of the close symbol from the words in focus", "1",
              "mean over test rules of softmax(v_beta)[omega] at the last scaffold step, v_beta the relevant logits "
              "of contextual decomposition with cd_focus in focus (Ch. 5 Sec. 2.1, Figs. 8, 11)",
              **hints(plot="curve", order=31))

    def run(self, ctx: Context, task) -> None:
        import torch  # lazy: torch

        weights = lstm_weights(ctx.model(task.network, task.checkpoint))
        out = np.full((len(DOMAINS), len(self.p.focus)), np.nan)
        for d, domain in enumerate(DOMAINS):
            x, tests = rule_cases(ctx, task, domain, self.p.cases)
            for f, focus in enumerate(self.p.focus):
                mask = torch.zeros(x.shape, dtype=torch.bool)
                if focus in ("alpha", "rule"):
                    mask[:, tests.alpha] = True
                if focus in ("scaffold", "rule"):
                    mask[:, tests.scaffold] = True
                p = cd_target_probability(x, mask, tests.omega - 1, OMEGA, **weights)
                out[d, f] = float(p.mean())
        ctx.write("rule_cd_probability", task, out)


class PrefixParams(RuleParams):
    """Probability of omega at its step from alpha and the first i scaffold words, by CD (Ch. 5 Fig. 9)."""

    kind: Literal["rule_cd_prefix"]


class RuleCDPrefix(CheckpointMeasure, study=STUDY, reference=PAPER, params=PrefixParams, tags=RULE_TAGS):
    """Fig. 9: "the predicted P(x_t = omega | x_{t-k} ... x_{t-k+i}) according to CD, varying i ... with
    x_{t-k} = alpha": softmax(v_beta)[omega] at omega's step with the prefix alpha q_1 .. q_i in focus,
    i = 0 (alpha alone, Fig. 8's value) .. k (the whole rule). Entries beyond a network's k are NaN."""

    def variables(self, b, shape) -> None:
        steps = step_coord(b, shape, "prefix_length", "scaffold words after alpha in focus (i)")
        b.var("rule_cd_prefix_probability", "rule_cd_prefix", ("network", "checkpoint", domain_coord(b), steps),
              "float64", np.nan, "probability of the close symbol from alpha and the first i scaffold words", "1",
              "mean over test rules of softmax(v_beta)[omega] at the last scaffold step, v_beta the relevant logits "
              "of contextual decomposition with alpha q_1 .. q_i in focus (Ch. 5 Fig. 9)", **hints(plot="curve", order=33))

    def run(self, ctx: Context, task) -> None:
        import torch  # lazy: torch

        weights = lstm_weights(ctx.model(task.network, task.checkpoint))
        out = by_domain_and_step(ctx, "prefix_length")
        for d, domain in enumerate(DOMAINS):
            x, tests = rule_cases(ctx, task, domain, self.p.cases)
            for i in range(tests.k + 1):
                mask = torch.zeros(x.shape, dtype=torch.bool)
                mask[:, tests.alpha: tests.alpha + 1 + i] = True
                out[d, i] = float(cd_target_probability(x, mask, tests.omega - 1, OMEGA, **weights).mean())
        ctx.write("rule_cd_prefix_probability", task, out)


class DIParams(RuleParams):
    """Mean DI(alpha, scaffold) of the hidden state that predicts omega (Ch. 5 Fig. 10)."""

    kind: Literal["rule_interdependence"]
    at: Literal["hidden", "logits"] = "hidden"
    """DI of the top LSTM layer's hidden state (Eq. 2's h; default) or of the logits."""


class RuleInterdependence(CheckpointMeasure, study=STUDY, reference=PAPER, params=DIParams, tags=RULE_TAGS):
    def variables(self, b, shape) -> None:
        b.var("rule_di", "rule_interdependence", ("network", "checkpoint", domain_coord(b)), "float64", np.nan,
              "DI(alpha, scaffold)", "1",
              "mean over test rules of ||h_AuB - (h_A + h_B)|| / ||h_AuB|| at the last scaffold step, A = {alpha}, "
              "B = the scaffold, h_X the relevant part of contextual decomposition with X in focus (Ch. 5 Eq. 2, "
              "Fig. 10)", at=self.p.at, **hints(plot="curve", order=32))

    def run(self, ctx: Context, task) -> None:
        import torch  # lazy: torch

        weights = lstm_weights(ctx.model(task.network, task.checkpoint))
        out = []
        for domain in DOMAINS:
            x, tests = rule_cases(ctx, task, domain, self.p.cases)
            a = torch.zeros(x.shape, dtype=torch.bool)
            a[:, tests.alpha] = True
            b = torch.zeros(x.shape, dtype=torch.bool)
            b[:, tests.scaffold] = True
            res = interdependence(x, a, b, **weights)
            di = res.hidden[-1] if self.p.at == "hidden" else res.logits
            out.append(float(di[torch.isfinite(di)].mean()))
        ctx.write("rule_di", task, np.asarray(out))
