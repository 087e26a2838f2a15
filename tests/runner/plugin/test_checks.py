"""The measure protocol's conformance checks (runner/plugin/checks.py): every registered measure and study
passes them, plugins included, and each check fails a measure or study broken on purpose, saying why."""

from __future__ import annotations

import importlib
import sys
from abc import abstractmethod
from types import SimpleNamespace
from typing import Literal

import numpy as np
import pytest
from pydantic import Field

from runner.plugin.checks import ConformanceError, check_measure, check_study
from runner.core.layout import flags
from runner.plugin.measure_protocol import (
    CONTEXTS,
    CheckpointShape,
    CheckpointTags,
    MeasureTags,
    StepShape,
    StepTags,
    Suites,
    Twin,
)
from runner.plugin.measures import Measure, MeasureParams, measures, register
from runner.plugin.study import studies
from runner.plugin.timings import CheckpointMeasure

#: The plugins of tests/plugins/ that register measures or studies (tests/runner/plugin/test_plugins.py loads them
#: through TRANSIENT_PLUGINS in the CLI; here each is imported, which registers it the same way, and
#: unregistered afterwards, so that no other test sees it).
#: Each plugin and what it registers: (measures, studies).
REGISTERS = {"tests.plugins.toy_measure": (True, False), "tests.plugins.toy_study": (True, True),
             "tests.plugins.toy_checkpointed": (False, True)}
PLUGINS = tuple(REGISTERS)
#: Shapes for plugin studies that do not lay out their measures.
SHAPES = {"walk": SimpleNamespace(names=["walkers"], steps=20, samples=5)}
#: Minimal specs of the plugin studies (the built-in ones give theirs, HasExamples.example_spec).
SPECS = {"walk": {"experiment": {"name": "w"}, "walk": {"walkers": 10, "steps": 4}, "measure": [{"kind": "msd"}]},
         "chain": {"experiment": {"name": "d"}, "measure": [{"kind": "entropy"}]}}

BUILT_IN = sorted({(study, kind) for study in studies() for kind in measures(study)})


def test_the_built_in_studies_are_all_checked():
    assert {"depth", "training", "transject"} <= set(studies())
    assert {("depth", "lyapunov"), ("training", "svcca"), ("transject", "svcca"), ("transject", "entropy")} <= set(BUILT_IN)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("study, kind", BUILT_IN, ids=[f"{s}:{k}" for s, k in BUILT_IN])
def test_every_registered_measure_conforms(study, kind):
    check_measure(measures(study)[kind])


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", sorted(studies()))
def test_every_study_conforms(name):
    check_study(studies()[name])


@pytest.fixture
def registered_plugin():
    """Import a plugin module (again), yield what it registered, then unregister it."""
    import sys

    import runner.plugin.measures
    import runner.plugin.study

    saved = ({k: dict(v) for k, v in runner.plugin.measures._REGISTRY.items()}, dict(runner.plugin.study._STUDIES))

    originals = {}

    def load(module: str) -> tuple[dict, dict]:
        if module in sys.modules:  # imported again as a new module; the one other tests hold is put back after
            originals[module] = sys.modules.pop(module)
        importlib.import_module(module)
        new = {(s, k): c for s, reg in runner.plugin.measures._REGISTRY.items() for k, c in reg.items() if c.__module__ == module}
        return new, {n: c for n, c in runner.plugin.study._STUDIES.items() if c.__module__ == module}

    yield load
    sys.modules.update(originals)
    runner.plugin.measures._REGISTRY.clear()
    runner.plugin.measures._REGISTRY.update(saved[0])
    runner.plugin.study._STUDIES.clear()
    runner.plugin.study._STUDIES.update(saved[1])


@pytest.mark.timeout(30)
@pytest.mark.parametrize("module", PLUGINS)
def test_every_plugin_measure_and_study_conforms(module, registered_plugin):
    new_measures, new_studies = registered_plugin(module)
    assert (bool(new_measures), bool(new_studies)) == REGISTERS[module], (module, new_measures, new_studies)
    for (study, _), cls in new_measures.items():
        check_measure(cls, SHAPES.get(study))
    for name, cls in new_studies.items():
        check_study(cls, SPECS[name], SHAPES.get(name))


def _members(protocol) -> set[str]:
    """What a Protocol names: its (and its protocol bases') annotations and methods."""
    names: set[str] = set()
    for base in protocol.__mro__:
        if base.__module__ not in ("typing", "builtins"):
            names |= set(getattr(base, "__annotations__", {})) | {n for n, v in vars(base).items()
                                                                  if callable(v) and not n.startswith("_")}
    return names


def _provided(cls) -> set[str]:
    """What instances of ``cls`` have: its attributes, dataclass fields, and every ``self.<name> = ...``."""
    import ast
    import inspect
    import textwrap

    names = set(dir(cls)) | set(getattr(cls, "__dataclass_fields__", {}))
    for c in cls.__mro__[:-1]:
        for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(c)))):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and getattr(node.value, "id", "") == "self":
                names.add(node.attr)
    return names


def test_the_studies_contexts_and_shapes_satisfy_the_protocols():
    """Each study's own context has every member its timing's protocol (and the study's own extension of
    it) names; each study's shape has what its shape protocol names."""
    from runner.checkpointed.measure import ActivationContext
    from runner.studies.depth.iterate import IteratePass
    from runner.studies.depth.measure import DepthShape, Derivation, PassContext, PassNetworkContext
    from runner.studies.training.context import Context
    from runner.studies.training.measure import TrainingShape
    from runner.studies.transject.measure import EpochContext
    from runner.studies.transject.measure import TransJectShape
    from runner.studies.transject.session import TransJectSession

    cases = [(CONTEXTS["step"], IteratePass), (PassContext, IteratePass), (CONTEXTS["checkpoint"], Context),
             (ActivationContext, Context), (CONTEXTS["checkpoint"], TransJectSession), (EpochContext, TransJectSession),
             (ActivationContext, TransJectSession), (CONTEXTS["network"], PassNetworkContext),
             (CONTEXTS["derived"], Derivation), (StepShape, DepthShape), (CheckpointShape, TrainingShape),
             (CheckpointShape, TransJectShape)]
    for protocol, cls in cases:
        assert _members(protocol), protocol
        assert not _members(protocol) - _provided(cls), (protocol.__name__, cls.__name__)


# --------------------------------------------------------------------------- broken on purpose

class ToyParams(MeasureParams):
    """A toy measure's table."""

    kind: Literal["toy"]
    every: int = Field(1, ge=1)


class Toy(CheckpointMeasure):
    """A measure that passes every check; each test below breaks one thing of a subclass."""

    study, Params, tags, reference = "nowhere", ToyParams, MeasureTags("checkpoint"), "a toy's own definition"

    def variables(self, b, shape) -> None:
        b.var("toy", "toy", ("network", "checkpoint"), "float64", np.nan, "toy value", "1", "what a toy writes")

    def run(self, ctx, task) -> None:
        ctx.write("toy", task, 0.0)


def test_the_toy_passes():
    check_measure(Toy)


def test_a_study_that_takes_a_kit_registers_none_of_its_kinds_unless_it_replaces_them():
    from runner.plugin import measures as registry

    class Clash(Toy):
        """A kind of the checkpointed kit, registered under a study without replacing it."""

        study = "clashing"

        @classmethod
        def kind(cls):
            return "svcca"

    registry._REGISTRY.setdefault("clashing", {})["svcca"] = Clash
    try:
        with pytest.raises(TypeError, match=r"study 'clashing' registers kind\(s\) \['svcca'\] of the checkpointed kit"):
            registry.takes("clashing", "checkpointed")
        assert "clashing" not in registry._TAKES
    finally:
        registry._REGISTRY.pop("clashing", None)


def _broken(**attrs) -> type[Measure]:
    return type("Broken", (Toy,), {"__module__": __name__, **attrs})


def _var(*args, **extra):
    def variables(self, b, shape):
        b.var(*args, **extra)
    return variables


def _with_units(variables):  # LayoutBuilder.var drops units on strings and booleans: set them behind its back
    def declare(self, b, shape):
        variables(self, b, shape)
        b.vars["toy"].attrs["units"] = "1"
    return declare


BROKEN = {
    "tags are no MeasureTags": (dict(tags={"timing": "checkpoint"}), "tags must be a runner.plugin.measures.MeasureTags"),
    "an unknown timing": (dict(tags=MeasureTags("epoch")), "timing 'epoch' is none of step, checkpoint"),
    "a step tag on a checkpoint measure": (dict(tags=MeasureTags("checkpoint", step=StepTags(twin=Twin()))),
                                           "step tags apply to timing 'step' only, not 'checkpoint'"),
    "a bad shard": (dict(tags=MeasureTags("step", step=StepTags(shard="tokens"))),
                    "shard 'tokens' is none of samples, combine"),
    "an exit period that is no period": (dict(tags=MeasureTags("step", step=StepTags(exit_period=0))),
                                         "exit_period 0 is no period (an int >= 1, a parameter name or None)"),
    "a twin that is no Twin": (dict(tags=MeasureTags("step", step=StepTags(twin=True))), "twin is a Twin() or None, not True"),
    "its timing's tags of another role": (dict(tags=MeasureTags("checkpoint", checkpoint=StepTags())),
                                          "checkpoint is a CheckpointTags(...), not StepTags("),
    "a note on an extension it does not declare": (dict(tags=MeasureTags("step", step=StepTags(extend_note="x"))),
                                                   "extend_note 'x' without extends=True"),
    "suites that are no Suites": (dict(tags=MeasureTags("checkpoint", checkpoint=CheckpointTags(suites=True))),
                                  "suites is a Suites(...) or None, not True"),
    "a derived measure without its source": (dict(tags=MeasureTags("derived")), "a derived measure names its source"),
    "a role that is no parameter": (dict(tags=MeasureTags("checkpoint", checkpoint=CheckpointTags(layers="tau"))),
                                    "tags name the parameter 'tau', which Params does not have"),
    "Params that are no MeasureParams": (dict(Params=dict), "Params (its [[measure]] table) must subclass"),
    "Params without a default": (dict(Params=type("P", (ToyParams,), {"__annotations__": {"path": str},
                                                                       "__doc__": "P", "__module__": __name__})),
                                 "does not validate (give every field a default, or a value in the measure's `example`)"),
    "Params without a docstring": (dict(Params=type("P", (ToyParams,), {"__module__": __name__})),
                                   "Params has no docstring"),
    "a citation that is no string": (dict(reference=None), "reference (its citation) is no string"),
    "no variables": (dict(variables=Measure.variables), "it declares no variables"),
    "no compute method": (dict(run=abstractmethod(lambda self, ctx, task: None)), "timing 'checkpoint' needs its compute method run(ctx, ...)"),
    "no variable of its own": (dict(variables=_var("other", "other", ("network",), "float64", np.nan, "x", "1", "d")),
                               "declares no variable written by measure 'toy'"),
    "units on a boolean": (dict(variables=_with_units(_var("toy", "toy", ("network",), "bool", False, "x", None, "d"))),
                           "toy: a string or boolean variable has no units"),
    "a sentinel for missing floats": (dict(variables=_var("toy", "toy", ("network",), "float64", -1.0, "x", "1", "d")),
                                      "toy: a float variable's missing value is NaN, not -1.0"),
    "an int8 outcome without flags": (dict(variables=_var("toy", "toy", ("network",), "int8", -1, "x", None, "d")),
                                      "toy: an int8 variable is categorical: give flag_values and flag_meanings"),
    "flags that do not match": (dict(variables=_var("toy", "toy", ("network",), "int8", -1, "x", None, "d",
                                                    **{**flags("a", "b"), "flag_meanings": "a"})),
                                "toy: flags are an integer variable's flag_values with one flag_meanings word each"),
    "units on flags": (dict(variables=_var("toy", "toy", ("network",), "int8", -1, "x", "1", "d", **flags("a", "b"))),
                       "toy: a categorical (flag) variable has no units"),
    "a number without units": (dict(variables=_var("toy", "toy", ("network",), "float64", np.nan, "x", None, "d")),
                               "toy: a numeric variable has units ('1' for a pure number)"),
    "no long name": (dict(variables=_var("toy", "toy", ("network",), "float64", np.nan, "", "1", "d")),
                     "toy: long_name is empty"),
    "steps as units": (dict(variables=_var("toy", "toy", ("network",), "float64", np.nan, "x", "steps", "d")),
                       "toy: units 'steps' are no UDUNITS units: a count (of steps, epochs, tokens) or a quantity in "
                       "nats is '1'"),
    "units per step": (dict(variables=_var("toy", "toy", ("network",), "float64", np.nan, "x", "1/step", "d")),
                       "toy: units '1/step' are no UDUNITS units"),
    "nats as units": (dict(variables=_var("toy", "toy", ("network",), "float64", np.nan, "x", "nats/token", "d")),
                      "toy: units 'nats/token' are no UDUNITS units"),
    "no coverage content type": (dict(variables=_var("toy", "toy", ("network",), "float64", np.nan, "x", "1", "d",
                                                     coverage_content_type="")),
                                 "toy: coverage_content_type is empty"),
    "variables that fail": (dict(variables=lambda self, b, shape: shape.steps),
                            "variables(b, shape) raised AttributeError"),
}


@pytest.mark.parametrize("why", BROKEN)
def test_a_broken_measure_fails_with_a_clear_message(why):
    attrs, message = BROKEN[why]
    with pytest.raises(ConformanceError, match="measure tests.runner.plugin.test_checks.Broken") as err:
        check_measure(_broken(**attrs))
    assert message in str(err.value)


def test_a_built_in_measure_cites_its_source():
    with pytest.raises(ConformanceError, match="no citation: a built-in measure cites"):
        check_measure(_broken(reference="", __module__="runner.studies.nowhere"))


def test_a_depth_measure_requires_only_what_the_study_knows():
    broken = type("Broken", (Toy,), {"__module__": __name__, "study": "depth",
                                     "tags": MeasureTags("checkpoint", requires=("gpu",))})
    with pytest.raises(ConformanceError, match=r"requires \['gpu'\]: the depth study knows tokens, attention"):
        check_measure(broken)


def test_register_refuses_tags_of_another_timing():
    with pytest.raises(TypeError, match="step tags apply to timing 'step' only, not 'checkpoint'"):
        register(_broken(tags=MeasureTags("checkpoint", step=StepTags())))


def test_tags_nest_by_role():
    """A field that applies to one timing exists only in that timing's tags: no rule relates two fields."""
    tags = MeasureTags("step", step=StepTags(strides=("tau",), twin=Twin(in_key=False), exit_period="tau"))
    assert tags.checkpoint is None and tags.derived is None and tags.role() is tags.step
    assert tags.parameters() == ["tau", "tau"] and not tags.problems()
    assert MeasureTags("checkpoint").checkpoint == CheckpointTags() and MeasureTags("network").role() is None
    with pytest.raises(TypeError):
        StepTags(suites=Suites())  # a checkpoint field has no place in a step measure's tags


def test_a_broken_study_fails_with_a_clear_message(registered_plugin):
    _, found = registered_plugin("tests.plugins.toy_study")
    walk = found["walk"]
    with pytest.raises(ConformanceError, match="no example_spec"):
        check_study(walk)
    with pytest.raises(ConformanceError, match="its minimal spec does not plan: .*walkers"):
        check_study(walk, {"experiment": {"name": "w"}, "walk": {"walkers": 0}, "measure": [{"kind": "msd"}]})
    twice = type("Twice", (walk,), {"prepare": lambda self, spec, sf: _twice(walk().prepare(spec, sf))})
    with pytest.raises(ConformanceError, match="task id .* is planned twice"):
        check_study(twice, SPECS["walk"])


def _twice(prepared):
    prepared.tasks = prepared.tasks * 2
    return prepared


def test_units_are_those_udunits_parses_and_a_fixed_set_without_cf_units(monkeypatch):
    from runner.plugin.checks import PLAIN_UNITS, units_problem

    pytest.importorskip("cf_units", reason="cf_units (the test extra) asks UDUNITS-2")
    assert units_problem("1") is None and units_problem("m s-1") is None and units_problem("count") is None
    assert all(units_problem(u) for u in ("steps", "1/step", "nats", "nats/token", "tokens", "epochs", "", None))
    assert "a pressure" in units_problem("nat")  # UDUNITS reads nano technical atmospheres
    monkeypatch.setitem(sys.modules, "cf_units", None)  # not installed: import raises ImportError
    assert all(units_problem(u) is None for u in PLAIN_UNITS)
    assert units_problem("m s-1") and units_problem("steps")


def test_a_kit_measure_a_study_offers_pickles_into_a_fresh_process(tmp_path):
    """A plan's measure tables travel to a distributed executor's workers: a kit measure specialised for
    a study (its own default layers) is rebuilt there as that study's, not as a class of this process."""
    import pickle
    import subprocess
    import sys

    svcca = measures("training")["svcca"]
    (tmp_path / "p.pkl").write_bytes(pickle.dumps(svcca(svcca.Params(kind="svcca", compare="layers"))))
    code = ("import pickle, sys; from runner.plugin.measures import measures; "
            "m = pickle.loads(open(sys.argv[1], 'rb').read()); s = measures('training')['svcca']; "
            "assert type(m) is s and type(m.p) is s.Params and m.p.layers == ['embedding', 'lstm1', 'lstm2'], m; "
            "print(m.p.compare)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "p.pkl")], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "layers", out.stderr
