"""How a depth-dynamics measure plugs into a pass over a trajectory, or derives from stored results.

A *pass* iterates one network's map over all samples (``x``, and a perturbed twin ``y`` when a
measure asks for one) and calls, for each of its measures, in order:

``start``   once: the measure's resumable state (tensors; saved in every durable point)
``buffers`` per segment: device buffers for the values the segment keeps
``observe`` at every step t, before ``x <- f(x)``: write into the buffers (no host sync)
``advance`` after every application of f, for a measure with twins (e.g. renormalise ``y``)
``write``   per segment: region writes of the buffers (and, at the end, the final values)

A :class:`DerivedMeasure` instead runs once per network from the stored results of
``tags.derived_from``, and a :class:`NetworkMeasure` on the network itself. All declare their
capabilities in ``tags`` and their variables with ``variables`` (the protocol of
:mod:`runner.plugin.measure_protocol`); the hooks receive a :class:`PassContext`.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import torch
from torch import Tensor

from runner.plugin.measure_protocol import DerivedContext, MeasureTags, StepContext
from runner.plugin.measure_protocol import NetworkContext
from runner.plugin.measures import Measure, MeasureParams

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


class DepthMeasure(Measure):
    """Base of the depth study's measures. Its tags' ``requires`` (keys of :data:`NEEDS`): on a network
    without it, ``plan`` says "not applicable", no pass computes it, its values stay NaN and
    :meth:`mark_not_applicable` writes its outcome flags. Its ``strides`` (``every``, ``tau``): durable
    points fall on multiples of them (``[dynamics] checkpoint_every`` must be one) and
    :meth:`stride_problems` checks them against the run's length."""

    study = "depth"
    reference = PAPER

    @classmethod
    def tag_problems(cls) -> list[str]:
        unknown = [r for r in cls.tags.requires if r not in NEEDS]
        return [f"requires {unknown}: the depth study knows {', '.join(NEEDS)}"] if unknown else []

    def not_applicable(self, net) -> str | None:
        """Why this measure does not apply to the resolved network ``net``, or None."""
        return unmet_needs(self.tags.requires, net)

    def stride_values(self) -> list[int]:
        """The values of its tags' ``strides``, in their order."""
        return [int(getattr(self.p, name)) for name in self.tags.strides]

    def stride_problems(self, steps: int) -> list[tuple[str, str]]:
        """(key, message) for each stride longer than the run of ``steps`` steps."""
        return [(name, f"{value} is larger than [dynamics] steps = {steps}; the measure would keep no value")
                for name, value in zip(self.tags.strides, self.stride_values(), strict=True) if value > steps]

    #: Precisions in which ``benchmarks/precision.py`` compared this measure's statistics with fp32's,
    #: and whether they agreed (:data:`runner.studies.depth.precision.VALIDATED_ON`); ``plan`` says so.
    precision_checked: ClassVar[dict[str, bool]] = {}

    def state_nbytes(self, steps: int, sample_nbytes: int) -> int:
        """Memory it holds beside the iterated batch for the whole run (bytes), for a network whose
        state takes ``sample_nbytes`` per sample: counted when the spec is checked, before anything runs."""
        return 0

    def state_problem(self, widest: int) -> tuple[str, str] | None:
        """(key, why) when it asks for parts of a state beyond every network's (the widest has
        ``widest`` elements per token); None when it does not."""
        return None

    def mark_not_applicable(self, store, network: int) -> None:
        """Record in the store that this measure does not apply to ``network``: by default nothing
        (its values stay NaN); a measure with outcome flags writes ``not_applicable`` there."""

    def problems(self, spec) -> list[tuple[str, str]]:
        """(key, message) problems of this measure in the whole spec (the depth study's view is its
        :class:`~runner.studies.depth.spec.DepthSpec`): here, strides longer than the run."""
        return self.stride_problems(spec.dynamics.steps)

    def precision_problem(self, precision: str, n_tokens: int, n_hidden: int) -> tuple[str, str] | None:
        """(key, why) when this measure cannot be trusted for a network of this size in ``precision``
        (:mod:`runner.studies.depth.precision`); None when it can."""
        return None


class PassContext(StepContext, Protocol):
    """What the depth study's pass gives a :class:`TrajectoryMeasure` (beyond :class:`StepContext`)."""

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


class TrajectoryMeasure(DepthMeasure):
    """A measure computed along the trajectory, in a pass (timing ``"step"``). One instance per pass.

    Its tags say whether the pass iterates perturbed twins y of ``rows`` beside x (``twin``:
    ``perturb`` makes them, ``advance`` may change them after each step, ``ctx.twin(self)`` reads them
    in ``observe``); whether a pass with it splits into sample shards (``shard``, see
    :mod:`runner.studies.depth.shards`: ``"samples"``, its values are per sample, written with
    ``slice(None)`` along ``sample``; ``"combine"``, a value over all samples that ``combine`` computes
    from statistics each shard writes as ``"<kind>/<stat>"``, ``ctx.sharded`` says when); whether its
    values stay exact under early exit (``exit_period``, :mod:`runner.studies.depth.exit`: an int p, or
    the parameter holding it, when it reads the pass only through what ``observe`` and ``advance``
    receive and ``advance`` depends on t only through t mod p; None forbids early exit); and the
    parameters of the masking of its input sentences (``input_masking``: the study then replaces the
    tokens :meth:`masked_positions` chooses by the mask token in x_0 of every text model)."""

    tags = MeasureTags("step")

    def start(self, ctx: PassContext, x0: Tensor) -> None:
        """Set up a fresh state at t = 0."""

    def state_dict(self) -> dict[str, Tensor]:
        """The state to resume from (tensors; saved at every durable point)."""
        return {}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        pass

    def masked_positions(self, input_ids: Tensor, special_ids: list[int], seed: int) -> Tensor:
        """Bool ``(samples, tokens)``: the input tokens to replace by the mask token."""
        raise NotImplementedError

    def rows(self, ctx: PassContext) -> Tensor:
        """The samples that get a twin (all by default)."""
        return torch.arange(ctx.S, device=ctx.device)

    def n_twins(self, samples: int) -> int:
        """How many twins it adds to a batch of ``samples`` (``len(rows)``), known before any run."""
        return samples

    def perturb(self, ctx: PassContext, x0: Tensor) -> Tensor:
        """The twins at t = 0, one per sample in ``rows``."""
        raise NotImplementedError

    def buffers(self, ctx: PassContext, seg: Segment) -> dict[str, Tensor]:
        return {}

    @abstractmethod
    def observe(self, ctx: PassContext, t: int, x: Tensor, bufs: dict, seg: Segment) -> Tensor | None:
        """Record what the measure keeps at step t; may return per-sample finiteness of x (saves
        the pass its own check). A measure implements this or :meth:`advance` (``check_measure``); the
        pass calls both, whose defaults do nothing."""
        return None

    @abstractmethod
    def advance(self, ctx: PassContext, t: int, x: Tensor, y: Tensor, bufs: dict, seg: Segment) -> Tensor:
        """After the step that reached t: the twins ``y`` to iterate on (the Lyapunov exponent
        renormalises them every tau steps)."""
        return y

    def write(self, ctx: PassContext, bufs: dict, seg: Segment) -> None:
        pass

    def shard_problem(self, n_tokens: int, n_hidden: int) -> str | None:
        """Why a pass of a network of this size cannot be split (its statistics too large), or None."""
        return None

    @classmethod
    def combine(cls, stats: dict[str, list]) -> dict[str, Any]:
        """For tags' ``shard = "combine"``: each statistic's arrays, one per shard -> the variables' values."""
        raise NotImplementedError

    @staticmethod
    def nan(shape: tuple[int, ...], dtype: torch.dtype, device) -> Tensor:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)


class DerivedMeasure(DepthMeasure):
    """A measure computed from another measure's stored results (timing ``"derived"``; the other
    measure's kind is its tags' ``derived_from``)."""

    @abstractmethod
    def derive(self, ctx: DerivedContext) -> None:
        raise NotImplementedError


@dataclass
class Derivation:
    """What a :class:`DerivedMeasure` sees (a :class:`~runner.plugin.measure_protocol.DerivedContext`)."""

    spec: Any
    index: int
    store: Any


@dataclass
class PassNetworkContext:
    """What a :class:`NetworkMeasure` sees (a :class:`~runner.plugin.measure_protocol.NetworkContext`): the
    spec, its network (``index`` in the store), the device, the pass inputs, the store, and ``build()``
    for a fresh copy of the network's map."""

    spec: Any
    net: Any
    index: int
    device: torch.device
    inputs: Any
    store: Any
    build: Any


class NetworkMeasure(DepthMeasure):
    """A measure that needs the network itself rather than its trajectory (timing ``"network"``):
    one task per network, e.g. fine-tuning the map. ``run`` may skip the values a stopped run already
    wrote (the task reruns until it completes)."""

    tags = MeasureTags("network")

    @abstractmethod
    def run(self, ctx: NetworkContext) -> None:
        raise NotImplementedError
