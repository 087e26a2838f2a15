"""Plugins that fail loudly and safely: a plugin that cannot be imported, raises or exits is named in
one line (exit 66), and none replaces a built-in measure, study or map by taking its name unless it
says so. In process (the real CLI entry point), with the registries restored after each case."""

from __future__ import annotations

import sys

import pytest

import runner.plugin.loader as loader
import models.registry as families
import runner.data.registry as sources
import runner.run.execute.registry as executors
from models.maps import MAPS
from runner.plugin.measures import _REGISTRY
from runner.plugin.study import _STUDIES

SPEC = """
[experiment]
name = "maps"
[[model]]
name = "tanh"
source = "map:tanh"
[input]
samples = 2
[dynamics]
steps = 10
[[measure]]
kind = "lyapunov"
"""

TAKES_LYAPUNOV = """
from typing import Literal
from runner.plugin.timings import StepMeasure
from runner.studies.depth.measure import DepthParams
from runner.plugin.measures import MeasureTags, register

class Params(DepthParams):
    kind: Literal["lyapunov"]

@register
class Mine(StepMeasure):
    study = "depth"
    Params = Params
    tags = MeasureTags("step")
    {replaces}
    def variables(self, b, shape):
        pass
"""

TAKES_SVCCA = """
from typing import Literal
from runner.plugin.timings import CheckpointMeasure
from runner.plugin.measures import MeasureParams, MeasureTags, register

class Params(MeasureParams):
    kind: Literal["svcca"]

@register
class Mine(CheckpointMeasure):
    study = "training"
    Params = Params
    tags = MeasureTags("checkpoint")
    def variables(self, b, shape):
        pass
"""

TAKES_DEPTH = """
from runner.plugin.study import Study, register
from runner.studies.depth.study import DepthStudy

@register
class Mine(DepthStudy):
    name = "depth"
"""


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    """``set(env, **modules)``: write the modules, point TRANSIENT_PLUGINS at ``env``, and load
    the plugins again when the CLI asks; the registries are restored afterwards."""
    monkeypatch.delenv("TRANSIENT_PLUGINS", raising=False)
    loader.load_plugins()  # the built-in studies and measures, registered before the snapshot
    saved = ({k: dict(v) for k, v in _REGISTRY.items()}, dict(_STUDIES), dict(MAPS), families._FAMILIES.snapshot(),
             sources._SOURCES.snapshot(), executors._EXECUTORS.snapshot(), dict(families._MAPS))
    monkeypatch.syspath_prepend(str(tmp_path))

    def set_up(env: str, **modules: str) -> None:
        for name, text in modules.items():
            (tmp_path / f"{name}.py").write_text(text)
        monkeypatch.setenv("TRANSIENT_PLUGINS", env)
        monkeypatch.setattr(loader, "_loaded", False)

    yield set_up
    _REGISTRY.clear()
    _REGISTRY.update(saved[0])
    _STUDIES.clear()
    _STUDIES.update(saved[1])
    MAPS.clear()
    MAPS.update(saved[2])
    families._MAPS.clear()  # what the map family answers plan from (models.registry.register_map fills both)
    families._MAPS.update(saved[6])
    families._FAMILIES.restore(saved[3])
    sources._SOURCES.restore(saved[4])
    executors._EXECUTORS.restore(saved[5])
    for name in [m for m in sys.modules if m.startswith("plugin_case_")]:
        del sys.modules[name]
    loader._loaded = True  # the built-in studies stay imported


TAKES_FAMILY = """
from models.registry import Family, register_family

class Mine(Family):
    name = "map"
    {replaces}
    def matches(self, source):
        return source.scheme == "mine"

register_family(Mine())
"""

TAKES_SOURCE = """
from runner.data.registry import DataSource, register_data_source

class Mine(DataSource):
    name = "local file"
    scheme = "mine"
    written = "'mine:<x>'"

register_data_source(Mine())
"""

CASES = [
    ("missing", "plugin_case_nowhere", {}, "TRANSIENT_PLUGINS plugin 'plugin_case_nowhere' cannot be loaded: "
                                            "ModuleNotFoundError: No module named 'plugin_case_nowhere'"),
    ("raises", "plugin_case_raises", {"plugin_case_raises": "raise RuntimeError('no licence file')\n"},
     "plugin 'plugin_case_raises' cannot be loaded: RuntimeError: no licence file"),
    ("syntax", "plugin_case_syntax", {"plugin_case_syntax": "def broken(:\n"},
     "plugin 'plugin_case_syntax' cannot be loaded: SyntaxError"),
    ("exits", "plugin_case_exits", {"plugin_case_exits": "import sys\nsys.exit(0)\n"},
     "plugin 'plugin_case_exits' exited (SystemExit 0) while it was imported"),
    ("empty entry", "tests.plugins.toy_measure,,", {}, "has an empty entry"),
    ("file path", "plugins/mine.py", {}, "'plugins/mine.py' is not a module name"),
    ("takes a measure", "plugin_case_measure", {"plugin_case_measure": TAKES_LYAPUNOV.format(replaces="")},
     "depth measure kind 'lyapunov' is runner.studies.depth.measures.lyapunov.Lyapunov's; give "
     "plugin_case_measure.Mine another name, or set `replaces = True` to replace it"),
    ("takes a kit's measure", "plugin_case_kit", {"plugin_case_kit": TAKES_SVCCA},
     "checkpointed measure kind 'svcca' is runner.checkpointed.measures.svcca.SVCCA's; give plugin_case_kit.Mine "
     "another name"),
    ("takes a study", "plugin_case_study", {"plugin_case_study": TAKES_DEPTH},
     "study plugin_case_study.Mine: study 'depth' is runner.studies.depth.study.DepthStudy's; give "
     "plugin_case_study.Mine another name, or set `replaces = True` to replace it"),
    ("takes a map", "plugin_case_map", {"plugin_case_map": "from models.registry import register_map\n"
                                                           "register_map('tanh', object)\n"},
     "map 'tanh' is models.maps."),
    ("exits 1", "plugin_case_exit1", {"plugin_case_exit1": "import sys\nsys.exit(1)\n"},
     "TRANSIENT_PLUGINS plugin 'plugin_case_exit1' exited (SystemExit 1) while it was imported"),
    ("exits with a message", "plugin_case_exitmsg", {"plugin_case_exitmsg": "raise SystemExit('no GPU here')\n"},
     "plugin 'plugin_case_exitmsg' exited (SystemExit 'no GPU here') while it was imported"),
    ("a dependency missing", "plugin_case_dep", {"plugin_case_dep": "import plugin_case_not_installed\n"},
     "plugin 'plugin_case_dep' cannot be loaded: ModuleNotFoundError: No module named 'plugin_case_not_installed'"),
    ("raises without a message", "plugin_case_bare", {"plugin_case_bare": "raise ValueError\n"},
     "plugin 'plugin_case_bare' cannot be loaded: ValueError"),
    ("raises a multi-line message", "plugin_case_lines", {"plugin_case_lines": "raise RuntimeError('first\\nsecond')\n"},
     "plugin 'plugin_case_lines' cannot be loaded: RuntimeError: first"),
    ("a blank entry", " , ", {}, "has an empty entry; give module names separated by commas"),
    ("a trailing comma", "plugin_case_ok,", {"plugin_case_ok": ""}, "has an empty entry"),
    ("a duplicate entry", "plugin_case_ok, plugin_case_ok", {"plugin_case_ok": ""},
     "TRANSIENT_PLUGINS='plugin_case_ok, plugin_case_ok' names 'plugin_case_ok' twice; give each module once"),
    ("a hyphen in the name", "my-plugin", {}, "TRANSIENT_PLUGINS: 'my-plugin' is not a module name"),
    ("a module file", "plugin_case_ok.py", {"plugin_case_ok": ""}, "'plugin_case_ok.py' is not a module name"),
    ("a Windows path", "plugins\\mine", {}, "'plugins\\\\mine' is not a module name"),
    ("takes a family", "plugin_case_family", {"plugin_case_family": TAKES_FAMILY.format(replaces="")},
     "plugin 'plugin_case_family' cannot be loaded: ValueError: model family 'map' is models.registry.MapFamily's; give "
     "plugin_case_family.Mine another name, or set `replaces = True` to replace it"),
    ("takes a data source", "plugin_case_source", {"plugin_case_source": TAKES_SOURCE},
     "plugin 'plugin_case_source' cannot be loaded: ValueError: data source 'local file' is "
     "runner.data.files.LocalFile's; give plugin_case_source.Mine another name, or set `replaces = True`"),
    ("takes an executor", "plugin_case_executor", {"plugin_case_executor": "from runner.run.execute.registry import "
                                                                           "register_executor\n"
                                                                           "register_executor('local', 'mine:Mine')\n"},
     "plugin 'plugin_case_executor' cannot be loaded: ValueError: executor 'local' is "
     "runner.run.execute.local:LocalExecutor's; give mine:Mine another name, or pass replaces=True to replace it"),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case, env, modules, message", CASES, ids=[c[0] for c in CASES])
def test_a_failing_plugin_is_named_in_one_line(case, env, modules, message, plugins, in_process, tmp_path):
    plugins(env, **modules)
    spec = tmp_path / "maps.toml"
    spec.write_text(SPEC)
    code, out, err = in_process("plan", spec, "--no-estimate")
    assert code == 66, (out, err)
    assert message in err and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert not (tmp_path / "store").exists()


#: Every command that loads the plugins refuses a failing one the same way.
COMMANDS = [["plan", "maps.toml", "--no-estimate"], ["apply", "maps.toml", "-q"], ["explain", "lyapunov"],
            ["explain"], ["status", "maps.toml"], ["show", "maps.toml"]]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(a) for a in COMMANDS])
def test_every_command_names_a_failing_plugin(args, plugins, in_process, tmp_path):
    plugins("plugin_case_raises", plugin_case_raises="raise RuntimeError('no licence file')\n")
    (tmp_path / "maps.toml").write_text(SPEC)
    code, out, err = in_process(*args)
    assert code == 66 and err == ("error: TRANSIENT_PLUGINS plugin 'plugin_case_raises' cannot be loaded: RuntimeError: "
                                  "no licence file\n"), (code, out, err)
    assert not (tmp_path / "store").exists()


def test_a_family_that_says_it_replaces_one_does(plugins, in_process, tmp_path):
    plugins("plugin_case_family", plugin_case_family=TAKES_FAMILY.format(replaces="replaces = True"))
    (tmp_path / "maps.toml").write_text(SPEC)
    code, out, err = in_process("plan", "maps.toml", "--no-estimate")
    assert code == 65 and "map:tanh" in err, err  # no family builds map: any more: the spec says so
    assert [f.name for f in families.families()].count("map") == 1


def test_a_plugin_that_says_it_replaces_a_measure_does(plugins, in_process, tmp_path):
    plugins("plugin_case_replaces", plugin_case_replaces=TAKES_LYAPUNOV.format(replaces="replaces = True"))
    spec = tmp_path / "maps.toml"
    spec.write_text(SPEC)
    code, out, err = in_process("plan", spec, "--no-estimate")
    assert code == 0, err
    assert _REGISTRY["depth"]["lyapunov"].__module__ == "plugin_case_replaces"


#: A measure of its own kind whose ``problems`` hook does {body}.
BAD_PROBLEMS = """
from typing import Literal
from runner.plugin.timings import StepMeasure
from runner.studies.depth.measure import DepthParams
from runner.plugin.measures import MeasureTags, register

class Params(DepthParams):
    kind: Literal["bad_problems"]

@register
class Picky(StepMeasure):
    study = "depth"
    Params = Params
    tags = MeasureTags("step")
    def variables(self, b, shape):
        pass
    def problems(self, view):
        {body}
"""

#: A data source of its own scheme whose ``check`` hook does {body}, read as the training corpus.
BAD_CHECK = """
from runner.data.registry import DataSource, register_data_source, DOCUMENTS

class Fussy(DataSource):
    name, scheme, written, gives = "fussy", "fussy", "'fussy:<x>'", frozenset({{DOCUMENTS}})
    def check(self, source, base, form, **options):
        {body}
    def documents(self, source, base, **options):
        return None

register_data_source(Fussy())
"""

HOOK_CASES = [
    ("problems raises", BAD_PROBLEMS.format(body="raise KeyError('steps')"),
     "plugin_case_hook.Picky.problems() raised KeyError: 'steps'"),
    ("problems returns None", BAD_PROBLEMS.format(body="return None"),
     "plugin_case_hook.Picky.problems() raised TypeError"),
    ("problems returns strings", BAD_PROBLEMS.format(body="return ['steps too short']"),
     "plugin_case_hook.Picky.problems() returned 'steps too short' among its problems; each problem is a (key, "
     "message) pair"),
    ("problems returns a bad pair", BAD_PROBLEMS.format(body="return [('k', 3)]"),
     "plugin_case_hook.Picky.problems() returned ('k', 3) among its problems"),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case, module, message", HOOK_CASES, ids=[c[0] for c in HOOK_CASES])
def test_a_failing_measure_hook_is_named_in_one_line(case, module, message, plugins, in_process, tmp_path):
    plugins("plugin_case_hook", plugin_case_hook=module)
    spec = tmp_path / "maps.toml"
    spec.write_text(SPEC + '[[measure]]\nkind = "bad_problems"\n')
    code, out, err = in_process("plan", spec, "--no-estimate")
    assert code == 66, (out, err)
    assert message in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert not (tmp_path / "store").exists()


CHECK_CASES = [("check raises", "raise OSError('the archive is gone')",
                "plugin_case_check.Fussy.check() raised OSError: the archive is gone"),
               ("check returns a list", "return ['no']", "plugin_case_check.Fussy.check() returned ['no']; it returns "
                                                         "None or a message")]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case, body, message", CHECK_CASES, ids=[c[0] for c in CHECK_CASES])
def test_a_failing_data_source_check_is_named(case, body, message, plugins, tmp_path):
    from runner.data.registry import DOCUMENTS, check_data

    plugins("plugin_case_check", plugin_case_check=BAD_CHECK.format(body=body))
    loader.load_plugins()
    with pytest.raises(loader.PluginError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]")):
        check_data("fussy:x", tmp_path, DOCUMENTS)
