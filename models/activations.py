"""One way to read a model's activations: named hook points, one adapter per architecture.

As TransformerLens puts hook points on every model, every model the runner builds or loads has an
:class:`Activations` adapter with two methods:

- ``layer_names()``: its hook points, bottom up;
- ``capture(inputs, names=None) -> {name: (batch, seq, dim)}``: one forward pass without gradients
  on ``inputs`` (a :class:`~models.base.MapInputs`: token ids, attention mask, a generator), the
  output of each named hook point (default: all), in the order of ``layer_names()``.

The adapters, each beside its architecture:

- ALBERT and every depth map: :class:`MapActivations` (here: every map is one) (``embedding`` = x_0, ``layerT`` = x_T);
- the LSTM LM and taggers: :class:`models.lstm.LSTMActivations` (``embedding``, ``lstm1`` .., ``logits``);
- TransJect and its baselines: :class:`models.transject.TransJectActivations` (``embedding`` = X^(0),
  ``layer1`` ..);
- the transformers families of checkpoint suites: :class:`models.suites.SuiteActivations` (``embedding``,
  ``layer1`` .., where :data:`models.suites.ADAPTERS` says).

:func:`models.adapters.activations_of` picks the adapter of a model; :func:`token_rows` flattens a capture to the
``(tokens, dim)`` rows that checkpoint measures read (padding left out).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

from models.base import DynamicalMap, MapInputs


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


class MapActivations:
    """Named hook points of a depth map (:mod:`models.activations`): ``embedding`` is x_0 and ``layerT``
    is x_T = f^T(x_0), the states the depth study's pass iterates (``at(t)`` before each step; ALBERT
    with ``depth = num_hidden_layers`` gives transformers' hidden states)."""

    def __init__(self, model: DynamicalMap, depth: int):
        self.model, self.depth = model, depth

    def layer_names(self) -> tuple[str, ...]:
        return ("embedding",) + tuple(f"layer{t + 1}" for t in range(self.depth))

    def capture(self, inputs: MapInputs, names=None) -> dict[str, Tensor]:
        names = chosen(self.layer_names(), names)
        out: dict[str, Tensor] = {}
        if not names:
            return out
        with torch.no_grad():
            x = self.model.initial_state(inputs)
            for t, name in enumerate(self.layer_names()):
                if t:
                    self.model.at(t - 1)
                    x = self.model.step(x, inputs.attention_mask)
                if name in names:
                    out[name] = x
                if name == names[-1]:
                    break
        return out
