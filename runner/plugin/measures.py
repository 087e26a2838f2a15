"""Measures, declared once: a pure function in ``analyses/`` and one registration.

A registration is a subclass of its timing's base class (:mod:`runner.plugin.timings`: one per
timing, none per study), in one statement: ``class Mine(StepMeasure, study=STUDY, reference=PAPER,
params=Params, tags=MeasureTags(...))`` (the same as those class attributes and the :func:`register`
decorator). It holds:

- ``study``: the study whose specs name it (its words for what a network must have, ``tags.requires``,
  are the study's :func:`vocabulary`);
- ``Params`` (keyword ``params``): its ``[[measure]]`` table, a :class:`MeasureParams` with ``kind: Literal["name"]``
  and the paper's defaults (its docstring and field docstrings are what ``runner explain`` shows);
- ``tags``: its capabilities, one :class:`~runner.plugin.measure_protocol.MeasureTags` (``timing``:
  ``"step"``, ``"checkpoint"``, ``"network"`` or ``"derived"``; what applies to one timing nested in that
  timing's tags: ``StepTags`` (twins, shards, ...), ``CheckpointTags`` (suites, ...), ``DerivedTags``);
- ``version``: bump it when the code changes what the measure writes (its tasks then rerun);
- ``reference``: the paper, equation or figure it follows;
- ``variables(builder, shape)``: the variables it writes, declared with their dims, units,
  ``long_name``, description and, optionally, how ``show`` summarises them (``headline``) and how
  the monitor plots them (``plot``);
- the compute method of its timing, on that timing's typed context (:mod:`runner.plugin.measure_protocol`).

:func:`runner.plugin.checks.check_measure` verifies all of this for a measure of any study or plugin, and
:func:`runner.run.conformance.check_runs` runs it on its study's small example.

Spec validation (the ``[[measure]]`` union is built from the registry), the plan, the store's
layout, ``show`` and the monitor all follow from this one registration: ``show`` and the monitor
read the hints from the variables' attributes in the store, so they need no study code.
"""

from __future__ import annotations

import typing
from abc import abstractmethod
from typing import Annotated, Any, ClassVar, Union

from pydantic import Field, create_model

from models.registry_base import Registry

from runner.core.layout import INTERNAL, LayoutBuilder
from runner.plugin.loader import hook, load_plugins
from runner.plugin.measure_protocol import CheckpointTags, DerivedTags, MeasureTags, Shape, StepTags, Suites, Twin
from runner.spec.specfile import Table

__all__ = ["CheckpointTags", "DerivedTags", "Measure", "MeasureParams", "MeasureTags", "StepTags", "Suites", "Twin", "declare", "hints", "measure_problems", "measures", "params_union",
           "kits", "register", "takes", "vocabulary"]

#: study name -> measure kind -> registration
_REGISTRY: dict[str, dict[str, type[Measure]]] = {}

#: How ``show`` may reduce a variable of one network to a headline number (see runner.read.status).
REDUCTIONS = ("mean", "finite_mean", "median", "last", "first_mean", "count_finite", "count_true", "value")
#: How the monitor may plot a variable (see runner.tui).
PLOTS = ("series", "log_series", "histogram", "curve")


class MeasureParams(Table):
    """Base of a ``[[measure]]`` table: ``kind`` names the registration."""

    kind: str

    def params(self) -> dict[str, Any]:
        return self.model_dump(exclude={"kind"})


class Measure:
    """Base of every measure registration (see the module docstring)."""

    study: ClassVar[str]
    """The study whose specs name it, or a kit whose measures every study that :func:`takes` it offers."""
    tags: ClassVar[MeasureTags]
    """Its capabilities (:class:`~runner.plugin.measure_protocol.MeasureTags`)."""
    version: ClassVar[int] = 1
    replaces: ClassVar[bool] = False
    """A plugin measure that takes the kind of one already registered says so here (else it is refused)."""
    reference: ClassVar[str] = ""
    Params: ClassVar[type[MeasureParams]]
    example: ClassVar[dict[str, Any]] = {}
    """Values for the fields of ``Params`` that have no default (a file), for :func:`runner.plugin.checks.check_measure`."""

    def __init_subclass__(cls, *, study: str | None = None, reference: str | None = None,
                          params: type[MeasureParams] | None = None, tags: MeasureTags | None = None, **kwargs: Any):
        """A registration in one statement: ``class Mine(StepMeasure, study=STUDY, reference=PAPER,
        params=Params, tags=MeasureTags(...))`` sets those class attributes and, with ``study``,
        registers the class (:func:`register`). A subclass without keywords is not registered."""
        super().__init_subclass__(**kwargs)
        for name, value in (("reference", reference), ("Params", params), ("tags", tags)):
            if value is not None:
                setattr(cls, name, value)
        if study is not None:
            cls.study = study
            register(cls)

    def __init__(self, params: MeasureParams):
        self.p = params

    @classmethod
    def kind(cls) -> str:
        return typing.get_args(cls.Params.model_fields["kind"].annotation)[0]

    @classmethod
    def citation(cls) -> str:
        """Its reference. A measure from outside the project (a plugin) cites only what it or its own
        base classes say, never the paper of the study base class it derives from."""
        owner = next((c for c in cls.__mro__ if "reference" in c.__dict__), Measure)
        if owner.__module__.startswith("runner.") and not cls.__module__.startswith("runner."):
            return ""
        return owner.__dict__.get("reference", "")

    precision_checked: ClassVar[dict[str, bool]] = {}
    """Reduced precisions in which its statistics were compared with fp32's, and whether they agreed
    (``plan`` says so)."""

    def problems(self, view: Any) -> list[tuple[tuple | str, str]]:
        """What the rest of the spec makes impossible for this measure, before anything runs:
        ``(key in its [[measure]] table (a name or a path), message)``. ``view`` is what its study
        shows a measure of the spec (:meth:`runner.plugin.study.ViewsMeasures.measure_view`). The engine
        asks every measure of every study (:func:`measure_problems`); the one place a measure checks
        the spec."""
        return []

    @abstractmethod
    def variables(self, b: LayoutBuilder, shape: Shape) -> None:
        """Declare the variables it writes on ``b`` (``b.var(...)``, ``b.axis(...)``), for a run of ``shape``."""
        raise NotImplementedError

    def default_note(self, network: Any) -> str | None:
        """What ``plan`` says of the value a parameter left to its default takes for a resolved
        ``network`` of its study (e.g. a perturbation size set per network); None: nothing."""
        return None

    def mark_not_applicable(self, store: Any, network: int) -> None:
        """Record in the store that this measure does not apply to ``network``: by default nothing
        (its values stay NaN); a measure with outcome flags writes ``not_applicable`` there."""


#: study -> what its networks may have that a measure requires (``tags.requires``) -> how plan says it
_VOCABULARY: dict[str, dict[str, str]] = {}


def vocabulary(study: str, words: dict[str, str] | None = None) -> dict[str, str]:
    """The words ``study`` lets its measures require (``tags.requires``), declared once by the study
    with ``words``: what a network must have, and how ``plan`` says it lacks it."""
    if words is not None:
        _VOCABULARY[study] = dict(words)
    return dict(_VOCABULARY.get(study, {}))


def measure_problems(study: str, spec: Any, view: Any) -> list[tuple[tuple, str]]:
    """Every ``[[measure]]`` entry's :meth:`Measure.problems` on ``view``, located in the spec."""
    registry = measures(study)
    out = []
    for i, m in enumerate(spec.measure):
        instance = registry[m.kind](m)
        for key, message in hook(instance, "problems", lambda: list(instance.problems(view)), _problems_contract):
            out.append((("measure", i, *(key if isinstance(key, tuple) else (key,))), message))
    return out


def _problems_contract(found: list) -> str | None:
    """Why a measure's ``problems`` result is not a list of ``(key, message)`` pairs, or None."""
    for item in found:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], str)
                and isinstance(item[0], (str, tuple))):
            return f"returned {item!r} among its problems; each problem is a (key, message) pair of strings"
    return None


def declare(measure: Measure, builder, *args) -> None:
    """Let ``measure`` declare its variables on ``builder``, citing its own reference (see
    :meth:`Measure.citation`); the study's layout calls this for each ``[[measure]]``."""
    with builder.citing(type(measure).citation()):
        measure.variables(builder, *args)


def hints(*, plot: str | None = None, order: int = 100, headline: tuple[str, str] | None = None,
          overlay: str | None = None, table: str | None = None,
          valid: tuple[str, tuple[str, ...]] | None = None) -> dict[str, Any]:
    """Variable attributes that tell the monitor how to plot it (``order``: its place among the
    plots; ``series``/``log_series``/``histogram`` summarise samples, ``curve`` draws one line per
    network or layer; ``overlay``: a variable drawn over it for one network) and ``show`` how to
    summarise it (``(label, reduction)``, see :data:`REDUCTIONS`; ``table``: the title of a table
    of the headline value's mean and standard deviation over the replicates of each ``model``, as
    papers report accuracies over seeds; ``valid``: ``(outcome variable, meanings)``, the headline
    counts only the samples whose outcome, a flag variable of the same network and sample, is one of
    ``meanings``, and says how many it left out)."""
    out: dict[str, Any] = {"plot_overlay": overlay} if overlay else {}
    if valid is not None:
        assert headline is not None, "valid samples are those the headline counts"
        out["headline_valid"] = [valid[0], list(valid[1])]
    if table is not None:
        assert headline is not None, "a table summarises the headline value"
        out["table"] = table
    if plot is not None:
        assert plot in PLOTS, plot
        out["plot"] = plot
        out["plot_order"] = order
    if headline is not None:
        assert headline[1] in REDUCTIONS, headline
        out["headline"] = list(headline)
    return {f"{INTERNAL}.{k}": v for k, v in out.items()}  # flat keys: hints(...) dicts merge with {**a, **b}


def tag_problems(cls: type[Measure]) -> list[str]:
    """What is wrong with a measure's tags: not a :class:`MeasureTags`, another timing's role tags, a value
    outside its choices, or requiring words its study does not know (:func:`vocabulary`)."""
    tags = getattr(cls, "tags", None)
    if not isinstance(tags, MeasureTags):
        return [f"tags must be a runner.plugin.measures.MeasureTags, not {type(tags).__name__}"]
    problems = tags.problems()
    if not problems and tags.requires:
        known = vocabulary(getattr(cls, "study", ""))
        unknown = [r for r in tags.requires if r not in known]
        if unknown:
            problems = [f"requires {unknown}: the {cls.study} study knows {', '.join(known) or 'no requirements'}"]
    return [f"tags: {p}" for p in problems]


def register(cls: type[Measure]) -> type[Measure]:
    """Class decorator: make a measure available to specs of its study (or of the studies that take its kit).
    Tags of another timing's role, or words its study does not know, are refused here, where the
    plugin author sees them."""
    problems = tag_problems(cls)
    if problems:
        raise TypeError(f"measure {cls.__module__}.{cls.__qualname__}: {'; '.join(problems)}")
    study = cls.study
    # the kinds one spec may name: its study's own, and those of the kits it takes (or, for a kit's
    # measure, of the studies that take the kit)
    shared = [study, *kits(study), *(s for s, taken in _TAKES.items() if study in taken)]
    for other in shared:
        _kinds(other).check(cls.kind(), cls, replaces=cls.replaces)
    return _kinds(study).add(cls.kind(), cls, replaces=cls.replaces)


def _kinds(study: str) -> Registry[type[Measure]]:
    """The measures registered under ``study`` (a study or a kit), by kind."""
    return Registry(f"{study} measure kind", _REGISTRY.setdefault(study, {}))


#: study -> kit it takes -> role -> (type, default) of the parameter a kit's measure names for that role
_TAKES: dict[str, dict[str, dict[str, tuple[Any, Any]]]] = {}
_TAKEN: dict[tuple[type, str], type] = {}


def takes(study: str, kit: str, roles: dict[str, tuple[Any, Any]] | None = None) -> None:
    """Let ``study``'s specs name the measures registered under ``kit``. ``roles``: for each role a
    kit measure's tags may name (``layers``, ...), the type and default of that parameter in this
    study's words (the layer names of its networks), as the study's specs see it."""
    clash = sorted(set(_REGISTRY.get(study, {})) & set(_REGISTRY.get(kit, {})))
    clash = [k for k in clash if not _REGISTRY[study][k].replaces]
    if clash:
        raise TypeError(f"study {study!r} registers kind(s) {clash} of the {kit} kit it takes; rename them, or "
                        "set `replaces = True` on them to replace the kit's")
    _TAKES.setdefault(study, {})[kit] = dict(roles or {})


def kits(study: str) -> list[str]:
    """The kits ``study`` takes (:func:`takes`)."""
    return list(_TAKES.get(study, {}))


def _taken(cls: type[Measure], study: str, roles: dict[str, tuple[Any, Any]]) -> type[Measure]:
    """``cls`` as ``study`` offers it: its table's parameters for ``roles`` typed and defaulted in the
    study's words (the same class when no role applies)."""
    fields = {name: role for role in roles if (name := cls.tags.parameter(role))}
    if not fields:
        return cls
    if (cls, study) not in _TAKEN:
        table = cls.Params
        overrides = {name: (roles[role][0], Field(default_factory=lambda d=roles[role][1]: list(d),
                                                  description=table.model_fields[name].description))
                     for name, role in fields.items()}
        params = create_model(f"{table.__name__}_{study}", __base__=table, __module__=table.__module__,
                              __doc__=table.__doc__, **overrides)
        # pickled as what rebuilds it in another process (a distributed executor's worker), where
        # the study's classes are made again: never by a reference to a class made here
        params.__reduce__ = lambda p, s=study: (_taken_params, (s, p.kind, p.model_dump()))
        taken = type(f"{cls.__name__}_{study}", (cls,), {
            "Params": params, "__module__": cls.__module__, "__doc__": cls.__doc__,
            "__reduce__": lambda m, s=study: (_taken_measure, (s, m.p))})
        _TAKEN[cls, study] = taken
    return _TAKEN[cls, study]


def _taken_params(study: str, kind: str, values: dict) -> MeasureParams:
    return measures(study)[kind].Params.model_validate(values)


def _taken_measure(study: str, params: MeasureParams) -> Measure:
    return measures(study)[params.kind](params)


def measures(study: str) -> dict[str, type[Measure]]:
    """The registered measures of a study (plugins included, :mod:`runner.plugin.loader`)."""
    _load_entry_points()
    out = {kind: _taken(cls, study, roles) for kit, roles in _TAKES.get(study, {}).items()
           for kind, cls in _REGISTRY.get(kit, {}).items()}
    return {**out, **_REGISTRY.get(study, {})}


def params_union(study: str) -> Any:
    """The type of one ``[[measure]]`` entry of ``study``: its registrations' tables, tagged by ``kind``."""
    tables = tuple(m.Params for m in measures(study).values())
    if len(tables) == 1:
        return tables[0]
    return Annotated[Union[tables], Field(discriminator="kind")]  # noqa: UP007


def _load_entry_points() -> None:
    load_plugins()
