"""What the depth study gives its measures: their contexts, their shape, and its words.

A depth measure subclasses the engine's base of its timing (:mod:`runner.plugin.timings`) with
``study = STUDY``: a :class:`~runner.plugin.timings.StepMeasure` runs in a *pass*, which iterates one
network's map over all samples (``x``, and perturbed twins ``y`` when a measure asks for them) and
calls its hooks with a :class:`PassContext`; a ``DerivedMeasure`` runs once per network from the
stored results of ``tags.derived.source`` (:class:`Derivation`), and a ``NetworkMeasure`` on the network
itself (:class:`PassNetworkContext`). What a network may lack that a measure requires is :data:`NEEDS`;
the view a measure's ``problems`` reads is a :class:`DepthView`: the spec, and once the networks are
resolved their sizes (and, when a pass is split, its shard count).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from runner.plugin.measure_protocol import StepContext
from runner.plugin.measures import MeasureParams, vocabulary

if TYPE_CHECKING:
    import torch
    from torch import Tensor

STUDY = "depth"
PAPER = "Inoue et al. 2021, Transient chaos in BERT (arXiv:2106.03181)"


class DepthParams(MeasureParams):
    pass


@dataclass(frozen=True)
class DepthShape:
    """What a measure's variables depend on besides its parameters."""

    steps: int
    samples: int
    tokens: int
    text: bool
    """Whether the spec has text models (token coordinates exist)."""
    heads: int
    """Attention heads of the widest network (1 for maps)."""
    float64: bool = False
    """Some network runs in fp64: what is measured in float64 (lambda) is stored in float64."""
    names: tuple[str, ...] = ()
    """Network labels."""


@dataclass(frozen=True)
class Segment:
    start: int
    end: int
    last: bool
    steps: int

    def kept(self, every: int) -> int:
        """How many values kept every ``every`` steps fall in this segment (the final step in the last)."""
        hi = self.steps // every + 1 if self.last else self.end // every
        return hi - self.start // every

    def span(self, every: int, length: int) -> slice:
        return slice(self.start // every, self.start // every + length)


#: What a network may lack that a measure requires (``tags.requires``), and how plan says so.
NEEDS = {
    "tokens": "several tokens per sample",
    "attention": "attention heads",
    "text": "a tokenizer (a text model)",
    "mlm_head": "an MLM head (an ALBERT text model)",  # in the ids of skip tasks: kept as it was
}
vocabulary(STUDY, NEEDS)


def unmet_needs(needs: tuple[str, ...], net) -> str | None:
    """Why a measure that needs ``needs`` does not apply to ``net`` (a resolved network), or None."""
    lacks = {"tokens": net.n_tokens < 2, "attention": net.n_heads == 0, "text": net.model.is_map,
             "mlm_head": net.model.is_map or not getattr(net.model.family, "mlm_head", False)}
    missing = [NEEDS[n] for n in needs if lacks[n]]
    return f"needs {' and '.join(missing)}" if missing else None


def sample_problems(samples: list[int], spec) -> list[tuple[str, str]]:
    """(``samples``, message) for each sample index outside the spec's ``[input] samples``."""
    return [("samples", f"sample {s} out of range (input.samples = {spec.input.samples})")
            for s in samples if not 0 <= s < spec.input.samples]


@dataclass(frozen=True)
class NetworkSize:
    """A resolved network's sizes, as its measures' problems see them."""

    label: str
    precision: str
    n_tokens: int
    n_hidden: int
    """0 when the model's sizes cannot be read here (an unmet requirement says why)."""


@dataclass(frozen=True)
class DepthView:
    """What a depth measure's ``problems(view)`` sees (:class:`~runner.plugin.timings.StepView`): the
    spec; once the networks are resolved (``plan``), their sizes; when ``apply --shards`` splits a pass,
    the shard count. A measure checks what the view knows: the engine asks it with the spec alone, the
    study again with the sizes, the split with its shards."""

    spec: Any
    networks: tuple[NetworkSize, ...] = ()
    shards: int = 1

    @property
    def steps(self) -> int:
        return self.spec.steps

    @property
    def steps_name(self) -> str:
        return self.spec.steps_name

    @property
    def widest(self) -> int:
        """Elements per token of the widest network (0 before the sizes are known)."""
        return max([n.n_hidden for n in self.networks if n.n_hidden] or [0])

    def untrusted(self, key: str, why) -> list[tuple[str, str]]:
        """``(key, "<network>: <why> (or set [dynamics] untrusted_precision = true)")`` for the first sized
        network for which ``why(network)`` gives a reason its precision cannot be trusted (none when the
        spec says ``untrusted_precision``)."""
        if self.spec.dynamics.untrusted_precision:
            return []
        for net in self.networks:
            found = why(net) if net.n_hidden else None
            if found:
                return [(key, f"{net.label}: {found} (or set [dynamics] untrusted_precision = true)")]
        return []


class PassContext(StepContext, Protocol):
    """What the depth study's pass gives a step measure (beyond :class:`StepContext`)."""

    spec: Any
    net: Any
    """The resolved network (``n_tokens``, ``n_heads``, ``model``)."""
    model: Any
    """Its dynamical map."""
    inputs: Any
    """The pass inputs (:class:`~runner.studies.depth.iterate.PassInputs`)."""
    T: int
    """Steps of the run."""
    sharded: bool
    """The pass is one sample shard (a ``shard = "combine"`` measure writes statistics)."""
    mask_x: Tensor | None
    layout: Any


@dataclass
class Derivation:
    """What a derived measure sees (a :class:`~runner.plugin.measure_protocol.DerivedContext`)."""

    spec: Any
    index: int
    store: Any


@dataclass
class PassNetworkContext:
    """What a network measure sees (a :class:`~runner.plugin.measure_protocol.NetworkContext`): the
    spec, its network (``index`` in the store), the device, the pass inputs, the store, and ``build()``
    for a fresh copy of the network's map."""

    spec: Any
    net: Any
    index: int
    device: torch.device
    inputs: Any
    store: Any
    build: Any
