"""A checkpoint measure that reads activations only, so that every study with checkpoints can run it.

A registration subclasses its own study's measure base class and :class:`ActivationMeasure`, and names
the other studies whose specs may use it in ``also`` (``runner.plugin.measures.register`` registers it under
each; ``docs/extending.md`` names the built-in ones). Its ``run(ctx, task)`` reads the
:class:`ActivationContext` that each of those studies gives its measures, whose activations come from
the models' adapters (:mod:`models.activations`); ``variables(builder, shape)`` reads ``shape.layers``
(the store's ``layer`` axis), ``shape.names`` (network labels) and ``shape.sentence`` (the analysis
sentence's tokens) only.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Protocol

from pydantic import Field
from torch import Tensor

from runner.plugin.measure_protocol import CheckpointContext
from runner.plugin.measures import Measure, MeasureParams, MeasureTags


class ActivationParams(MeasureParams):
    """Base of the ``[[measure]]`` table of an :class:`ActivationMeasure`."""

    networks: list[str] = Field(default_factory=list)
    """``[[model]]`` names measured (default: those the study measures by default)."""

    def params(self) -> dict:
        out = super().params()
        if not out["networks"]:  # left out when unnamed, so task ids made before the field existed stay
            del out["networks"]
        return out


class ActivationContext(CheckpointContext, Protocol):
    """What a study gives an :class:`ActivationMeasure` at one (network, checkpoint) task, beyond
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


class ActivationMeasure(Measure):
    """Base of a checkpoint measure on activations alone (see the module docstring)."""

    tags = MeasureTags("checkpoint", suites=True)
    """It measures checkpoint suites too (a suite's context gives word activations)."""

    def needs(self, network: int, checkpoint: int, last: int, refs: list[int]) -> list[tuple[int, int]] | None:
        """The (network, checkpoint) pairs a task at ``checkpoint`` reads; None: no task there."""
        return [(network, checkpoint)]

    def spec_problems(self, spec) -> list[tuple[tuple, str]]:
        """What the spec's other tables make impossible (``(key path in the measure's table, message)``)."""
        names = [m.name for m in spec.model]
        unknown = [x for x in getattr(self.p, "networks", []) if x not in names]
        return [(("networks",), f"no [[model]] named {unknown}; the spec has {names}")] if unknown else []

    def sentence_problems(self, sentence: list[str]) -> list[tuple[tuple, str]]:
        return []

    @abstractmethod
    def run(self, ctx: ActivationContext, task) -> None:
        raise NotImplementedError
