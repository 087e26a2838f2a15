"""Commands that compute nothing answer at once (issue 53, item 2): on a finished store, ``apply``
(nothing to run), ``status``, ``show``, ``verify`` and ``history`` import neither torch, transformers
nor datasets, and ``apply`` of the finished quickstart spec spends little CPU time. Each command runs
as a user's does, ``python -m runner.cli`` in a fresh interpreter (the suite's launcher forks its
commands from one that has torch loaded: tests/runner/launcher.py), on stores the session applies
once (``shipped_store``): the quickstart's, and a tiny spec's of each other study for ``apply``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.runner.helpers import RUNNER, cli_env

HEAVY = ("torch", "transformers", "datasets")

#: A ``sitecustomize`` that makes the heavy packages unimportable in the child: an import of one is
#: written to ``TRANSIENT_TEST_HEAVY_LOG`` (so that an import the code catches is seen too) and raises
#: ImportError naming it.
BLOCKER = textwrap.dedent(f"""
    import importlib.abc
    import os
    import sys


    class _Blocked(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in {HEAVY!r}:
                with open(os.environ["TRANSIENT_TEST_HEAVY_LOG"], "a") as log:
                    log.write(name + "\\n")
                raise ImportError(f"{{name}} is blocked: a command that computes nothing must not import it")
            return None


    sys.meta_path.insert(0, _Blocked())
    """)


def finished_run(shipped_store, name: str) -> tuple[Path, Path, Path]:
    """(spec, store, cache) of a finished shipped run: the spec apply_run wrote beside its store."""
    store = shipped_store(name)
    return store.parent / f"{name}.toml", store, store.parent / "cache"


@pytest.fixture(scope="module")
def finished(shipped_store) -> tuple[Path, Path, Path]:
    return finished_run(shipped_store, "quickstart")


def fresh(args, cwd: Path, cache: Path, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    """``runner ARGS`` in a fresh interpreter: its result and the CPU seconds (user + system) it took,
    from its own resource usage (``os.wait4``)."""
    out, err = cwd / "stdout", cwd / "stderr"
    with out.open("w") as o, err.open("w") as e:
        proc = subprocess.Popen([*RUNNER, *map(str, args)], cwd=cwd, stdout=o, stderr=e,
                                env=cli_env(cwd, TRANSIENT_CACHE=str(cache), **env))
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    result = subprocess.CompletedProcess(proc.args, proc.returncode, out.read_text(), err.read_text())
    return result, usage.ru_utime + usage.ru_stime


def blocked_env(tmp_path: Path) -> dict[str, str]:
    site = tmp_path / "blocker"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "TRANSIENT_TEST_HEAVY_LOG": str(tmp_path / "heavy.log")}


def test_the_blocker_blocks(tmp_path):
    env = {**os.environ, **blocked_env(tmp_path)}
    result = subprocess.run([sys.executable, "-c", "import torch"], env=env, capture_output=True, text=True)
    assert result.returncode == 1 and "torch is blocked" in result.stderr
    assert (tmp_path / "heavy.log").read_text() == "torch\n"


@pytest.mark.slow
@pytest.mark.parametrize("command", [
    "apply",
    "status",
    "show",
    "verify",
    "history",
    "plan",  # nothing to run: no threads to choose, no device time to estimate
])
def test_a_command_on_a_finished_store_imports_no_torch(finished, tmp_path, command):
    spec, store, cache = finished
    target = spec if command in ("apply", "plan") else store
    result, _ = fresh([command, target], tmp_path, cache, **blocked_env(tmp_path))
    log = tmp_path / "heavy.log"
    imported = log.read_text().split() if log.exists() else []
    assert not imported, f"`runner {command}` imported {sorted(set(imported))}:\n{result.stderr[-3000:]}"
    assert result.returncode == 0, result.stderr
    if command == "apply":
        assert "nothing to do" in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("name", ["lstm_tiny", "transject_tiny"])  # the training and TransJect studies
def test_apply_of_each_studys_finished_spec_imports_no_torch(shipped_store, tmp_path, name):
    spec, _, cache = finished_run(shipped_store, name)
    result, _ = fresh(["apply", spec], tmp_path, cache, **blocked_env(tmp_path))
    log = tmp_path / "heavy.log"
    assert not log.exists(), f"`runner apply` imported {sorted(set(log.read_text().split()))}:\n{result.stderr[-3000:]}"
    assert result.returncode == 0 and "nothing to do" in result.stdout, result.stderr


@pytest.mark.slow
def test_apply_of_a_finished_spec_takes_little_cpu_time(finished, tmp_path):
    """Issue 53's target is <= 1 s of CPU on the 2-core development machine (importing xarray, zarr,
    numpy and pydantic alone takes about 0.75 s there); the bound is generous for slower machines.
    Measured there, 5 runs: 0.81-0.93 s (2.35-2.40 s when apply imported torch). The best of 3 runs."""
    spec, _, cache = finished
    times = []
    for _ in range(3):
        result, cpu = fresh(["apply", spec], tmp_path, cache)
        assert result.returncode == 0 and "nothing to do" in result.stdout, result.stderr
        times.append(cpu)
    assert min(times) <= 3.0, f"CPU seconds of `runner apply` on a finished store: {times}"
