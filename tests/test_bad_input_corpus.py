"""The bad-input corpus over every study (issue 22): at least 300 cases, each run with a time limit
so that a hang fails instead of stalling the suite."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "training"))  # its corpus imports suite_helpers, as pytest lets it

CORPORA = ("tests.runner.test_bad_specs", "tests.training.test_bad_inputs", "tests.transject.test_bad_inputs",
           "tests.runner.test_bad_paths")


def _cases(module) -> int:
    return sum(len(v) for k, v in vars(module).items()
               if k.isupper() and isinstance(v, list) and v and isinstance(v[0], tuple))


def test_the_corpus_covers_every_study_with_300_cases_or_more():
    counts = {name: _cases(importlib.import_module(name)) for name in CORPORA}
    assert all(counts.values()), counts
    assert sum(counts.values()) >= 300, counts


@pytest.mark.parametrize("name", CORPORA[1:])
def test_each_case_runs_with_a_time_limit(name):
    module = importlib.import_module(name)
    tests = [f for k, f in vars(module).items() if k.startswith("test_") and hasattr(f, "pytestmark")
             and any(m.name == "parametrize" and "case" in str(m.args[0]) for m in f.pytestmark)]  # over the cases
    assert tests and all(any(m.name == "timeout" for m in f.pytestmark) for f in tests), name


#: The corpus of the newer surfaces (issue 40): overrides, flags, store URLs, the Python API,
#: history, --log-to and plugins.
SURFACES = ("tests.runner.test_bad_surfaces", "tests.runner.plugin.test_plugin_failures")


def test_the_surfaces_corpus_has_150_cases_or_more_each_with_a_time_limit():
    counts = {name: _cases(importlib.import_module(name)) for name in SURFACES}
    assert all(counts.values()) and sum(counts.values()) >= 150, counts
    for name in SURFACES:
        module = importlib.import_module(name)
        tables = {k for k, v in vars(module).items() if k.isupper() and isinstance(v, list) and v
                  and isinstance(v[0], tuple)}
        over = [f for k, f in vars(module).items() if k.startswith("test_") and hasattr(f, "pytestmark")
                and any(m.name == "parametrize" and set(map(id, m.args[1:2])) & {id(vars(module)[t]) for t in tables}
                        for m in f.pytestmark)]  # the tests over a table of cases
        assert len(over) == len(tables), (name, tables, over)  # every table drives a test
        assert all(any(m.name == "timeout" for m in f.pytestmark) for f in over), name


#: The corpus of the plug-in hooks (issue 50): a data source's readers, identity and check, registrations,
#: a SimpleStudy's hooks and table; each case a line naming the plug-in.
PLUGIN_HOOKS = "tests.runner.plugin.test_plugin_hooks"


def test_the_plugin_hooks_corpus_has_80_cases_or_more_each_with_a_time_limit():
    module = importlib.import_module(PLUGIN_HOOKS)
    assert _cases(module) >= 80, _cases(module)
    tests = [f for k, f in vars(module).items() if k.startswith("test_") and hasattr(f, "pytestmark")
             and any(m.name == "parametrize" for m in f.pytestmark)]
    assert tests and all(any(m.name == "timeout" for m in f.pytestmark) for f in tests)
