"""tests/ mirrors the code it tests (issue 34): the engine's tests apart from each study's, each
engine layer's tests in the folder named after its package. Pure file system, no imports.

The top-level folders of tests/ (FOLDERS) and what each holds:

- ``runner/``: the engine. ``tests/runner/<layer>/`` holds the tests of the package
  ``runner/<layer>/`` (``core``, ``storage``, ``spec``, ``plugin``, ``checkpointed``, ``data``,
  ``run``, ``run/execute``, ``read``, ``tui``), a package itself (``__init__.py``). Directly in
  ``tests/runner/``: the end-to-end tests of the top modules ``runner/cli.py`` and
  ``runner/api.py`` and the bad-input corpora through them (RUNNER_TOP), and the helpers every
  test folder shares (``conftest.py``, ``helpers.py``, ``pairs.py``, ``s3_server.py``). No study's
  tests: there is no ``tests/runner/studies/``.
- ``depth/``, ``training/``, ``transject/``: one study each (``runner/studies/<name>/``), its
  spec, measures and runs, in process and through the CLI.
- ``analyses/``: the pure measures of ``analyses/``.
- ``models/``: the model families of ``models/``.
- ``figures/``: every study's figures and the ``figures`` command, on tiny stores its conftest
  builds once.
- ``plugins/``: the toy plugins that the plugin tests load (no tests).
- ``golden/``: the pinned plans and values that ``tests/test_golden.py`` compares (no tests).
- ``data/``: small input files (no tests).

Test files directly in ``tests/`` check the repository as a whole (TOP).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"

#: Each top-level folder of tests/ and the package it mirrors (None: it holds no tests of its own
#: package: cross-study figures, or fixtures only).
FOLDERS = {
    "runner": "runner", "depth": "runner/studies/depth", "training": "runner/studies/training",
    "transject": "runner/studies/transject", "analyses": "analyses", "models": "models",
    "figures": None, "plugins": None, "golden": None, "data": None,
}
#: Folders of fixtures: no test file in them.
NO_TESTS = {"plugins", "golden", "data"}
#: Test files directly in tests/runner/, each with what it drives.
RUNNER_TOP = {
    "test_cli.py": "runner/cli.py: exit codes, pipes, every shipped spec planned, in subprocesses",
    "test_api.py": "runner/api.py: the Python API",
    "test_typos.py": "runner/cli.py: suggestions for mistyped commands, names and paths",
    "test_scripting.py": "runner/cli.py: --detailed-exitcode, --json, the documented sweep script",
    "test_launcher.py": "runner/cli.py as the suite's launcher (tests/runner/launcher.py) forks it",
    "test_light_commands.py": "runner/cli.py: commands that compute nothing import no torch, in fresh interpreters",
    "test_gpu_studies.py": "runner/cli.py: every shipped tiny spec applied on CUDA",
    "test_bad_specs.py": "bad-input corpus: specs, through the CLI's entry point",
    "test_bad_paths.py": "bad-input corpus: flags and paths, through the CLI's entry point",
    "test_bad_surfaces.py": "bad-input corpus: the API, store locations, overrides, flags, history, --log-to",
}
#: Test files directly in tests/, each checking the repository as a whole.
TOP = {"test_architecture.py", "test_layers.py", "test_tests_layout.py", "test_golden.py",
       "test_gpu_check.py", "test_bad_input_corpus.py", "test_lazy_imports.py",
       "test_cf_conventions.py", "test_no_reexports.py"}
#: Folders that hold data next to tests, not tests (pytest-textual-snapshot's SVGs, caches).
SKIP = {"__pycache__", "__snapshots__", ".pytest_cache"}


def _folders(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_dir() and not SKIP & set(p.relative_to(TESTS).parts))


def _tests(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("test_*.py") if not SKIP & set(p.relative_to(TESTS).parts))


def _package(path: Path) -> bool:
    return (path / "__init__.py").is_file()


def test_every_top_level_folder_is_known_and_mirrors_its_package():
    found = {p.name for p in TESTS.iterdir() if p.is_dir() and p.name not in SKIP}
    assert found == set(FOLDERS), f"tests/ holds {sorted(found - set(FOLDERS))} (not in FOLDERS), " \
                                  f"lacks {sorted(set(FOLDERS) - found)}"
    for folder, package in FOLDERS.items():
        assert package is None or _package(ROOT / package), f"tests/{folder}/ mirrors {package}/, not a package"
    for folder in NO_TESTS:
        assert not _tests(TESTS / folder), f"tests/{folder}/ holds fixtures, not tests"


def test_each_study_has_its_test_folder_outside_tests_runner():
    studies = {p.name for p in (ROOT / "runner/studies").iterdir() if _package(p)}
    assert studies == {f for f, pkg in FOLDERS.items() if pkg and pkg.startswith("runner/studies/")}
    assert not (TESTS / "runner" / "studies").exists(), "a study's tests go to tests/<study>/"


def test_every_engine_test_folder_mirrors_a_runner_package():
    for folder in _folders(TESTS / "runner"):
        rel = folder.relative_to(TESTS / "runner").as_posix()
        assert _package(ROOT / "runner" / rel), f"tests/runner/{rel}/ mirrors no package runner/{rel}/"
        assert _package(folder), f"tests/runner/{rel}/ needs an __init__.py (basenames clash otherwise)"
    for test in _tests(TESTS / "runner"):
        rel = test.parent.relative_to(TESTS / "runner")
        assert rel.parts or test.name in RUNNER_TOP, (
            f"tests/runner/{test.name}: move it to tests/runner/<layer>/ for the layer it tests "
            "(or to tests/<study>/), or list it in RUNNER_TOP if it drives runner/cli.py or runner/api.py")


def test_test_files_directly_in_tests_are_the_repository_wide_checks():
    found = {p.name for p in TESTS.glob("test_*.py")}
    assert found == TOP, f"unexpected {sorted(found - TOP)}, missing {sorted(TOP - found)}"
