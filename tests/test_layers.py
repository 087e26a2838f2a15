"""The import structure is a checked contract: import-linter's contracts in pyproject.toml, and no
import cycle anywhere between the project's modules, function-level imports included (grimp reads
every import statement of a module, wherever it sits)."""

from __future__ import annotations

from pathlib import Path

import grimp
from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("runner", "models", "analyses")


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # recursion depth is bounded by the number of modules (about 200)
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.find_modules_directly_imported_by(v)):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return sorted(found)


def test_the_import_contracts_hold():
    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True) == 0


def test_no_module_imports_itself_back_through_others():
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    assert import_cycles(graph) == []
    # a planted import closing a circle (the write guard importing the store) is found, with its modules
    graph.add_import(importer="runner.storage.store_errors", imported="runner.storage.store")
    assert any({"runner.storage.store", "runner.storage.store_errors"} <= set(c) for c in import_cycles(graph))


def test_the_architecture_picture_lists_the_layers_of_the_contract():
    import re
    from runner.core import toml

    config = toml.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in config if c["type"] == "layers"]
    text = (ROOT / "docs" / "architecture.md").read_text()
    picture = re.search(r"<!-- layers:.*?-->\n```\n(.*?)```\n<!-- end layers -->", text, re.S).group(1)
    drawn = [re.split(r"\s{2,}", line.strip())[0] for line in picture.splitlines() if line.strip()]
    assert drawn == layers
    top = {p.name.removesuffix(".py") for p in (ROOT / "runner").iterdir()
           if p.suffix == ".py" or (p.is_dir() and any(p.glob("*.py")))}  # not a folder left with caches only
    assert top == {"__init__", *(n for layer in layers for n in layer.split(" | "))}  # nothing outside a layer
