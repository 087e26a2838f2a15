"""The contract between the runner and the models it iterates.

A *dynamical map* turns an input batch into an initial state ``x0`` and advances a state by one
application of its map, ``x_{t+1} = f(x_t)`` (Inoue et al. 2021, Eqs. 1-4). States are batched on
the leading dimension and always have shape ``(batch, n_tokens, n_hidden)``; reference maps with
no tokens use ``n_tokens = 1``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn


@dataclass(frozen=True)
class MapInputs:
    """What a map needs to build initial states.

    Text models read ``input_ids`` (``(batch, n_tokens)``, int64) and ``attention_mask``;
    reference maps draw ``samples`` valid initial states of their own with ``generator``.
    """

    samples: int
    input_ids: Tensor | None = None
    attention_mask: Tensor | None = None
    generator: torch.Generator | None = None


class DynamicalMap(nn.Module):
    """Base class of every iterable model. Subclasses implement the three methods below."""

    #: True when the map is driven by tokenized text (ALBERT); False for reference maps.
    needs_tokens: bool = False
    #: False for a map that differs from step to step (a stack of distinct layers): the pass calls
    #: :meth:`at` before each step.
    autonomous: bool = True
    #: The closed interval ``(lo, hi)`` every element of a state must stay in for the map to be the
    #: map studied (the logistic map's [0, 1]: outside it orbits run off to -inf); None: unbounded.
    domain: tuple[float, float] | None = None
    #: True when the map treats tokens alike: permuting the tokens of x permutes those of f(x), and
    #: f of a one-token state is f of that token repeated (ALBERT's shared layer: positions enter only
    #: through x_0). Then the set "all tokens equal" maps into itself and a synchronised sample may be
    #: iterated as one token (``[dynamics] reduce``, runner/studies/depth/reduce.py).
    token_equivariant: bool = False

    def at(self, t: int) -> None:
        """The next :meth:`step` maps x_t to x_{t+1} (only non-autonomous maps need to know)."""

    def initial_state(self, inputs: MapInputs) -> Tensor:
        """x0 for every sample, shape ``(samples, n_tokens, n_hidden)``."""
        raise NotImplementedError

    def step(self, x: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """One application of the map; ``attention_mask`` is ``(batch, n_tokens)`` of 0/1 or None."""
        raise NotImplementedError

    def attention_probs(self, x: Tensor, attention_mask: Tensor | None = None) -> Tensor | None:
        """Attention probabilities the map would use at state ``x``,
        ``(batch, heads, n_tokens, n_tokens)``; None for maps without attention."""
        return None


class MapStep(nn.Module):
    """``x -> f(x)``: one application of a map as a module (every token attended), for a training
    loop that differentiates through the map's steps."""

    def __init__(self, amap: DynamicalMap):
        super().__init__()
        self.amap = amap

    def forward(self, x: Tensor) -> Tensor:
        return self.amap.step(x)
