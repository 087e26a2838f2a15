"""Fixtures for the models tests: tiny ALBERT checkpoints saved to temporary directories."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing here may reach the network (load_albert reads HF_HUB_OFFLINE at call time)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _tiny_config(num_hidden_layers: int = 3, **overrides):
    from transformers import AlbertConfig

    kw = dict(
        vocab_size=100, embedding_size=16, hidden_size=32, num_attention_heads=4, intermediate_size=64,
        num_hidden_layers=num_hidden_layers, max_position_embeddings=64, hidden_act="gelu_new",
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        initializer_range=0.2,  # larger than the 0.02 default so attention and the FFN do something
    )
    kw.update(overrides)
    return AlbertConfig(**kw)


def _save_tiny_albert(directory: Path, num_hidden_layers: int = 3, seed: int = 0, **overrides) -> Path:
    """A randomly initialised AlbertModel saved with save_pretrained (safetensors)."""
    from transformers import AlbertModel

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AlbertModel(_tiny_config(num_hidden_layers, **overrides))
    model.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_config():
    """``tiny_config(num_hidden_layers=3, **overrides) -> AlbertConfig``."""
    return _tiny_config


@pytest.fixture(scope="session")
def save_albert():
    """``save_albert(directory, num_hidden_layers=3, seed=0, **config_overrides) -> directory``."""
    return _save_tiny_albert


@pytest.fixture(scope="session")
def tiny_albert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The offline tiny ALBERT of models.tiny, built once per session with a short MLM run."""
    from models.tiny import build_tiny_albert

    return build_tiny_albert(tmp_path_factory.mktemp("tiny") / "albert", seed=0, mlm_steps=20)
