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

import dataclasses
from abc import abstractmethod
from dataclasses import dataclass
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


@dataclass(frozen=True)
class ActivationView:
    """What a study with checkpoints shows its measures of a spec (``Measure.problems(view)``), in words
    every such study shares. Asked when the spec is checked, and again when the run knows the analysis
    sentence (:meth:`knowing`)."""

    networks: tuple[str, ...]
    """The ``[[model]]`` names a measure may name."""
    kinds: tuple[tuple[str, str], ...] = ()
    """(network, kind) of each ``[[model]]``, in its study's words (a language model, a tagger, ...)."""
    token_widths: tuple[tuple[str, int], ...] = ()
    """(what, components) of each trained network's narrowest token representation: the samples a
    per-token estimate has (a k-nearest-neighbour estimate needs k < N)."""
    layers: tuple[str, ...] | None = None
    """The layer names its networks have, when the spec tells (None: the study checks layer names)."""
    layers_required: bool = False
    """A measure with ``layers`` must name them (its default names another architecture's)."""
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


def network_problems(measure: Measure, view: ActivationView) -> list[tuple[tuple, str]]:
    """The networks and reference networks a checkpoint measure's table names (its tags say where)
    that the spec lacks."""
    names = list(view.networks)
    out = []
    for role in ("networks", "references"):
        unknown = [x for x in measure.tags.named(measure.p, role) if x not in names]
        if unknown:
            out.append(((getattr(measure.tags, role),), f"no [[model]] named {unknown}; the spec has {names}"))
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

    tags = MeasureTags("checkpoint", suites=True, networks="networks")
    """It measures checkpoint suites too (a suite's context gives word activations)."""

    def needs(self, network: int, checkpoint: int, last: int, refs: list[int]) -> list[tuple[int, int]] | None:
        """The (network, checkpoint) pairs a task at ``checkpoint`` reads; None: no task there."""
        return [(network, checkpoint)]

    def problems(self, view: ActivationView) -> list[tuple[tuple, str]]:
        """Networks it names that the spec lacks (a measure adds its own on the same view)."""
        return network_problems(self, view)

    @abstractmethod
    def run(self, ctx: ActivationContext, task) -> None:
        raise NotImplementedError
