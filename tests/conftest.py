"""Shared test settings: everything offline, caches in temporary folders."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from filelock import FileLock

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "requires_gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory):
    """One TRANSIENT_CACHE for the in-process plans of every shipped spec (builtin assets built once)."""
    return tmp_path_factory.mktemp("shared-cache")


@pytest.fixture
def in_process(shared_cache, tmp_path, monkeypatch, capsys):
    """``run(*args) -> (code, stdout, stderr)``: the real CLI entry point in this process, in
    ``tmp_path``, offline, with the shared cache (for commands that need no subprocess)."""
    from runner.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRANSIENT_CACHE", str(shared_cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("COLUMNS", "250")  # a wide terminal: lines whole (tests/runner/test_cli.py checks 80)

    def run(*args):
        capsys.readouterr()
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture(scope="session")
def shipped_store(tmp_path_factory):
    """``shipped_store(name) -> Path``: the store of a shipped spec (a golden run's name or a tiny
    spec's stem), planned (so the run records the estimate calibrated just before it) and applied
    through the real CLI once per test session, on one thread, and shared by every xdist worker: the
    first to ask applies it under a file lock, the others wait for it. Read it only; a test that
    changes a store applies or copies its own."""
    from tests.golden.pins import apply_run

    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shipped"
    shared.mkdir(exist_ok=True)

    def get(name: str) -> Path:
        done = shared / f"{name}.done"
        with FileLock(shared / f"{name}.lock"):
            if not done.exists():
                done.write_text(str(apply_run(name, shared / name, planned=True)))
        return Path(done.read_text())

    return get
