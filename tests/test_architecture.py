"""Dependencies point one way: runner -> analyses, models; analyses and models never import runner
or each other; the monitor only reads (it never imports the code that runs tasks)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


RULES = [
    ("analyses", ("runner", "models")),
    ("runner/data", ("runner.apply", "runner.cli", "runner.spec", "runner.training", "runner.tasks", "runner.store",
                     "runner.tui", "runner.layout", "runner.plan")),
    ("models", ("runner", "analyses")),
    ("runner/tui", ("runner.tasks", "runner.apply", "runner.training.train", "runner.training.measures")),
]


@pytest.mark.parametrize("package, forbidden", RULES, ids=[r[0] for r in RULES])
def test_dependency_direction(package, forbidden):
    offenders = {
        f"{path.relative_to(ROOT)} imports {name}"
        for path in (ROOT / package).rglob("*.py")
        for name in _imports(path)
        if any(name == f or name.startswith(f + ".") for f in forbidden)
    }
    assert not offenders, sorted(offenders)
