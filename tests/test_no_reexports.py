"""No re-export shim: a name is imported from the module that defines it (issue 52).

``from runner.a import name`` where ``runner.a`` only imported ``name`` from another module of the
project hides the real call path (from readers and tools) and keeps a shim alive. The one exception
is a module that declares the name in its ``__all__``: a deliberate public face (the plugin API of
:mod:`runner.plugin.measures` gathers the measure protocol's tags). Packages' ``__init__`` modules
are faces by nature and are not checked. Read with ast, for every source and test file.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("runner", "models", "analyses")
IMPORTERS = (*PACKAGES, "tests", "benchmarks", "scripts")


@cache
def _borrowed(root: Path, module: str) -> dict[str, str]:
    """The names ``module`` (a project module, not a package) binds at its top level by importing them
    from another project module, less those its ``__all__`` declares: name -> the module it came from."""
    path = root.joinpath(*module.split(".")).with_suffix(".py")
    if not path.exists():
        return {}
    tree = ast.parse(path.read_text())
    declared: set[str] = set()
    borrowed = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] in PACKAGES:
            borrowed.update({alias.asname or alias.name: node.module for alias in node.names})
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
            declared |= {e.value for e in getattr(node.value, "elts", []) if isinstance(e, ast.Constant)}
    return {name: home for name, home in borrowed.items() if name not in declared}


def _shim_imports(root: Path, path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] in PACKAGES:
            borrowed = _borrowed(root, node.module)
            out += [f"{path.relative_to(root)}:{node.lineno}: {alias.name} from {node.module}; its home is "
                    f"{borrowed[alias.name]}" for alias in node.names if alias.name in borrowed]
    return out


def test_every_name_is_imported_from_its_home():
    found = [line for folder in IMPORTERS for path in sorted((ROOT / folder).rglob("*.py"))
             for line in _shim_imports(ROOT, path)]
    assert not found, "\n".join(found)


def test_the_check_finds_a_shim(tmp_path):
    """A module that imports a name only to hand it on is found; declared in ``__all__`` it is not."""
    package = tmp_path / "runner"
    package.mkdir()
    (package / "home.py").write_text("def f():\n    pass\n")
    (package / "shim.py").write_text("from runner.home import f\n")
    (package / "face.py").write_text("from runner.home import f\n__all__ = ['f']\n")
    (package / "user.py").write_text("from runner.shim import f\nfrom runner.face import f as g\n")
    assert _shim_imports(tmp_path, package / "user.py") == ["runner/user.py:1: f from runner.shim; its home is "
                                                             "runner.home"]
