"""What the training study gives its measures: they run at checkpoints, on the analysis tokens.

A registration (:mod:`runner.plugin.measures`) subclasses the engine's
:class:`~runner.plugin.timings.CheckpointMeasure` with ``study = STUDY``: ``needs`` says which
checkpoints a task at checkpoint ``c`` reads (its own; the final one; another network's),
``variables`` declares what it writes (one ``(network, checkpoint)`` cell per task), and ``run``
computes it with the pure functions of :mod:`analyses` through a :class:`~.context.Context` (a
:class:`~runner.plugin.measure_protocol.CheckpointContext` with the training study's own data). Its tags'
``suites``: it measures checkpoint suites too (it reads only ``ctx.activations`` and ``ctx.tag_labels``);
``head``: it needs their LM head; ``causal``: a next-token loss; ``requires``: words of :data:`NEEDS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

import runner.checkpointed.measures  # noqa: F401 - registers the kit's measures, which this study takes
from runner.checkpointed.measure import KIT
from runner.plugin.measures import CheckpointTags, MeasureParams, MeasureTags, takes, vocabulary
from runner.studies.training.spec import LAYERS, NEEDS, Layer

STUDY = "training"
vocabulary(STUDY, NEEDS)
takes(STUDY, KIT, roles={"layers": (list[Layer], LAYERS)})
#: The tags of a measure of language models' checkpoints that reads nothing else.
TAGS = MeasureTags("checkpoint", checkpoint=CheckpointTags(networks="networks"))
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
