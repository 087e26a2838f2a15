"""Shared test settings: everything offline, caches in temporary folders."""

from __future__ import annotations

import os

import pytest
import torch

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
