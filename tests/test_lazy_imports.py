"""Function-level imports only for heavy or optional dependencies, each saying which (issue 34).

An ``import`` inside a function (or method) of ``runner``, ``models``, ``analyses`` or ``store`` is
allowed only where the module it imports brings, when imported, a HEAVY or OPTIONAL third-party
package that the importing module does not already bring at module level; the import then says
which on its first line: ``# lazy: torch, xarray`` (words may follow: a reason). Every other
import sits at the top of its module. "Brings" is the closure over module-level imports (``if
TYPE_CHECKING:`` blocks excluded), read with ast from the project's sources; a third-party package
is a leaf, known by its top-level name, bringing what :data:`VIA` lists besides itself. The import
graph's shape (layers, cycles) is tests/test_layers.py's business, not this file's.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from runner.core import toml

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("runner", "models", "analyses", "store")  # store/ holds experiment stores, no Python today

#: Third-party packages whose import takes noticeable time: at least ~30 ms, measured as the sum of
#: ``python -X importtime -c "<import as the code writes it>"`` over the modules it loads, less the
#: interpreter's own start, best of 3, on the 2-core development machine (milliseconds in brackets).
HEAVY = {
    "torch",  # 792
    "transformers",  # 463
    "datasets",  # 489
    "sklearn",  # 720 (import sklearn), 902 (from sklearn.manifold import Isomap)
    "xarray",  # 293
    "zarr",  # 182
    "scipy",  # 50 (import scipy), 450 (from scipy.stats import bootstrap)
    "matplotlib",  # 115 (import matplotlib), 271 (matplotlib.pyplot)
    "textual",  # 69 (import textual), 130 (textual.app)
    "textual_plotext",  # 128
    "pyarrow",  # 71 (import pyarrow), 72 (pyarrow.parquet)
    "huggingface_hub",  # 94-135 for the names the code uses (try_to_load_from_cache, HfApi, snapshot_download)
    "fsspec",  # 50
    "filelock",  # 58 (from filelock import FileLock: it loads asyncio)
    "pydantic",  # 57 (from pydantic import BaseModel, Field, model_validator)
    "numpy",  # 45
}
# Light, measured the same way: rich 26 (rich.console), psutil 13, tokenizers 8, platformdirs 5,
# conllu 4, tomli 2 (before Python 3.14), tomli_w 0, safetensors 0 (its torch and numpy modules: see VIA).

#: The packages of pyproject's extras that a plain install lacks (import name: its extra).
OPTIONAL = {
    "spacy": "spacy",
    "ray": "ray",
    "mlflow": "tracker",  # the distribution is mlflow-skinny
    "sqlalchemy": "tracker",
    "alembic": "tracker",
    "s3fs": "s3",
    "cf_units": "test",  # UDUNITS, for the units check of runner.plugin.checks (compliance-checker brings it)
}

#: The other HEAVY or OPTIONAL packages a third-party module loads when imported (measured:
#: ``python -c "import X, sys; print(sys.modules)"``), so that a module with torch at the top is not
#: told that numpy is lazy for it. A module not listed brings its own top-level package only.
VIA = {
    "torch": {"numpy"},
    "transformers": {"filelock", "huggingface_hub", "numpy"},
    "datasets": {"filelock", "fsspec", "huggingface_hub", "numpy", "pyarrow"},
    "sklearn": {"numpy", "pyarrow", "scipy"},
    "xarray": {"numpy", "pyarrow"},
    "zarr": {"fsspec", "numpy"},
    "scipy": {"numpy"},
    "matplotlib": {"numpy"},
    "textual_plotext": {"textual"},
    "pyarrow": {"numpy"},
    "ray": {"filelock"},
    "mlflow": {"numpy", "pyarrow", "pydantic", "scipy"},
    "s3fs": {"fsspec"},
    "safetensors.torch": {"numpy", "torch"},  # safetensors itself is light
    "safetensors.numpy": {"numpy"},
}


LAZY = HEAVY | set(OPTIONAL)
COMMENT = re.compile(r"#\s*lazy:\s*([\w.]+(?:\s*,\s*[\w.]+)*)")  # then, optionally, a reason in words


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    statement: str
    advice: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: `{self.statement}`: {self.advice}"


class Modules:
    """The modules of some in-tree packages, by dotted name, and what each brings at import."""

    def __init__(self, root: Path, packages: tuple[str, ...]):
        self.root = root
        self.packages = packages
        self.paths: dict[str, Path] = {}
        for package in packages:
            for path in sorted((root / package).rglob("*.py")):
                parts = path.relative_to(root).with_suffix("").parts
                self.paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
        self.trees = {name: ast.parse(path.read_text(), str(path)) for name, path in self.paths.items()}
        self._brings: dict[str, frozenset[str]] = {}

    def in_tree(self, module: str) -> bool:
        return module.split(".")[0] in self.packages

    def package_of(self, name: str) -> str:
        return name if self.paths[name].name == "__init__.py" else name.rpartition(".")[0]

    def targets(self, importer: str, node: ast.Import | ast.ImportFrom) -> list[str]:
        """The modules an import statement of ``importer`` runs, parents included ("a.b" runs "a")."""
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                package = self.package_of(importer).split(".")
                package = package[:len(package) - node.level + 1]
                base = ".".join(package + ([base] if base else []))
            names = [base] + [f"{base}.{alias.name}" for alias in node.names
                              if f"{base}.{alias.name}" in self.paths or f"{base}.{alias.name}" in VIA]
        out = []
        for name in names:
            parts = name.split(".")
            out += [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
        return list(dict.fromkeys(out))

    def brings_of_target(self, module: str) -> set[str]:
        top = module.split(".")[0]
        if top == "__future__" or top in sys.stdlib_module_names:
            return set()
        if self.in_tree(module):
            return set(self.brings(module)) if module in self.paths else set()
        return {top} | VIA.get(module, set())

    def brings_of(self, importer: str, node: ast.Import | ast.ImportFrom) -> set[str]:
        return set().union(*(self.brings_of_target(t) for t in self.targets(importer, node)))

    def brings(self, module: str) -> frozenset[str]:
        """The third-party packages importing ``module`` loads: its module-level imports' closure."""
        if module not in self._brings:
            seen, todo, found = {module}, [module], set()
            while todo:
                current = todo.pop()
                for node in module_level_imports(self.trees[current]):
                    for target in self.targets(current, node):
                        if not self.in_tree(target):
                            found |= self.brings_of_target(target)
                        elif target in self.paths and target not in seen:
                            seen.add(target)
                            todo.append(target)
            self._brings[module] = frozenset(found)
        return self._brings[module]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(node: ast.AST, in_function: bool, type_checking: bool):
    """(import node, inside a function, inside an ``if TYPE_CHECKING:`` block) for every import."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, in_function, type_checking
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield from _walk(ast.Module(body=[stmt], type_ignores=[]), in_function, True)
            for stmt in child.orelse:
                yield from _walk(ast.Module(body=[stmt], type_ignores=[]), in_function, type_checking)
        else:
            yield from _walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                       ast.Lambda)), type_checking)


def module_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    return [node for node, in_function, type_checking in _walk(tree, False, False)
            if not in_function and not type_checking]


def function_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    return [node for node, in_function, type_checking in _walk(tree, False, False)
            if in_function and not type_checking]


def check(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES, skip=lambda relative: False) -> list[Violation]:
    """Every function-level import that should be at module level, or whose ``# lazy:`` comment is
    missing or names a package it does not bring lazily; and every ``# lazy:`` comment left on a
    module-level import."""
    modules = Modules(root, packages)
    found = []
    for name, path in modules.paths.items():
        relative = path.relative_to(root).as_posix()
        if skip(relative):
            continue
        lines = path.read_text().splitlines()
        tree = modules.trees[name]
        has = modules.brings(name)
        for node in module_level_imports(tree):
            if COMMENT.search(lines[node.lineno - 1]):
                found.append(Violation(relative, node.lineno, lines[node.lineno - 1].strip(),
                                       "a module-level import is not lazy: remove its `# lazy:` comment"))
        for node in function_level_imports(tree):
            statement = ast.unparse(node)
            lazy = sorted((modules.brings_of(name, node) - has) & LAZY)
            # to write: those not loaded by another of them (``zarr``, not ``fsspec, zarr``)
            main = sorted(set(lazy) - set().union(*(VIA.get(p, set()) for p in lazy)))
            comment = COMMENT.search(lines[node.lineno - 1])
            named = [p.strip() for p in comment.group(1).split(",") if p.strip()] if comment else []
            write = f"`# lazy: {', '.join(main)}`"
            if not lazy:
                found.append(Violation(relative, node.lineno, statement, (
                    f"it brings nothing heavy or optional that {name} lacks at module level: "
                    "hoist it to the module's imports" + (f" (and drop `# lazy: {comment.group(1)}`)" if comment else ""))))
            elif not comment:
                found.append(Violation(relative, node.lineno, statement, (
                    f"it brings {', '.join(lazy)}, which {name} does not bring at module level: "
                    f"write {write} on its first line (or hoist it, if loading them there is fine)")))
            elif not named or not set(named) <= set(lazy):
                wrong = sorted(set(named) - set(lazy)) or ["nothing"]
                found.append(Violation(relative, node.lineno, statement, (
                    f"its comment names {', '.join(wrong)}, which it does not bring lazily: write {write}")))
    return found


def test_function_level_imports_are_for_heavy_or_optional_packages_and_say_which():
    found = check()
    assert not found, "\n" + "\n".join(map(str, found))


def test_the_optional_packages_are_those_of_the_extras_a_plain_install_lacks():
    project = toml.loads((ROOT / "pyproject.toml").read_text())["project"]

    def names(requirements):
        return {re.split(r"[<>=\[ ;]", r, maxsplit=1)[0].lower() for r in requirements}

    distribution = {"mlflow": "mlflow-skinny", "cf_units": "cf-units"}
    extras = project["optional-dependencies"]
    for package, extra in OPTIONAL.items():
        assert distribution.get(package, package) in names(extras[extra])
        assert distribution.get(package, package) not in names(project["dependencies"])
    assert not (HEAVY & set(OPTIONAL))


# ------------------------------------------------------------------ the checker finds what it should


PLANTED = {
    "pkg/__init__.py": "",
    "pkg/light.py": "import json\n\nimport rich\n",
    "pkg/heavy.py": "import torch\n",
    "pkg/via.py": "from .heavy import torch as _torch\n",
    "pkg/has_torch.py": (
        "import torch\n\n\n"
        "def f():\n"
        "    from pkg import heavy  # lazy: torch\n"  # 5: torch is already there: hoist
    ),
    "pkg/user.py": (
        "from typing import TYPE_CHECKING\n\n"
        "if TYPE_CHECKING:\n"
        "    import xarray\n\n\n"
        "def f():\n"
        "    from pkg import light\n"  # 8: a bare lazy import of a light module
        "    from pkg import heavy  # lazy: torch\n"  # 9: fine
        "    from pkg import via  # lazy: xarray\n"  # 10: a lying comment
        "    import torch\n"  # 11: no comment
        "    import json\n"  # 12: stdlib
        "    import xarray  # lazy: xarray\n"  # 13: fine (TYPE_CHECKING does not count)
        "    from pkg.heavy import (  # lazy: torch\n"  # 14: fine, the comment on the first line
        "        torch as t)\n\n\n"
        "class C:\n"
        "    def m(self):\n"
        "        import ray  # lazy: ray\n"  # 20: fine, optional
        "        from safetensors.torch import load  # lazy: torch\n"  # 21: fine, via
        "        from safetensors import safe_open  # lazy: safetensors\n"  # 22: light
        "        from .light import json  # lazy: json\n"  # 23: a lying comment
    ),
    "pkg/top.py": "import torch  # lazy: torch\n",  # 1: a module-level import is not lazy
}


def test_the_checker_flags_a_light_lazy_import_a_lying_comment_and_a_missing_one(tmp_path):
    for relative, text in PLANTED.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    found = {(v.path, v.line): v.advice for v in check(tmp_path, ("pkg",), skip=lambda _: False)}
    assert sorted(found) == [("pkg/has_torch.py", 5), ("pkg/top.py", 1), ("pkg/user.py", 8), ("pkg/user.py", 10),
                             ("pkg/user.py", 11), ("pkg/user.py", 12), ("pkg/user.py", 22), ("pkg/user.py", 23)]
    assert "hoist" in found["pkg/user.py", 8] and "hoist" in found["pkg/user.py", 12]
    assert "hoist" in found["pkg/has_torch.py", 5] and "drop `# lazy: torch`" in found["pkg/has_torch.py", 5]
    assert "names xarray" in found["pkg/user.py", 10] and "`# lazy: torch`" in found["pkg/user.py", 10]
    assert "`# lazy: torch`" in found["pkg/user.py", 11]
    assert "hoist" in found["pkg/user.py", 22]
    assert "names json" in found["pkg/user.py", 23] or "hoist" in found["pkg/user.py", 23]
    assert "remove its `# lazy:` comment" in found["pkg/top.py", 1]
    # skipped files are not read
    assert not check(tmp_path, ("pkg",), skip=lambda relative: True)
