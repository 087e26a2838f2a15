"""The measure protocol: what every measure declares, and what each timing gives its compute method.

A measure (:class:`runner.plugin.measures.Measure`) declares its capabilities in one frozen
:class:`MeasureTags` (``tags = MeasureTags("step", step=StepTags(strides=("every",), exit_period=1))``), nested by
role as scikit-learn's estimators declare theirs, and implements:

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
from typing import Any, Literal, Protocol

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
class Twin:
    """(step) The pass iterates perturbed twins beside the state (``perturb``, ``advance``)."""

    in_key: bool = True
    """Whether its twins are listed in the pass's trajectory key (False only for a measure whose task ids
    predate the list)."""


@dataclass(frozen=True)
class StepTags:
    """What applies to a measure along a trajectory (timing ``"step"``)."""

    strides: tuple[str, ...] = ()
    """Its parameters that count steps between kept values (``every``, ``tau``): durable points fall on
    multiples of them."""
    twin: Twin | None = None
    """Its perturbed twins (:class:`Twin`); None: it has none."""
    shard: Literal["samples", "combine"] | None = None
    """How a pass with it splits into sample shards (:data:`SHARDS`); None: it cannot."""
    exit_period: int | str | None = None
    """Early exit keeps its values exact with this period: an int >= 1, or the name of the parameter
    holding it; None forbids early exit."""
    input_masking: tuple[str, ...] = ()
    """The parameters of the masking of its input sentences (an MLM readout); () for none."""
    extends: bool = False
    """A finished run of it continues to a longer one from the state its pass kept before the last
    step (``StepMeasure.extend_state`` adapts that state; what it writes at the end it writes again at
    the new end); False: a longer run computes it again from t = 0."""
    extend_note: str = ""
    """For plan, when it extends: what it computes again at the new last step ("" for nothing)."""

    def problems(self) -> list[str]:
        out = []
        if self.shard is not None and self.shard not in SHARDS:
            out.append(f"shard {self.shard!r} is none of {', '.join(SHARDS)} (or None)")
        if isinstance(self.exit_period, bool) or (isinstance(self.exit_period, int) and self.exit_period < 1):
            out.append(f"exit_period {self.exit_period!r} is no period (an int >= 1, a parameter name or None)")
        if self.twin is not None and not isinstance(self.twin, Twin):
            out.append(f"twin is a Twin() or None, not {self.twin!r}")
        if self.extend_note and not self.extends:
            out.append(f"extend_note {self.extend_note!r} without extends=True")
        return out

    def parameters(self) -> list[str]:
        return [*self.strides, *self.input_masking, *([self.exit_period] if isinstance(self.exit_period, str) else [])]

    def period(self, params: Any) -> int | None:
        """The early-exit period for these parameters (see :attr:`exit_period`)."""
        return int(getattr(params, self.exit_period)) if isinstance(self.exit_period, str) else self.exit_period

    def masking(self, params: Any) -> dict[str, Any] | None:
        """The masking parameters' values (in the trajectory key of text networks), or None."""
        return {name: getattr(params, name) for name in self.input_masking} or None


@dataclass(frozen=True)
class Suites:
    """(checkpoint) It also measures published checkpoint suites (it reads activations only)."""

    head: bool = False
    """It needs a suite's language-modelling head."""
    causal: bool = False
    """It needs a next-token (causal) objective."""


@dataclass(frozen=True)
class CheckpointTags:
    """What applies to a measure at checkpoints (timing ``"checkpoint"``): the parameters of its table that
    name what it reads (each None: it names none), and whether it measures checkpoint suites."""

    suites: Suites | None = None
    """It also measures published checkpoint suites (:class:`Suites`); None: trained networks only."""
    networks: str | None = None
    """The parameter listing the networks it measures (empty: its study's default)."""
    references: str | None = None
    """The parameter listing reference networks a task reads besides its own."""
    layers: str | None = None
    """The parameter listing the layers it reads."""
    tagsets: str | None = None
    """The parameter listing the tag sets it reads (its study then loads them)."""
    data: tuple[str, ...] = ()
    """The parameters naming data it reads besides its study's: its source, then the source's options
    a reader takes (a treebank: ``("treebank", "subset", "split")``)."""

    def problems(self) -> list[str]:
        if self.suites is not None and not isinstance(self.suites, Suites):
            return [f"suites is a Suites(...) or None, not {self.suites!r}"]
        return []

    def parameters(self) -> list[str]:
        return [*(name for role in ROLES if role != "data" and (name := getattr(self, role)) is not None),
                *self.data]


@dataclass(frozen=True)
class DerivedTags:
    """What applies to a measure computed from another's stored results (timing ``"derived"``)."""

    source: str
    """The kind of the measure whose stored results it reads."""

    def problems(self) -> list[str]:
        return [] if isinstance(self.source, str) and self.source else ["derived.source names the measure it reads"]

    def parameters(self) -> list[str]:
        return []


#: The tags of each timing's role (a network measure has none of its own).
ROLE_TAGS = {"step": StepTags, "checkpoint": CheckpointTags, "derived": DerivedTags}


@dataclass(frozen=True)
class MeasureTags:
    """A measure's capabilities, declared once, nested by role as scikit-learn nests an estimator's
    tags: what applies to every measure at the top, what applies to one timing in that timing's tags
    (``step``, ``checkpoint``, ``derived``; None for the other timings). A field cannot be set where it
    does not apply, so no rule relates two fields::

        MeasureTags("step", step=StepTags(strides=("tau",), twin=Twin(), exit_period="tau"))
        MeasureTags("checkpoint", checkpoint=CheckpointTags(suites=Suites(head=True), networks="networks"))
        MeasureTags("derived", derived=DerivedTags(source="<the kind it reads>"))

    A timing's tags left out are that timing's defaults (a derived measure must name its source)."""

    timing: str
    """One of :data:`TIMINGS`."""
    requires: tuple[str, ...] = ()
    """What a network must have for the measure to apply, in its study's words (:func:`vocabulary
    <runner.plugin.measures.vocabulary>`); elsewhere it is "not applicable"."""
    variant: str | None = None
    """The parameter whose values make distinct instances of it in one spec (a comparison's mode)."""
    step: StepTags | None = None
    """(step) Its role along a trajectory (:class:`StepTags`)."""
    checkpoint: CheckpointTags | None = None
    """(checkpoint) Its role at checkpoints (:class:`CheckpointTags`)."""
    derived: DerivedTags | None = None
    """(derived) Its source (:class:`DerivedTags`)."""

    def __post_init__(self):
        role = ROLE_TAGS.get(self.timing)
        name = self.timing if role is not None else None
        if role is not None and role is not DerivedTags and getattr(self, name) is None:
            object.__setattr__(self, name, role())  # the timing's defaults

    def problems(self) -> list[str]:
        """What is wrong in these tags (empty when they are valid): an unknown timing, another timing's
        tags, tags of the wrong type, a value outside its choices."""
        if self.timing not in TIMINGS:
            return [f"timing {self.timing!r} is none of {', '.join(TIMINGS)}"]
        out = [f"{role} tags apply to timing {role!r} only, not {self.timing!r}"
               for role in ROLE_TAGS if role != self.timing and getattr(self, role) is not None]
        own = ROLE_TAGS.get(self.timing)
        tags = self.role()
        if own is DerivedTags and tags is None:
            out.append("a derived measure names its source: derived=DerivedTags(source=<kind>)")
        elif own is not None and not isinstance(tags, own):
            out.append(f"{self.timing} is a {own.__name__}(...), not {tags!r}")
        elif tags is not None:
            out += tags.problems()
        return out

    def role(self) -> StepTags | CheckpointTags | DerivedTags | None:
        """The tags of its timing's role (None for a network measure)."""
        return getattr(self, self.timing, None) if self.timing in ROLE_TAGS else None

    def parameters(self) -> list[str]:
        """The names of parameters these tags refer to (each must be a field of the measure's table)."""
        role = self.role()
        own = role.parameters() if hasattr(role, "parameters") else []
        return [*own, *([self.variant] if self.variant is not None else [])]

    def named(self, params: Any, role: str) -> list:
        """The values of the parameter these tags name for ``role`` (one of :data:`ROLES` or
        ``variant``), as a list; [] where they name none: how a study reads a measure's table
        without knowing its fields."""
        if role == "data":
            return [getattr(params, name) for name in self.checkpoint.data] if self.checkpoint is not None else []
        name = self.parameter(role)
        if name is None:
            return []
        value = getattr(params, name)
        return list(value) if isinstance(value, (list, tuple)) else [value]

    def parameter(self, role: str) -> str | None:
        """The name of the parameter these tags name for ``role`` (None: none; for ``data``, its source's)."""
        if role == "variant":
            return self.variant
        name = getattr(self.checkpoint, role) if self.checkpoint is not None else None
        return (name[0] if name else None) if isinstance(name, tuple) else name


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

    def warn(self, message: str) -> None:
        """One warning line for the user (the pass names the network)."""


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
