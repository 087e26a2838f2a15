"""Helpers to run the real CLI in a child process on specs written in a temporary folder (forked
from a warm interpreter by :mod:`tests.runner.launcher`; a fresh one with ``TRANSIENT_TEST_FRESH=1``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests.runner import launcher

RUNNER = [sys.executable, "-m", "runner.cli"]


def cli_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("RUNNER_TEST_STALL", None)
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSIENT_CACHE=str(tmp_path / "cache"),
               PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    env.update(extra)
    return env


def run_cli(*args: str, cwd: Path, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    return launcher.run(args, cwd=cwd, env=cli_env(cwd, **env), timeout=timeout)


def popen_cli(*args: str, cwd: Path, **env: str) -> subprocess.Popen:
    """``runner ARGS`` in the background; ``env`` adds variables (e.g. the RUNNER_TEST_STALL hook)."""
    return launcher.popen(args, cwd=cwd, env=cli_env(cwd, **env))


def write_spec(directory: Path, text: str, name: str = "spec.toml") -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path


def maps_spec(name: str, *, steps: int = 300, samples: int = 16, checkpoint_every: int | None = None,
              extra_models: str = "", measures: str | None = None, n: int = 32, experiment: str = "") -> str:
    """A spec of reference maps that runs in about a second (``experiment``: more ``[experiment]`` keys)."""
    ckpt = f"checkpoint_every = {checkpoint_every}" if checkpoint_every else ""
    measures = measures if measures is not None else """
        [[measure]]
        kind = "lyapunov"
        k = 1e-8
        tau = 1

        [[measure]]
        kind = "transient_chaos"

        [[measure]]
        kind = "effective_dimension"
        every = 10

        [[measure]]
        kind = "token_deviation"
        """
    return f"""
        [experiment]
        name = "{name}"
        store = "store/{name}.zarr"
        {experiment}

        [[model]]
        name = "logistic"
        source = "map:logistic"

        [[model]]
        name = "tanh"
        source = "map:tanh"
        params = {{ g = 0.5, n = {n} }}
        {extra_models}

        [input]
        samples = {samples}

        [dynamics]
        steps = {steps}
        precision = "fp64"
        {ckpt}
        {textwrap.dedent(measures)}
        """


def wait_for(predicate, proc: subprocess.Popen, timeout: float = 300.0) -> None:
    """Poll ``predicate`` until it holds (a file, a log line); fail at once if ``proc`` exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("timed out")
