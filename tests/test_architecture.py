"""Dependencies point one way: studies -> engine, analyses, models; the engine names no study;
studies do not import each other; analyses and models never import the runner (nor each other,
for analyses); the data layer and the monitor stay on their side."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STUDIES = sorted(p.name for p in (ROOT / "runner" / "studies").iterdir() if (p / "__init__.py").exists())


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _engine_files() -> list[Path]:
    return [p for p in (ROOT / "runner").rglob("*.py") if "studies" not in p.relative_to(ROOT / "runner").parts]


def _offenders(paths, forbidden) -> set[str]:
    return {f"{path.relative_to(ROOT)} imports {name}" for path in paths for name in _imports(path)
            if any(name == f or name.startswith(f + ".") for f in forbidden)}


RULES = [
    ("analyses", ("runner", "models")),
    ("models", ("runner", "analyses")),
    ("runner/data", ("runner.apply", "runner.cli", "runner.studies", "runner.execute", "runner.store", "runner.tui",
                     "runner.plan", "runner.study")),
    ("runner/tui", ("runner.studies", "runner.execute", "runner.apply")),
]


@pytest.mark.parametrize("package, forbidden", RULES, ids=[r[0] for r in RULES])
def test_dependency_direction(package, forbidden):
    assert not _offenders((ROOT / package).rglob("*.py"), forbidden)


def test_the_engine_imports_no_study():
    assert not _offenders(_engine_files(), ("runner.studies",))


@pytest.mark.parametrize("study", STUDIES)
def test_studies_do_not_import_each_other(study):
    others = tuple(f"runner.studies.{s}" for s in STUDIES if s != study)
    assert not _offenders((ROOT / "runner" / "studies" / study).rglob("*.py"), others)


def test_there_are_three_studies():
    assert STUDIES == ["depth", "training", "transject"]
