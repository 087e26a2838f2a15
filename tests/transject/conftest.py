"""The tiny TransJect spec applied once through the real CLI (a few seconds on one thread)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "specs" / "tiny" / "transject_tiny.toml"
RUNNER = [sys.executable, "-m", "runner.cli"]


def env(**extra) -> dict:
    e = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
         "HF_DATASETS_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    e.pop("RUNNER_TEST_STALL", None)
    e.update(extra)
    return e


def tiny_spec(root: Path, name: str = "tiny", replace: dict[str, str] | None = None) -> Path:
    """A copy of the shipped tiny spec whose store is ``root/<name>.zarr``."""
    text = TINY.read_text().replace('seed = 0\n', f'seed = 0\nstore = "{root / (name + ".zarr")}"\n', 1)
    for old, new in (replace or {}).items():
        assert old in text, old
        text = text.replace(old, new)
    path = root / f"{name}.toml"
    path.write_text(text)
    return path


@pytest.fixture(scope="session")
def tiny_store(shipped_store) -> Path:
    """``runner apply`` of specs/tiny/transject_tiny.toml in a subprocess (the session's
    ``shipped_store``, shared with the golden and figure tests); its store. Read it only."""
    return shipped_store("transject_tiny")


@pytest.fixture(autouse=True)
def one_thread():
    """In-process runs on one thread, as the CLI runs of these tests (and faster on a shared machine)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
