"""The Study contract (issue 52, item 2): a small core every study has, and capabilities a study
declares by subclassing them, checked at ``register``; the engine asks ``isinstance``, never for a
method by name or by identity against the base class."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from runner.core.estimate import Estimates
from runner.plugin import study as contract
from runner.plugin.study import (
    CAPABILITIES,
    Describes,
    Prepared,
    Shards,
    Study,
    example_specs,
    extensions_of,
    flag_problem,
    plan_fields,
    plan_lines,
    register,
    split_group,
    study_variables,
    worker_session,
)

ROOT = Path(__file__).resolve().parents[3]


def _core_members() -> set[str]:
    return {n for n in [*vars(Study), *Study.__annotations__] if not n.startswith("_")}


def test_the_core_has_at_most_ten_members_and_two_methods_to_write():
    assert len(_core_members()) <= 10, sorted(_core_members())
    assert Study.__abstractmethods__ == {"prepare", "open"}
    assert not _core_members() & {m for members in CAPABILITIES.values() for m in members}


class _Plain(Study):
    """A study with the core alone (never registered)."""

    name = "plain"
    spec_factory = staticmethod(lambda: None)

    def prepare(self, spec, sf):
        return Prepared(self, spec, sf, [], [])

    def open(self, p, device, say):
        return ("session", p, device)


def test_a_study_with_the_core_alone_gets_what_the_engine_does_without_each_capability():
    study = _Plain()
    p = study.prepare(None, None)
    assert study.description == "A study with the core alone (never registered)."
    assert plan_lines(p) == [] and plan_fields(p) == {} and example_specs(study) == []
    assert study_variables(study, "anything") is None
    assert split_group(p, [], 2) is None and extensions_of(p, {"t": ["s"]}, {}) == {}
    assert worker_session(p, "cpu", "store") == ("session", p, "cpu")  # opened as in the driver
    assert contract.contract_problems(_Plain) == []


def test_a_declared_capability_is_what_the_engine_calls():
    class Told(_Plain, Describes):
        def describe(self, p):
            return ["told"]

    assert plan_lines(Told().prepare(None, None)) == ["told"]


@pytest.mark.parametrize("body, bases, message", [
    ("pass", (Shards,), "declares Shards but does not implement split"),
    ("def split(self, p, group, shards): return None", (), "has split but does not declare Shards"),
    ("def estimate(self, p, device, precision, calibrated): return [], []", (),
     "has estimate but does not declare Estimates"),
    ("pass", (contract.DrawsFigures,), "declares DrawsFigures but does not implement figure_recipes"),
])
def test_register_refuses_a_study_that_breaks_its_declaration(body, bases, message):
    namespace: dict = {}
    exec(f"def members():\n    {body}\n    return locals()", namespace)  # noqa: S102 - the members of the class
    cls = type("Broken", (_Plain, *bases), {"__module__": "plugin_case", **namespace["members"]()})
    with pytest.raises(TypeError, match=f"study plugin_case.Broken: .*{message}"):
        register(cls)


def test_register_refuses_a_study_without_its_core():
    class Nameless(Study):
        def prepare(self, spec, sf):
            return None

    with pytest.raises(TypeError, match="Nameless: it gives no `name`; it gives no `spec_factory`; "
                                        "it does not implement open()"):
        register(Nameless)


def test_a_flag_applies_to_the_studies_with_its_capability():
    depth, training = (cls() for cls in (contract.studies()["depth"], contract.studies()["training"]))
    assert isinstance(depth, Shards) and not isinstance(training, Shards)
    assert flag_problem(depth, "--shards") is None
    assert flag_problem(training, "--shards").startswith("--shards applies only to studies that split their "
                                                        "passes into sample shards (depth)")
    assert isinstance(training, Estimates) and flag_problem(training, "--calibrate") is None


def test_prepared_is_generic_in_its_state():
    p: Prepared[list[int]] = Prepared[list[int]](_Plain(), None, None, [], [], state=[1, 2])
    assert p.state == [1, 2]


# ---------------------------------------------------------------- no probes of studies in the engine

def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | \
        {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def _on_study(node: ast.AST) -> bool:
    """A ``getattr``/``hasattr`` call whose object names a study or a session."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
            and bool(node.args) and any("study" in n.lower() or "session" in n.lower() for n in _names(node.args[0])))


def _probes(path: Path) -> list[str]:
    """Each ``getattr``/``hasattr`` on a study or session, and each identity test of what one gives."""
    tree = ast.parse(path.read_text(), str(path))
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    found = []
    for node in ast.walk(tree):
        if _on_study(node):
            found.append(f"{where}:{node.lineno} {ast.unparse(node)}")
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops) \
                and any(_on_study(side) for side in [node.left, *node.comparators]):
            found.append(f"{where}:{node.lineno} identity: {ast.unparse(node)}")
    return found


def test_the_engine_probes_no_study_by_name_or_identity():
    engine = [p for p in sorted((ROOT / "runner").rglob("*.py")) if p.relative_to(ROOT).parts[1] != "studies"]
    assert len(engine) > 50  # the scan sees the engine's modules
    assert [c for p in engine for c in _probes(p)] == []


def test_the_scan_finds_a_probe(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f(p, session, cls):\n"
                      "    a = getattr(session, 'attach', None)\n"
                      "    b = hasattr(p.study, 'split')\n"
                      "    c = getattr(cls, 'tags', None)\n"
                      "    return getattr(cls, 'split') is not getattr(Study, 'split')\n")
    assert sorted(line.split(" ", 1)[0].rsplit(":", 1)[1] for line in _probes(sample)) == ["2", "3", "5", "5"]


def test_an_unknown_study_is_named_with_the_closest_known_one():
    from runner.spec.specfile import SpecError, SpecFile

    sf = SpecFile(Path("s.toml"), "", {"experiment": {"name": "x", "study": "deptj"}}, located=False)
    with pytest.raises(SpecError, match=r"unknown study 'deptj'; known: (.*, )?depth, training, transject.*"
                                        r"\(did you mean 'depth'\?\)"):
        contract.study_for(sf)
