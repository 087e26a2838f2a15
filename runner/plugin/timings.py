"""The four measure base classes, one per timing (:data:`~runner.plugin.measure_protocol.TIMINGS`).

A registration subclasses the one of its timing, names its study (``study = "..."``) and its
reference, and implements that timing's compute method on the timing's context
(:mod:`runner.plugin.measure_protocol`). No study adds a base class of its own: what a study shows
its measures is its contexts and its view (``ViewsMeasures.measure_view``), what it lets them require is its
vocabulary (:func:`runner.plugin.measures.vocabulary`).

- :class:`StepMeasure`: along a trajectory, in a pass over a network's samples (``observe`` at every
  step, ``advance`` after it for a measure with twins), resumable (``state_dict``);
- :class:`CheckpointMeasure`: at each ``(network, checkpoint)`` task of a run with checkpoints;
- :class:`NetworkMeasure`: once per network, on the network itself;
- :class:`DerivedMeasure`: once per network, from another measure's stored results.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, Protocol

from runner.plugin.measure_protocol import (
    CheckpointContext,
    DerivedContext,
    MeasureTags,
    NetworkContext,
    StepContext,
)
from runner.plugin.measures import Measure

__all__ = ["CheckpointMeasure", "CheckpointView", "DerivedMeasure", "NetworkMeasure", "StepMeasure", "StepView",
           "network_problems"]


class StepView(Protocol):
    """What a study along steps shows its measures of a spec (besides what its own measures read)."""

    steps: int
    """Steps of the run."""
    steps_name: str
    """Where the spec sets them, for messages."""


class StepMeasure(Measure):
    """A measure computed along the trajectory, in a pass (timing ``"step"``). One instance per pass,
    whose hooks the pass calls in order:

    ``start``   once: the measure's resumable state (tensors; saved in every durable point)
    ``buffers`` per segment: device buffers for the values the segment keeps
    ``observe`` at every step t, before ``x <- f(x)``: write into the buffers (no host sync)
    ``advance`` after every application of f, for a measure with twins (e.g. renormalise ``y``)
    ``write``   per segment: region writes of the buffers (and, at the end, the final values)

    Its tags say whether the pass iterates perturbed twins y of ``rows`` beside x (``twin``:
    ``perturb`` makes them, ``advance`` may change them after each step, ``ctx.twin(self)`` reads them
    in ``observe``); whether a pass with it splits into sample shards (``shard``: ``"samples"``, its
    values are per sample, written with ``slice(None)`` along ``sample``; ``"combine"``, a value over
    all samples that ``combine`` computes from statistics each shard writes as ``"<kind>/<stat>"``,
    ``ctx.sharded`` says when); whether its values stay exact under early exit (``exit_period``: an
    int p, or the parameter holding it, when it reads the pass only through what ``observe`` and
    ``advance`` receive and ``advance`` depends on t only through t mod p; None forbids it); the
    parameters that count steps between kept values (``strides``: durable points fall on multiples of
    them, and each must fit in the run); the parameters of the masking of its input sentences
    (``input_masking``: :meth:`masked_positions` chooses the tokens); and whether a finished run of
    it continues to a longer one (``extends``, with ``extend_note``: :meth:`extend_state` adapts the
    state its pass kept). All of these sit in its
    ``tags.step`` (:class:`~runner.plugin.measure_protocol.StepTags`).

    What it refuses is said in the one hook, :meth:`problems`, on what its study's view knows: the spec
    at first, then (a study that resolves its networks asks again) their sizes and precisions, and the
    shard count when a pass is split. What it holds is a declaration, :meth:`state_nbytes`, which the
    study's footprint adds up (:mod:`runner.spec.footprint`)."""

    tags = MeasureTags("step")

    def problems(self, view: StepView) -> list[tuple[tuple | str, str]]:
        """Strides longer than the run (a measure adds its own checks on the same view)."""
        return self._stride_problems(view)

    def stride_values(self) -> list[int]:
        """The values of its tags' ``step.strides``, in their order."""
        return [int(getattr(self.p, name)) for name in self.tags.step.strides]

    def _stride_problems(self, view: StepView) -> list[tuple[tuple | str, str]]:
        """(key, message) for each stride longer than the run."""
        return [(name, f"{value} is larger than {view.steps_name} = {view.steps}; the measure would keep no value")
                for name, value in zip(self.tags.step.strides, self.stride_values(), strict=True) if value > view.steps]

    def start(self, ctx: StepContext, x0: Any) -> None:
        """Set up a fresh state at t = 0."""

    def state_dict(self) -> dict[str, Any]:
        """The state to resume from (tensors; saved at every durable point)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass

    def extend_state(self, state: dict[str, Any], old_steps: int, new_steps: int) -> dict[str, Any]:
        """Its state kept at step ``old_steps`` of a finished run, as a run of ``new_steps`` has it there
        (called only for a measure whose tags say ``step.extends``)."""
        return state

    def extend_note(self, old_steps: int, new_steps: int) -> str:
        """What a longer run of ``old_steps`` to ``new_steps`` computes again at its new end, for ``plan``
        (default: the tags' ``extend_note``; a measure whose answer depends on its parameters says it here)."""
        note = self.tags.step.extend_note
        return f"{note} recomputed at step {new_steps}" if note else ""

    def masked_positions(self, input_ids: Any, special_ids: list[int], seed: int) -> Any:
        """Bool ``(samples, tokens)``: the input tokens to replace by the mask token."""
        raise NotImplementedError

    def rows(self, ctx: StepContext) -> Any:
        """The samples that get a twin (all by default)."""
        import torch  # lazy: torch

        return torch.arange(ctx.S, device=ctx.device)

    def n_twins(self, samples: int) -> int:
        """How many twins it adds to a batch of ``samples`` (``len(rows)``), known before any run."""
        return samples

    def perturb(self, ctx: StepContext, x0: Any) -> Any:
        """The twins at t = 0, one per sample in ``rows``."""
        raise NotImplementedError

    def perturb_shard(self, ctx: StepContext, x_all: Any, rows: slice) -> Any:
        """The twins at t = 0 of a shard, the samples ``rows`` of ``x_all`` (all samples' states): by
        default those of the whole batch, sliced (one twin per sample)."""
        return self.perturb(ctx, x_all)[rows]

    def buffers(self, ctx: StepContext, seg: Any) -> dict[str, Any]:
        return {}

    @abstractmethod
    def observe(self, ctx: StepContext, t: int, x: Any, bufs: dict, seg: Any) -> Any:
        """Record what the measure keeps at step t; may return per-sample finiteness of x (saves
        the pass its own check). A measure implements this or :meth:`advance` (``check_measure``); the
        pass calls both, whose defaults do nothing."""
        return None

    @abstractmethod
    def advance(self, ctx: StepContext, t: int, x: Any, y: Any, bufs: dict, seg: Any) -> Any:
        """After the step that reached t: the twins ``y`` to iterate on (an exponent of divergence
        renormalises them every tau steps)."""
        return y

    def write(self, ctx: StepContext, bufs: dict, seg: Any) -> None:
        pass

    @classmethod
    def combine(cls, stats: dict[str, list]) -> dict[str, Any]:
        """For tags' ``shard = "combine"``: each statistic's arrays, one per shard -> the variables' values."""
        raise NotImplementedError

    def state_nbytes(self, steps: int, sample_nbytes: int) -> int:
        """Memory it holds beside the iterated batch for the whole run (bytes), for a network whose
        state takes ``sample_nbytes`` per sample."""
        return 0

    @staticmethod
    def nan(shape: tuple[int, ...], dtype: Any, device: Any) -> Any:
        import torch  # lazy: torch

        return torch.full(shape, float("nan"), dtype=dtype, device=device)


class CheckpointView(Protocol):
    """What a study with checkpoints shows its measures of a spec, at least."""

    networks: tuple[str, ...]
    """The ``[[model]]`` names a measure may name."""


def network_problems(measure: Measure, view: CheckpointView) -> list[tuple[tuple, str]]:
    """The networks and reference networks a checkpoint measure's table names (its tags say where)
    that the spec lacks (a view without ``networks`` is asked only when the table names some)."""
    out = []
    for role in ("networks", "references"):
        named = measure.tags.named(measure.p, role)
        names = list(view.networks) if named else []
        unknown = [x for x in named if x not in names]
        if unknown:
            out.append(((measure.tags.parameter(role),), f"no [[model]] named {unknown}; the spec has {names}"))
    return out


class CheckpointMeasure(Measure):
    """A measure at each ``(network, checkpoint)`` task of a run with checkpoints (timing
    ``"checkpoint"``). ``needs`` says which checkpoints a task reads; ``run`` writes the task's cell
    of each of its variables through ``ctx.write``. Its tags name the parameters that hold the
    networks, references, layers, ... it reads (``MeasureTags.named``); ``suites``: it reads only
    what a published checkpoint suite's context gives."""

    tags = MeasureTags("checkpoint")

    def problems(self, view: CheckpointView) -> list[tuple[tuple | str, str]]:
        """Networks it names that the spec lacks (a measure adds its own on the same view)."""
        return network_problems(self, view)

    def needs(self, network: int, checkpoint: int, last: int, refs: list[int]) -> list[tuple[int, int]] | None:
        """The (network, checkpoint) pairs a task at ``checkpoint`` reads; None: no task there."""
        return [(network, checkpoint)]

    @abstractmethod
    def run(self, ctx: CheckpointContext, task: Any) -> None:
        raise NotImplementedError


class NetworkMeasure(Measure):
    """A measure that needs the network itself rather than its trajectory (timing ``"network"``):
    one task per network, e.g. fine-tuning the map. ``run`` may skip the values a stopped run already
    wrote (the task reruns until it completes)."""

    tags = MeasureTags("network")

    @abstractmethod
    def run(self, ctx: NetworkContext) -> None:
        raise NotImplementedError


class DerivedMeasure(Measure):
    """A measure computed from another measure's stored results (timing ``"derived"``; the other
    measure's kind is its tags' ``derived.source``)."""

    @abstractmethod
    def derive(self, ctx: DerivedContext) -> None:
        raise NotImplementedError


#: The base class of each timing.
BASES: dict[str, type[Measure]] = {"step": StepMeasure, "checkpoint": CheckpointMeasure,
                                   "network": NetworkMeasure, "derived": DerivedMeasure}