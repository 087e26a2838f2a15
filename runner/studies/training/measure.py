"""How a training-dynamics measure plugs in: it runs at checkpoints, on the analysis tokens.

A registration (:mod:`runner.plugin.measures`) subclasses :class:`CheckpointMeasure`: ``needs`` says
which checkpoints a task at checkpoint ``c`` reads (its own; the final one; another network's),
``variables`` declares what it writes (one ``(network, checkpoint)`` cell per task), and ``run``
computes it with the pure functions of :mod:`analyses` through a :class:`~.context.Context` (a
:class:`~runner.plugin.measure_protocol.CheckpointContext` with the training study's own data). Its tags'
``suites``: it measures checkpoint suites too (it reads only ``ctx.activations`` and ``ctx.tag_labels``);
``head``: it needs their LM head; ``causal``: a next-token loss.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import Field

from runner.checkpointed.measure import ActivationView, network_problems
from runner.plugin.measures import Measure, MeasureParams, MeasureTags
from runner.studies.training.spec import NEEDS

if TYPE_CHECKING:  # pragma: no cover
    from runner.studies.training.context import Context

PAPER = "Saphra 2021, Training dynamics of neural language models (PhD thesis, Edinburgh), Ch. 4 and 6"


class TrainingParams(MeasureParams):
    networks: list[str] = Field(default_factory=list)
    """Networks measured (default: every language model)."""


@dataclass(frozen=True)
class TrainingShape:
    """What the variables depend on besides the measure's parameters."""

    layers: list[str]
    """Measured layers: embedding, lstm1 .. lstmN, logits."""
    num_layers: int
    names: list[str]
    """Network labels."""
    corpus: Any
    """The training corpus (:class:`runner.studies.training.data.corpus.Corpus`), for word coordinates."""
    variants: list[str | None] = field(default_factory=list)
    """Per network: the corpus variant it trains on (scaffold corpora), else None."""
    sentence: list[str] = field(default_factory=list)
    """Tokens of the analysis sentence (``runner.studies.training.context.analysis_sentence``)."""


class CheckpointMeasure(Measure):
    study = "training"
    tags = MeasureTags("checkpoint", networks="networks")
    reference = PAPER

    @classmethod
    def tag_problems(cls) -> list[str]:
        unknown = [r for r in cls.tags.requires if r not in NEEDS]
        return [f"requires {unknown}: the training study knows {', '.join(NEEDS)}"] if unknown else []

    def problems(self, view: ActivationView) -> list[tuple[tuple, str]]:
        return network_problems(self, view)

    def needs(self, network: int, checkpoint: int, last: int, refs: list[int]) -> list[tuple[int, int]] | None:
        """The (network, checkpoint) pairs a task at ``checkpoint`` reads; None: no task there."""
        return [(network, checkpoint)]

    @abstractmethod
    def run(self, ctx: Context, task) -> None:
        raise NotImplementedError
