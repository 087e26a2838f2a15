"""Plugins that fail loudly and safely: a plugin that cannot be imported, raises or exits is named in
one line (exit 66), and none replaces a built-in measure, study or map by taking its name unless it
says so. In process (the real CLI entry point), with the registries restored after each case."""

from __future__ import annotations

import sys

import pytest

import runner.plugin.loader as loader
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
    saved = ({k: dict(v) for k, v in _REGISTRY.items()}, dict(_STUDIES), dict(MAPS))
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
    for name in [m for m in sys.modules if m.startswith("plugin_case_")]:
        del sys.modules[name]
    loader._loaded = True  # the built-in studies stay imported


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
     "kind 'lyapunov' of the depth study is runner.studies.depth.measures.lyapunov.Lyapunov; give it another "
     "kind, or set `replaces = True`"),
    ("takes a study", "plugin_case_study", {"plugin_case_study": TAKES_DEPTH},
     "the name 'depth' is runner.studies.depth.study.DepthStudy's"),
    ("takes a map", "plugin_case_map", {"plugin_case_map": "from models.registry import register_map\n"
                                                           "register_map('tanh', object)\n"},
     "map 'tanh' is models.maps."),
]


@pytest.mark.parametrize("case, env, modules, message", CASES, ids=[c[0] for c in CASES])
def test_a_failing_plugin_is_named_in_one_line(case, env, modules, message, plugins, in_process, tmp_path):
    plugins(env, **modules)
    spec = tmp_path / "maps.toml"
    spec.write_text(SPEC)
    code, out, err = in_process("plan", spec, "--no-estimate")
    assert code == 66, (out, err)
    assert message in err and err.count("\n") == 1, err
    assert "Traceback" not in err


def test_a_plugin_that_says_it_replaces_a_measure_does(plugins, in_process, tmp_path):
    plugins("plugin_case_replaces", plugin_case_replaces=TAKES_LYAPUNOV.format(replaces="replaces = True"))
    spec = tmp_path / "maps.toml"
    spec.write_text(SPEC)
    code, out, err = in_process("plan", spec, "--no-estimate")
    assert code == 0, err
    assert _REGISTRY["depth"]["lyapunov"].__module__ == "plugin_case_replaces"
