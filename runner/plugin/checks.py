"""Conformance checks for measures and studies, as scikit-learn's ``check_estimator`` is for estimators.

:func:`check_measure` verifies one measure against the protocol of :mod:`runner.plugin.measure_protocol`;
:func:`check_study` verifies a study and every measure registered for it. Each raises
:class:`ConformanceError` naming the measure or study and everything wrong with it. A plugin author
runs them in a test of their own::

    from runner.plugin.checks import check_measure
    check_measure(MyMeasure)
"""

from __future__ import annotations

import math
import typing
from pathlib import Path
from typing import Any

import numpy as np

from runner.core.layout import LayoutBuilder, Var
from runner.plugin.measure_protocol import COMPUTE, MeasureTags
from runner.plugin.measures import Measure, MeasureParams, declare, measures, tag_problems
from runner.plugin.timings import BASES
from runner.plugin.study import HasExamples, Study, plan_lines, spec_problems, studies, study_variables
from runner.spec.specfile import SpecError, SpecFile, StudySpec, validate


class ConformanceError(AssertionError):
    """A measure or study that does not follow the protocol; the message lists every problem."""


def _fail(what: str, problems: list[str]) -> None:
    if problems:
        raise ConformanceError(f"{what}:\n" + "\n".join(f"  - {p}" for p in problems))


def _abstract(cls: type, name: str) -> bool:
    """Whether ``cls`` lacks ``name`` or has only a base class's placeholder (marked ``@abstractmethod``)."""
    attr = getattr(cls, name, None)
    return attr is None or getattr(attr, "__isabstractmethod__", False)


class _Sandbox(LayoutBuilder):
    """A builder that declares, as an index of 2, any dimension the study would have declared."""

    def var(self, name, measure, dims, *args, **kwargs):
        for d in dims:
            if d not in self.coords:
                self.index(d, 2)
        super().var(name, measure, dims, *args, **kwargs)


def check_measure(measure: type[Measure] | Measure, shape: Any = None) -> None:
    """Verify that ``measure`` declares valid tags, a ``[[measure]]`` table whose defaults validate, a
    citation, variables that follow the store's conventions, and the compute method its timing requires.

    ``measure``: a class, or an instance when its table has required fields. ``shape``: what its
    ``variables`` is given, for a study that cannot lay out its measures itself (by default the study
    lays it out for its small example, :meth:`runner.plugin.study.Explains.variables_of`)."""
    cls = measure if isinstance(measure, type) else type(measure)
    what = f"measure {cls.__module__}.{cls.__qualname__}"
    problems = tag_problems(cls)
    params, more = _params(cls, measure)
    problems += more
    if not isinstance(getattr(cls, "reference", None), str):
        problems.append("reference (its citation) is no string")
    elif not cls.citation() and cls.__module__.startswith("runner."):
        problems.append("no citation: a built-in measure cites the paper, equation or figure it follows")
    if _abstract(cls, "variables"):
        problems.append("it declares no variables (implement variables(b, shape))")
    tags = getattr(cls, "tags", None)
    if isinstance(tags, MeasureTags) and tags.timing in BASES and not issubclass(cls, BASES[tags.timing]):
        problems.append(f"timing {tags.timing!r}: subclass {BASES[tags.timing].__module__}."
                        f"{BASES[tags.timing].__qualname__}, the base of its timing")
    if isinstance(tags, MeasureTags) and tags.timing in COMPUTE and all(_abstract(cls, m) for m in COMPUTE[tags.timing]):
        problems.append(f"timing {tags.timing!r} needs its compute method {' or '.join(COMPUTE[tags.timing])}(ctx, ...)")
    _fail(what, problems)
    instance = measure if isinstance(measure, Measure) else cls(params)
    _fail(what, [f"variable {p}" for p in _variable_problems(instance, shape)])


def _params(cls: type[Measure], measure) -> tuple[MeasureParams | None, list[str]]:
    table = getattr(cls, "Params", None)
    if not (isinstance(table, type) and issubclass(table, MeasureParams)):
        return None, ["Params (its [[measure]] table) must subclass runner.plugin.measures.MeasureParams"]
    kinds = typing.get_args(table.model_fields["kind"].annotation)
    if len(kinds) != 1 or not isinstance(kinds[0], str):
        return None, ['Params.kind must be Literal["<its kind>"], one string']
    problems = [] if (table.__doc__ or "").strip() else ["Params has no docstring (what `runner explain` shows)"]
    tags = getattr(cls, "tags", None)
    if isinstance(tags, MeasureTags):
        problems += [f"tags name the parameter {p!r}, which Params does not have" for p in tags.parameters()
                     if p not in table.model_fields]
    if not isinstance(measure, type):
        return measure.p, problems
    try:
        return table(kind=kinds[0], **cls.example), problems
    except ValueError as err:
        return None, problems + [f"Params(kind={kinds[0]!r}, **example) does not validate (give every field a "
                                 f"default, or a value in the measure's `example`): {err}"]


def _variable_problems(measure: Measure, shape: Any) -> list[str]:
    """Each study that offers the measure (its own, or each that takes its kit) lays it out for its small
    example (:class:`runner.plugin.study.Explains`) when ``shape`` is None and the study can; else ``variables(b,
    shape)`` runs on a sandbox builder."""
    cls, kind = type(measure), type(measure).kind()
    laid_out = []
    if shape is None:
        found = studies()
        laid_out = [study_variables(found[s](), kind) for s in found
                    if (offered := _registered(s, kind)) is not None and issubclass(offered, cls)]
    if not any(v is not None for v in laid_out):
        b = _Sandbox()
        try:
            declare(measure, b, shape)
        except Exception as err:  # noqa: BLE001 - what fails is the finding
            hint = " (its study cannot lay it out: give check_measure a shape)" if shape is None else ""
            return [f"(all): variables(b, shape) raised {type(err).__name__}: {err}{hint}"]
        laid_out = [[v for v in b.vars.values() if v.measure == kind]]
    if not any(laid_out):
        return [f"(none): it declares no variable written by measure {kind!r}"]
    return sorted({p for variables in laid_out if variables for v in variables for p in var_problems(v)})


def _registered(study: str, kind: str) -> type[Measure] | None:
    return measures(study).get(kind)


#: The units a variable may have where cf_units (UDUNITS-2) is not installed to ask: the dimensionless
#: "1" (counts and nats too) and a few that UDUNITS defines.
PLAIN_UNITS = frozenset({"1", "percent", "s", "m", "kg", "K", "bit", "byte"})
#: Units UDUNITS parses as something else than their author meant.
MISREAD = {"nat": "nano technical atmospheres (a pressure)"}


def units_problem(units: Any) -> str | None:
    """Why ``units`` are not units that UDUNITS parses (asked of cf_units when it is installed; else
    they must be among :data:`PLAIN_UNITS`), or None."""
    if not isinstance(units, str) or not units.strip():
        return f"units {units!r} are no UDUNITS units"
    if units.strip() in MISREAD:
        return (f"units {units!r} are {MISREAD[units.strip()]} to UDUNITS; a quantity in nats is '1' ('(nats)' in "
                "long_name)")
    try:
        import cf_units  # lazy: cf_units (optional: the test extra installs it)
    except ImportError:
        known = units in PLAIN_UNITS
    else:
        try:
            parsed = cf_units.Unit(units)
            known = not parsed.is_no_unit() and not parsed.is_unknown()
        except ValueError:
            known = False
    if known:
        return None
    return (f"units {units!r} are no UDUNITS units: a count (of steps, epochs, tokens) or a quantity in nats is "
            "'1', with what it counts or per what in long_name ('(steps)', 'per step', '(nats per token)')")


def var_problems(v: Var) -> list[str]:
    """How a variable breaks the store's conventions: units (UDUNITS units, ``"1"`` for counts and nats;
    none on strings, booleans and flags), NaN for missing floats, CF flags on categorical integers, a
    long name, a description and ACDD's coverage_content_type."""
    out, a = [], v.attrs
    textual = v.dtype is str or np.dtype(v.dtype).kind in "bOUS"
    kind = "U" if v.dtype is str else np.dtype(v.dtype).kind
    for key in ("long_name", "description", "coverage_content_type"):
        if not a.get(key):
            out.append(f"{key} is empty")
    if a.get("units") and not textual and (problem := units_problem(a["units"])):
        out.append(problem)
    if textual and "units" in a:
        out.append("a string or boolean variable has no units")
    if kind == "f" and not (isinstance(v.fill, float) and math.isnan(v.fill)):
        out.append(f"a float variable's missing value is NaN, not {v.fill!r}")
    if "flag_values" in a or "flag_meanings" in a:
        values, meanings = a.get("flag_values"), str(a.get("flag_meanings", "")).split()
        if kind not in "iu" or not isinstance(values, list) or len(values) != len(meanings):
            out.append("flags are an integer variable's flag_values with one flag_meanings word each")
        if "units" in a:
            out.append("a categorical (flag) variable has no units")
    elif kind in "iu" and np.dtype(v.dtype).itemsize == 1:
        out.append("an int8 variable is categorical: give flag_values and flag_meanings (runner.core.layout.flags)")
    elif kind in "iuf" and not a.get("units"):
        out.append("a numeric variable has units ('1' for a pure number)")
    return [f"{v.name}: {p}" for p in out]


def check_study(study, spec: dict | None = None, shape: Any = None) -> None:
    """Verify that ``study`` (a :class:`runner.plugin.study.Study` class or instance) has a spec model with a
    ``[[measure]]`` union of its registered measures, that a minimal spec (``spec``, default its
    :meth:`~runner.plugin.study.HasExamples.example_spec`) validates, plans to tasks with unique ids whose measures are
    registered, and lays out variables that follow the store's conventions, and that every measure
    registered for it passes :func:`check_measure` (given ``shape``)."""
    instance = study() if isinstance(study, type) else study
    if not isinstance(instance, Study):
        _fail(f"study {type(instance).__name__!r}", ["it does not subclass runner.plugin.study.Study"])
    what = f"study {instance.name!r}"
    problems = []
    model = instance.spec_model()
    if not (isinstance(model, type) and issubclass(model, StudySpec)):
        problems.append("spec_model() is no runner.spec.specfile.StudySpec")
    elif "measure" not in model.model_fields:
        problems.append("its spec has no [[measure]] list (list[params_union(<study>)])")
    registered = measures(instance.name)
    if not registered:
        problems.append("no measure is registered for it")
    data = spec if spec is not None else instance.example_spec() if isinstance(instance, HasExamples) else None
    if data is None:
        problems.append("no example_spec(): a minimal spec to plan (declare HasExamples)")
    _fail(what, problems)
    data = {**data, "experiment": {**data.get("experiment", {}), "study": instance.name}}
    sf = SpecFile(Path("<check>"), "", data, located=False)
    try:
        spec = validate(model, sf)
        problems = spec_problems(instance, spec, sf)
        if problems:
            raise SpecError(sf.path, problems)
        prepared = instance.prepare(spec, sf)
    except Exception as err:  # noqa: BLE001 - what fails is the finding
        _fail(what, [f"its minimal spec does not plan: {type(err).__name__}: {err}"])
    ids = [t.id for t in prepared.tasks]
    problems += [] if ids else ["the minimal spec plans no task"]
    problems += [f"task id {i} is planned twice" for i in sorted({i for i in ids if ids.count(i) > 1})]
    problems += [f"the plan names measure {t.measure!r}, which is not registered" for t in prepared.tasks
                 if t.measure in {m.kind for m in prepared.spec.measure} and t.measure not in registered]
    try:
        lines = plan_lines(prepared)
        problems += [] if all(isinstance(x, str) for x in lines) else ["describe() returns lines that are no strings"]
    except Exception as err:  # noqa: BLE001
        problems.append(f"describe() fails: {type(err).__name__}: {err}")
    _fail(what, problems)
    for kind, cls in registered.items():
        if cls.study == instance.name:
            check_measure(cls, shape)
