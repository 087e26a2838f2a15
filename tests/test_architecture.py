"""Dependencies point one way: studies -> engine, analyses, models; the engine names no study;
studies do not import each other; analyses and models never import the runner (nor each other,
for analyses); the data layer and the monitor stay on their side."""

from __future__ import annotations

import ast
import re
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
    ("runner/data", ("runner.run.apply", "runner.cli", "runner.studies", "runner.run.execute", "runner.storage.store", "runner.tui",
                     "runner.core.plan", "runner.plugin.study")),
    ("runner/tui", ("runner.studies", "runner.run.execute", "runner.run.apply")),
    ("runner/run/execute", ("runner.run.apply", "runner.cli", "runner.api")),  # executors only submit and poll
]


@pytest.mark.parametrize("package, forbidden", RULES, ids=[r[0] for r in RULES])
def test_dependency_direction(package, forbidden):
    code = list((ROOT / package).rglob("*.py"))
    assert code, f"{package} holds no module: the rule checks nothing"
    assert not _offenders(code, forbidden)


def test_the_engine_imports_no_study():
    assert not _offenders(_engine_files(), ("runner.studies",))


@pytest.mark.parametrize("study", STUDIES)
def test_studies_do_not_import_each_other(study):
    others = tuple(f"runner.studies.{s}" for s in STUDIES if s != study)
    assert not _offenders((ROOT / "runner" / "studies" / study).rglob("*.py"), others)


def test_each_study_folder_registers_the_study_of_its_name():
    """A built-in study is a folder under runner/studies that registers itself: adding one needs no
    edit of this file."""
    from runner.plugin.study import studies

    builtin = {name: cls for name, cls in studies().items() if cls.__module__.startswith("runner.studies.")}
    assert sorted(builtin) == STUDIES and len(STUDIES) >= 3
    assert all(cls.__module__.split(".")[2] == name for name, cls in builtin.items())


# --------------------------------------------------------------------------- the engine names no study

#: Not scanned: the data layer (``runner/data``) implements data sources by the names of the data
#: it reads (``scaffold:``, ListOps, CoNLL-U corpora): that is its job, and the rules above keep it
#: from importing any study. Everything else under ``runner/`` outside ``runner/studies`` is the
#: engine, the monitor (``runner/tui``) and the training-as-time kit (``runner/checkpointed``) included.
NOT_ENGINE = ("studies", "data")
#: The kit's own measures (``runner/checkpointed/measures``) name themselves and the papers they
#: follow, as every measure does; they still name no study (:func:`test_the_kits_measures_name_no_study`).
KIT_MEASURES = ("checkpointed", "measures")

#: Measure and family names that are also ordinary words the engine uses in its own sense. Each
#: is allowed for the reason given; no other name of a registered plugin may appear in the engine.
GENERIC = {
    "map": "the dynamical-map protocol and Python's map (the family is named after the protocol)",
    "loss": "the training-time loss curves the kit declares (train_loss, val_loss)",
    "layers": "the kit's layer axis",
    "trajectory": "a pass's trajectory key, which plans and completion records carry",
}


def engine_sources() -> dict[str, str]:
    """path -> text of every engine module."""
    return {str(p.relative_to(ROOT)): p.read_text() for p in (ROOT / "runner").rglob("*.py")
            if p.relative_to(ROOT / "runner").parts[0] not in NOT_ENGINE
            and p.relative_to(ROOT / "runner").parts[:2] != KIT_MEASURES}


def test_the_kits_measures_name_no_study():
    """A measure of the kit applies to every study that takes it: it names no study and no table only
    some studies have (its own name and its paper's are its business)."""
    names = {**plugin_names(), "name": []}
    sources = {p: p.read_text() for p in (ROOT / "runner" / Path(*KIT_MEASURES)).glob("*.py")}
    assert len(sources) >= 3
    offenders = {str(p): uses for p, text in sources.items() if (uses := study_name_uses(text, names))}
    assert not offenders
    assert study_name_uses(sources[ROOT / "runner" / "checkpointed" / "measures" / "svcca.py"] + '\nif study == "training":',
                           names)


def plugin_names() -> dict[str, list[str]]:
    """What may not appear in the engine, by kind: the registered studies, the tables only some
    studies have, their measures, the model families and reference maps, the suites' model types."""
    from models.registry import families
    from models.suites import ADAPTERS
    from runner.plugin.measures import measures
    from runner.plugin.study import studies

    registered = studies()
    tables = [set(cls().tables()) for cls in registered.values()]
    # shared: the tables every built-in study has (a plugin study loaded by another test, with tables
    # of its own only, does not make them study-specific)
    builtin = [set(cls().tables()) for cls in registered.values() if cls.__module__.startswith("runner.studies.")]
    shared = set.intersection(*builtin) | {"experiment", "measure"}
    return {
        "study": sorted(registered),
        "table": sorted(set.union(*tables) - shared),
        "name": sorted({k for s in registered for k in measures(s)} | {f.name for f in families()}
                       | {m for f in families() for m in getattr(f, "maps", {})}
                       | {t for a in ADAPTERS for t in a.model_types}),
    }


def study_name_uses(text: str, names: dict[str, list[str]]) -> list[str]:
    """Where ``text`` names a study, a table only some studies have, or a measure or family.

    A study's name is also an ordinary word ("training", a recursion's "depth"), so it counts where
    it names the study: a string that is just the name, ``studies.<name>``, "<name> study" or
    "<name> pass". A table counts as ``[table]``, ``[[table]]``, ``[table.sub]`` or an override (``table.key=``).
    A measure or family counts as a whole word anywhere (code, strings, comments), in any case,
    unless it is in :data:`GENERIC`."""
    import re

    found = []
    for name in names["study"]:
        pattern = rf"""(["']{name}["']|\bstudies\.{name}\b|\b{name}[ -](study|studies|pass|passes)\b)"""
        found += [m.group(0) for m in re.finditer(pattern, text, re.IGNORECASE)]
    for table in names["table"]:
        found += [m.group(0) for m in re.finditer(rf"\[\[?{table}[\].]|(?<![\w.]){table}\.[a-z_]+=", text)]
    for name in names["name"]:
        if name not in GENERIC:
            found += [m.group(0) for m in re.finditer(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text, re.IGNORECASE)]
    return found


def test_the_engine_names_no_study_measure_or_family():
    names = plugin_names()
    assert {"depth", "training", "transject"} <= set(names["study"]) and "dynamics" in names["table"]
    assert {"lyapunov", "svcca", "albert", "tanh", "gpt_neox"} <= set(names["name"])
    sources = engine_sources()
    assert {"runner/cli.py", "runner/tui/app.py", "runner/checkpointed/loop.py"} <= set(sources)
    offenders = {path: uses for path, text in sources.items() if (uses := study_name_uses(text, names))}
    assert not offenders


@pytest.mark.parametrize("planted", [
    'if study == "depth":', "from runner.studies.transject import spec", "# as the training study does",
    'help="override [dynamics] device"', "--set dynamics.steps=1000", "kinds = ('lyapunov', 'svcca')",
    "\"\"\"e.g. tiny-ALBERT\"\"\"", "source == 'map:tanh'", "model_type == 'gpt_neox'"])
def test_the_name_check_finds_a_planted_name(planted):
    clean = engine_sources()["runner/run/apply.py"]
    assert not study_name_uses(clean, plugin_names())
    assert study_name_uses(clean + "\n" + planted + "\n", plugin_names())


def test_generic_words_are_allowed_only_as_words():
    names = plugin_names()
    assert all(word in names["name"] for word in GENERIC), "an allowed word no plugin uses any more: drop it"
    assert not study_name_uses("def expand(key, depth: int = 0):  # the training loop's map of losses", names)


# --------------------------------------------------------------------------- the depth core names no measure

#: The depth study's figure recipes, and the comparison of two runs on the paper's statistics, read
#: their measures' stored variables by name: that is their job.
DEPTH_RECIPES = ("figures.py", "readout_figures.py", "spectrum_figures.py", "agreement.py")
#: Measure ids that are also words of the depth core in its own sense.
DEPTH_WORDS = {
    "trajectory": "a pass's trajectory key (task ids hash it)",
    "attention": "what a network has (attention heads), a word of tags.requires",
}


def depth_core_measure_names(text: str, ids: list[str]) -> list[str]:
    """The measure ids that a module's string literals name (docstrings and other bare strings aside)."""
    import re

    tree = ast.parse(text)
    bare = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
               and id(n) not in bare]
    return [k for s in strings for k in ids if k not in DEPTH_WORDS and re.search(rf"(?<![\w-]){k}(?![\w-])", s)]


def _depth_ids() -> list[str]:
    from runner.plugin.measures import measures

    return sorted(measures("depth"))


def test_the_depth_core_names_no_measure():
    """Outside ``measures/`` (and its readers of stored variables) the depth study reads what a measure declares
    (its tags, its methods), never its id: no string of its code names one."""
    ids = _depth_ids()
    assert {"lyapunov", "pca", "trajectory", "transient_chaos"} <= set(ids)
    core = [p for p in (ROOT / "runner" / "studies" / "depth").glob("*.py") if p.name not in DEPTH_RECIPES]
    assert len(core) > 8
    offenders = {p.name: uses for p in core if (uses := depth_core_measure_names(p.read_text(), ids))}
    assert not offenders


@pytest.mark.parametrize("planted", ['tau = m.tau if m.kind == "lyapunov" else 1', 'window = spec.measures().get("pca")',
                                     'SOURCES = {"transient_chaos": "lyapunov"}'])
def test_the_depth_core_check_finds_a_planted_measure_id(planted):
    clean = (ROOT / "runner" / "studies" / "depth" / "study.py").read_text()
    assert not depth_core_measure_names(clean, _depth_ids())
    assert depth_core_measure_names(clean + "\n" + planted + "\n", _depth_ids())


def table_probes(text: str) -> list[str]:
    """Reads of a ``[[measure]]`` table's field by a name the code guesses (``getattr(m, "layers", [])``)."""
    return re.findall(r"getattr\((?:m|meas|measure|entry)\s*,\s*[\"'][a-z_]+[\"']", text)


def test_no_study_probes_a_measure_table_by_name():
    """A study reads a measure's table through what the measure declares (its tags name the parameters
    that hold its networks, references, layers, tag sets and data: ``MeasureTags.named``)."""
    code = [p for p in (ROOT / "runner").rglob("*.py") if "measures" not in p.parts]
    offenders = {str(p.relative_to(ROOT)): found for p in code if (found := table_probes(p.read_text()))}
    assert not offenders
    assert table_probes('layers = getattr(m, "layers", [])') and table_probes("getattr(meas, 'networks', None)")


def test_the_readme_is_short_to_read():
    """A newcomer finds the spec format in its first 80 lines; no line is wider than 100 columns
    (tables and code blocks included)."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert lines.index("## A spec") < 80
    assert not [n for n, line in enumerate(lines, 1) if len(line) > 100]
    assert "## Measures" in lines and "make test" in "\n".join(lines[:20])


def test_one_toml_reader():
    """Specs, overrides and stored specs are read by one reader, runner/core/toml.py (tomllib where its
    errors have a line and column, tomli before), never by tomli or tomllib beside it; tomli is a
    dependency only on the Pythons whose tomllib lacks them."""
    code = [p for d in ("runner", "models", "analyses", "tests") for p in (ROOT / d).rglob("*.py")]
    reader = ROOT / "runner" / "core" / "toml.py"
    assert not [str(p) for p in code if p != reader and
                re.search(r"^\s*(import|from) (tomllib|tomli)\b", p.read_text(), re.M)]
    from runner.core import toml

    deps = toml.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert [d for d in deps if re.match(r"tomli\b(?!-w)", d)] == ["tomli>=2.1; python_version < '3.14'"]
