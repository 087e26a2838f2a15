"""Fixtures for the training-study tests."""

from __future__ import annotations

import pytest
import torch



@pytest.fixture(autouse=True)
def _one_thread(monkeypatch):
    """Tiny LSTMs run fastest on one thread (and results depend on the thread count)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
