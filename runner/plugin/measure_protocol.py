"""The measure protocol: what every measure declares, and what each timing gives its compute method.

A measure (:class:`runner.plugin.measures.Measure`) declares its capabilities in one frozen
:class:`MeasureTags` (``tags = MeasureTags("step", strides=("every",), exit_period=1)``), as
scikit-learn's estimators declare theirs, and implements:

- ``variables(builder, shape)``: the variables it writes, on a study's :class:`Shape`;
- the compute method its ``timing`` requires (:data:`COMPUTE`), which receives that timing's context:
  ``observe(ctx: StepContext, t, x, bufs, seg)`` along a trajectory (or ``advance``, for a measure
  computed on its twins after each step), ``run(ctx: CheckpointContext, task)`` at a checkpoint, ``run(ctx: NetworkContext)`` on the network itself, ``derive(ctx:
  DerivedContext)`` from stored results.

The contexts are Protocols: they name what a measure may use, and each study's own context satisfies
its timing's protocol (a study may give more, in a protocol of its own that extends this one).
:mod:`runner.plugin.checks` verifies a measure against all this.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

#: When a measure runs: along a trajectory (every step), at each checkpoint of a training run, once
#: per network on the network itself, or from another measure's stored results.
TIMINGS = ("step", "checkpoint", "network", "derived")
#: The compute methods of each timing; a measure implements one of them at least.
COMPUTE = {"step": ("observe", "advance"), "checkpoint": ("run",), "network": ("run",), "derived": ("derive",)}
#: What a checkpoint measure's table may name, each in the parameter its tags give (``MeasureTags.named``).
ROLES = ("networks", "references", "layers", "tagsets", "data")
#: How a per-step measure's pass may be split into sample shards.
SHARDS = ("samples", "combine")


@dataclass(frozen=True)
class MeasureTags:
    """A measure's capabilities, declared once (the fields after ``timing`` default to "none")."""

    timing: str
    """One of :data:`TIMINGS`."""
    requires: tuple[str, ...] = ()
    """What a network must have for the measure to apply, in its study's words (which its study's base
    class checks, ``Measure.tag_problems``); elsewhere it is "not applicable"."""
    strides: tuple[str, ...] = ()
    """Its parameters that count steps between kept values (``every``, ``tau``): durable points fall on
    multiples of them."""
    twin: bool = False
    """(step) The pass iterates perturbed twins beside the state (``perturb``, ``advance``)."""
    twins_in_key: bool = True
    """(step, twin) Whether its twins are listed in the pass's trajectory key (False only for a measure
    whose task ids predate the list)."""
    shard: str | None = None
    """(step) How a pass with it splits into sample shards (:data:`SHARDS`); None: it cannot."""
    exit_period: int | str | None = None
    """(step) Early exit keeps its values exact with this period: an int, or the name of the parameter
    holding it; None forbids early exit."""
    input_masking: tuple[str, ...] = ()
    """(step) The parameters of the masking of its input sentences (an MLM readout); () for none."""
    derived_from: str | None = None
    """(derived) The kind of the measure whose stored results it reads."""
    suites: bool = False
    """(checkpoint) It also measures published checkpoint suites (it reads activations only)."""
    head: bool = False
    """(checkpoint, suites) It needs a suite's language-modelling head."""
    causal: bool = False
    """(checkpoint, suites) It needs a next-token (causal) objective."""
    networks: str | None = None
    """(checkpoint) The parameter listing the networks it measures (empty: its study's default)."""
    references: str | None = None
    """(checkpoint) The parameter listing reference networks a task reads besides its own."""
    layers: str | None = None
    """(checkpoint) The parameter listing the layers it reads."""
    tagsets: str | None = None
    """(checkpoint) The parameter listing the tag sets it reads (its study then loads them)."""
    data: str | None = None
    """(checkpoint) The parameter naming data it reads besides its study's (a treebank)."""
    variant: str | None = None
    """The parameter whose values make distinct instances of it in one spec (a comparison's mode)."""

    def problems(self) -> list[str]:
        """What is inconsistent in these tags (empty when they are valid)."""
        out = []
        if self.timing not in TIMINGS:
            return [f"timing {self.timing!r} is none of {', '.join(TIMINGS)}"]
        step_only = {"twin": self.twin, "twins_in_key": not self.twins_in_key, "shard": self.shard is not None,
                     "exit_period": self.exit_period is not None, "input_masking": bool(self.input_masking)}
        checkpoint_only = {"suites": self.suites, "head": self.head, "causal": self.causal, **{
            role: getattr(self, role) is not None for role in ROLES}}
        for names, timing in ((step_only, "step"), (checkpoint_only, "checkpoint")):
            out += [f"{name} applies to timing {timing!r} only, not {self.timing!r}"
                    for name, set_ in names.items() if set_ and self.timing != timing]
        if self.shard is not None and self.shard not in SHARDS:
            out.append(f"shard {self.shard!r} is none of {', '.join(SHARDS)} (or None)")
        if not self.twins_in_key and not self.twin:
            out.append("twins_in_key = False needs twin = True")
        if isinstance(self.exit_period, bool) or (isinstance(self.exit_period, int) and self.exit_period < 1):
            out.append(f"exit_period {self.exit_period!r} is no period (an int >= 1, a parameter name or None)")
        if (self.timing == "derived") != (self.derived_from is not None):
            out.append("derived_from names the source of a derived measure, and only of one")
        if (self.head or self.causal) and not self.suites:
            out.append("head and causal describe suites' checkpoints: they need suites = True")
        return out

    def parameters(self) -> list[str]:
        """The names of parameters these tags refer to (each must be a field of the measure's table)."""
        return [*self.strides, *self.input_masking, *([self.exit_period] if isinstance(self.exit_period, str) else []),
                *(name for role in (*ROLES, "variant") if (name := getattr(self, role)) is not None)]

    def named(self, params: Any, role: str) -> list:
        """The values of the parameter these tags name for ``role`` (one of :data:`ROLES` or
        ``variant``), as a list; [] where they name none: how a study reads a measure's table
        without knowing its fields."""
        name = getattr(self, role)
        if name is None:
            return []
        value = getattr(params, name)
        return list(value) if isinstance(value, (list, tuple)) else [value]

    def period(self, params: Any) -> int | None:
        """The early-exit period for these parameters (see :attr:`exit_period`)."""
        return int(getattr(params, self.exit_period)) if isinstance(self.exit_period, str) else self.exit_period

    def masking(self, params: Any) -> dict[str, Any] | None:
        """The masking parameters' values (in the trajectory key of text networks), or None."""
        return {name: getattr(params, name) for name in self.input_masking} or None


# --------------------------------------------------------------------------- shapes: what variables read

class Shape(Protocol):
    """What a measure's ``variables(builder, shape)`` depends on besides its parameters: the sizes of a
    study's run. Each study gives its own frozen dataclass, satisfying :class:`StepShape` (a study along
    steps) or :class:`CheckpointShape` (a study with checkpoints)."""

    names: Sequence[str]
    """Network labels (the store's ``network`` index)."""


class StepShape(Shape, Protocol):
    steps: int
    """Steps of the run (a time axis runs 0 .. steps)."""
    samples: int


class CheckpointShape(Shape, Protocol):
    layers: Sequence[str]
    """The store's ``layer`` axis, bottom up."""
    sentence: Sequence[str]
    """Tokens of the analysis sentence."""


# --------------------------------------------------------------------------- contexts: one per timing

class StoreWriter(Protocol):
    def write(self, name: str, region: Any, values: Any) -> None:
        """Write ``values`` into ``region`` of variable ``name``."""


class StepContext(Protocol):
    """What a per-step measure's hooks may use: one pass over a network's samples."""

    store: StoreWriter
    index: int
    """The network's index in the store."""
    S: int
    """Samples in the batch (a shard's, when the pass is split)."""
    device: Any
    """The torch device the state lives on."""

    def twin(self, measure: Any) -> Any:
        """The measure's perturbed twins (``tags.twin``)."""


class CheckpointContext(Protocol):
    """What a checkpoint measure may use at one ``(network, checkpoint)`` task."""

    names: list[str]
    """Network labels (index: ``task.network``)."""

    def write(self, name: str, task: Any, values: Any) -> None:
        """Write the task's ``(network, checkpoint)`` cell of variable ``name``."""


class NetworkContext(Protocol):
    """What a per-network measure may use: the network itself, once."""

    spec: Any
    index: int
    device: Any
    store: StoreWriter
    build: Callable[[], Any]
    """A fresh copy of the network."""


class DerivedContext(Protocol):
    """What a derived measure may use: another measure's stored results of one network."""

    spec: Any
    index: int
    store: Any
    """The store, read (``store.read``) and written."""


#: The context protocol of each timing.
CONTEXTS = {"step": StepContext, "checkpoint": CheckpointContext, "network": NetworkContext, "derived": DerivedContext}
