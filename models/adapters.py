"""The adapter of any model the runner builds or loads (:mod:`models.activations` says what an
adapter is): the one place that knows every architecture, above all of them."""

from __future__ import annotations

from typing import Any

import torch

from models.activations import Activations, MapActivations
from models.base import DynamicalMap
from models.lstm import LSTMActivations, _LSTMStack
from models.suites import SuiteActivations
from models.transject import TransformerClassifier, TransJect, TransJectActivations


def activations_of(model: Any, *, depth: int | None = None, generator: torch.Generator | None = None) -> Activations:
    """The adapter of ``model``: a depth map (``depth`` steps: ``num_hidden_layers`` for ALBERT), an LSTM, a
    TransJect encoder or baseline (``generator`` draws the entropic u), or a transformers model of a family
    in :data:`models.suites.ADAPTERS`."""
    if isinstance(model, DynamicalMap):
        if depth is None:
            depth = getattr(getattr(model, "config", None), "num_hidden_layers", None)
        if depth is None:
            raise ValueError(f"{type(model).__name__} is a map: say how many steps to capture (depth=...)")
        return MapActivations(model, depth)
    if isinstance(model, _LSTMStack):
        return LSTMActivations(model)
    if isinstance(model, (TransJect, TransformerClassifier)):
        return TransJectActivations(model, generator)
    return SuiteActivations(model)
