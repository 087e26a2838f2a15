"""What every study with checkpoints gives a checkpoint measure that reads activations only.

Such a measure is a :class:`~runner.plugin.timings.CheckpointMeasure` with :data:`ACTIVATION_TAGS`,
whose ``run(ctx, task)`` reads only the :class:`ActivationContext` (activations from the models'
adapters, :mod:`models.activations`) and whose ``variables(builder, shape)`` reads only
``shape.layers`` (the store's ``layer`` axis), ``shape.names`` (network labels) and ``shape.sentence``
(the analysis sentence's tokens); its ``problems`` read the :class:`ActivationView`. It is registered
under :data:`KIT`, and every study that takes the kit (``runner.plugin.measures.takes``) offers it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pydantic import Field

from runner.plugin.measure_protocol import CheckpointContext
from runner.plugin.measures import CheckpointTags, MeasureParams, MeasureTags, Suites

if TYPE_CHECKING:
    from torch import Tensor

#: The measures on activations only are registered under this name; a study offers them by taking it
#: (``runner.plugin.measures.takes``).
KIT = "checkpointed"
#: Quantiles over tokens that the kit's measures store.
QUANTILES = (0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0)
#: The tags of a checkpoint measure on activations only: it measures checkpoint suites too (a
#: suite's context gives word activations).
ACTIVATION_TAGS = MeasureTags("checkpoint", checkpoint=CheckpointTags(suites=Suites(), networks="networks"))


class ActivationParams(MeasureParams):
    """Base of the ``[[measure]]`` table of a measure on activations only."""

    networks: list[str] = Field(default_factory=list)
    """``[[model]]`` names measured (default: those the study measures by default)."""

    def params(self) -> dict:
        out = super().params()
        if not out["networks"]:  # left out when unnamed, so task ids made before the field existed stay
            del out["networks"]
        return out


@dataclass(frozen=True)
class ActivationView:
    """What a study with checkpoints shows its measures of a spec (``Measure.problems(view)``), in words
    every such study shares. Asked when the spec is checked, and again when the run knows the analysis
    sentence (:meth:`knowing`)."""

    networks: tuple[str, ...]
    """The ``[[model]]`` names a measure may name."""
    kinds: tuple[tuple[str, str], ...] = ()
    """(network, kind) of each ``[[model]]``: ``lm`` (trained to predict the next token, or a published
    checkpoint of one), ``tagger`` (trained to tag), else its study's own word."""
    token_widths: tuple[tuple[str, int], ...] = ()
    """(what, components) of each trained network's narrowest token representation: the samples a
    per-token estimate has (a k-nearest-neighbour estimate needs k < N)."""
    layers: tuple[str, ...] | None = None
    """The layer names its networks have, when the spec tells (None: the study checks layer names)."""
    references: bool = True
    """Networks may be compared with reference networks of other seeds or kinds; False: a network only
    with itself (its final checkpoint, its layers)."""
    sentence: tuple[str, ...] | None = None
    """The analysis sentence's tokens, or None while only the run knows them (read from its data)."""
    closed_tokens: tuple[str, ...] | None = None
    """Every token the analysis data can hold (a generated source), else None."""
    source: str = ""
    """The data source's name, for messages."""

    def knowing(self, sentence) -> ActivationView:
        """This view once the run has the analysis sentence."""
        return dataclasses.replace(self, sentence=tuple(sentence))


class ActivationContext(CheckpointContext, Protocol):
    """What a study gives a measure on activations only at one (network, checkpoint) task, beyond
    ``names`` and ``write`` (:class:`~runner.plugin.measure_protocol.CheckpointContext`)."""

    def activations(self, network: int, checkpoint: int) -> dict[str, Tensor]:
        """Each layer's activations of the analysis tokens at a checkpoint, ``{layer: (tokens, dim)}`` (the
        tokens in the same order at every checkpoint and for every network of a study)."""

    sentence_tokens: list[str]
    """The analysis sentence's tokens (``shape.sentence``)."""

    def sentence_activations(self, network: int, checkpoint: int) -> dict[str, Tensor]:
        """Each layer's activations of the analysis sentence's tokens, ``{layer: (seq, dim)}``."""

    def final(self, network: int) -> int:
        """The network's last checkpoint with weights (an early stop ends before the last epoch)."""

    def layer_index(self) -> dict[str, int]:
        """The store's ``layer`` coordinate: position of each layer name."""

    def reference_layer(self, network: int) -> str:
        """The layer of a reference ``network`` that other networks' layers are compared with (a
        tagger's representation)."""
