"""One way to read a model's activations: named hook points, one adapter per architecture.

As TransformerLens puts hook points on every model, every model the runner builds or loads has an
:class:`Activations` adapter with two methods:

- ``layer_names()``: its hook points, bottom up;
- ``capture(inputs, names=None) -> {name: (batch, seq, dim)}``: one forward pass without gradients
  on ``inputs`` (a :class:`~models.base.MapInputs`: token ids, attention mask, a generator), the
  output of each named hook point (default: all), in the order of ``layer_names()``.

The adapters, each beside its architecture:

- ALBERT and every depth map: :class:`models.base.MapActivations` (``embedding`` = x_0, ``layerT`` = x_T);
- the LSTM LM and taggers: :class:`models.lstm.LSTMActivations` (``embedding``, ``lstm1`` .., ``logits``);
- TransJect and its baselines: :class:`models.transject.TransJectActivations` (``embedding`` = X^(0),
  ``layer1`` ..);
- the transformers families of checkpoint suites: :class:`models.suites.SuiteActivations` (``embedding``,
  ``layer1`` .., where :data:`models.suites.ADAPTERS` says).

:func:`activations_of` picks the adapter of a model; :func:`token_rows` flattens a capture to the
``(tokens, dim)`` rows that checkpoint measures read (padding left out).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor

from models.base import MapInputs


@runtime_checkable
class Activations(Protocol):
    """A model's named hook points (see the module docstring)."""

    def layer_names(self) -> tuple[str, ...]: ...

    def capture(self, inputs: MapInputs, names: Sequence[str] | None = None) -> dict[str, Tensor]: ...


def chosen(available: Sequence[str], names: Sequence[str] | None) -> tuple[str, ...]:
    """``names`` in the order of ``available`` (all of them for None); an unknown name raises ValueError."""
    if names is None:
        return tuple(available)
    unknown = [n for n in names if n not in available]
    if unknown:
        raise ValueError(f"no hook point {', '.join(map(repr, unknown))}; this model has {', '.join(available)}")
    return tuple(n for n in available if n in names)


def tokens(input_ids: Tensor, attention_mask: Tensor | None = None, generator: torch.Generator | None = None
           ) -> MapInputs:
    """The inputs of one batch of token sequences ``(batch, seq)``."""
    return MapInputs(samples=input_ids.shape[0], input_ids=input_ids, attention_mask=attention_mask,
                     generator=generator)


def token_rows(captured: dict[str, Tensor], attention_mask: Tensor | None = None) -> dict[str, Tensor]:
    """Each ``(batch, seq, dim)`` capture as ``(tokens, dim)`` rows, sequence by sequence, leaving out the
    positions where ``attention_mask`` is 0."""
    if attention_mask is None:
        return {k: v.reshape(-1, v.shape[-1]) for k, v in captured.items()}
    keep = attention_mask.to(torch.bool)
    return {k: v[keep.to(v.device)] for k, v in captured.items()}


def activations_of(model: Any, *, depth: int | None = None, generator: torch.Generator | None = None) -> Activations:
    """The adapter of ``model``: a depth map (``depth`` steps: ``num_hidden_layers`` for ALBERT), an LSTM, a
    TransJect encoder or baseline (``generator`` draws the entropic u), or a transformers model of a family
    in :data:`models.suites.ADAPTERS`."""
    from models.base import DynamicalMap, MapActivations
    from models.lstm import LSTMActivations, _LSTMStack
    from models.suites import SuiteActivations
    from models.transject import TransformerClassifier, TransJect, TransJectActivations

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
