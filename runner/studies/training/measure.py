"""How a training-dynamics measure plugs in: it runs at checkpoints, on the analysis tokens.

A registration (:mod:`runner.measures`) subclasses :class:`CheckpointMeasure`: ``needs`` says
which checkpoints a task at checkpoint ``c`` reads (its own; the final one; another network's),
``variables`` declares what it writes (one ``(network, checkpoint)`` cell per task), and ``run``
computes it with the pure functions of :mod:`analyses` through a :class:`~.context.Context`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from runner.layout import LayoutBuilder
from runner.measures import Measure, MeasureParams

PAPER = "Saphra 2021, Training dynamics of neural language models (PhD thesis, Edinburgh), Ch. 4 and 6"


class TrainingParams(MeasureParams):
    networks: list[str] = Field(default_factory=list)
    """Networks measured (default: every language model)."""


@dataclass(frozen=True)
class Shape:
    """What the variables depend on besides the measure's parameters."""

    layers: list[str]
    """Measured layers: embedding, lstm1 .. lstmN, logits."""
    num_layers: int
    names: list[str]
    """Network labels."""
    corpus: Any
    """The training corpus (:class:`runner.data.corpus.Corpus`), for word coordinates."""
    variants: list[str | None] = field(default_factory=list)
    """Per network: the corpus variant it trains on (scaffold corpora), else None."""
    sentence: list[str] = field(default_factory=list)
    """Tokens of the analysis sentence (``runner.studies.training.context.analysis_sentence``)."""


class CheckpointMeasure(Measure):
    study = "training"
    when = "checkpoint"
    reference = PAPER
    suites = False
    """Whether it measures checkpoint suites too (it reads only ``ctx.activations`` and ``ctx.tag_labels``)."""

    def variables(self, b: LayoutBuilder, shape: Shape) -> None:
        raise NotImplementedError

    def needs(self, network: int, checkpoint: int, last: int, refs: list[int]) -> list[tuple[int, int]] | None:
        """The (network, checkpoint) pairs a task at ``checkpoint`` reads; None: no task there."""
        return [(network, checkpoint)]

    def run(self, ctx, task) -> None:
        raise NotImplementedError
