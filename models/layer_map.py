"""A transformer's stack of distinct layers as a (non-autonomous) depth map: x_{t+1} = block_{t+1}(x_t).

Families without a shared layer (GPT-NeoX/Pythia, BERT/MultiBERTs, GPT-2, Llama-style) cannot be
iterated like ALBERT, but their forward pass is itself a trajectory through depth: x_0 is the input
to the first block (``hidden_states[0]`` of transformers), and step t applies block t + 1. The
depth study's measures (D(t), N_eff, the Lyapunov exponent of a perturbation carried through the
blocks) then describe the representations layer by layer, for each checkpoint of a series.

A block is applied exactly as the model applies it, whatever its family needs (rotary position
embeddings, causal or padding masks): the model runs its own forward on the state's shape with
forward hooks on :class:`~models.suites.Adapter`'s blocks: a pre-hook puts x in place of block t's
input and a hook stops the forward with block t's output. The blocks before t run on placeholder
inputs whose outputs are dropped, so step t costs t + 1 blocks (a whole trajectory L(L+1)/2 block
evaluations): simple and family-agnostic rather than fast.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from models.base import DynamicalMap, MapInputs
from models.suites import adapter_for


class _Stop(Exception):
    def __init__(self, output: Tensor):
        self.output = output


class LayerMap(DynamicalMap):
    """Block after block of ``model`` (an ``AutoModel``, eval mode) as a map; :meth:`at` sets the step."""

    needs_tokens = True
    autonomous = False

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model.eval()
        self.blocks = list(adapter_for(model).layers(model).values())[1:]
        self.n_layers = len(self.blocks)
        self.t = 0

    def at(self, t: int) -> None:
        """The next :meth:`step` maps x_t to x_{t+1} = block_{t+1}(x_t)."""
        if not 0 <= t < self.n_layers:
            raise ValueError(f"step {t}: the model has {self.n_layers} layers (steps 0..{self.n_layers - 1})")
        self.t = t

    def _forward(self, shape: tuple[int, int], attention_mask: Tensor | None, device) -> None:
        ids = torch.zeros(shape, dtype=torch.long, device=device)
        self.model(input_ids=ids, attention_mask=attention_mask, use_cache=False)

    def initial_state(self, inputs: MapInputs) -> Tensor:
        if inputs.input_ids is None:
            raise ValueError("LayerMap.initial_state needs MapInputs.input_ids (batch, n_tokens)")
        out = self.model(input_ids=inputs.input_ids, attention_mask=inputs.attention_mask, use_cache=False,
                         output_hidden_states=True)
        return out.hidden_states[0]

    def step(self, x: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        block = self.blocks[self.t]

        def substitute(module, args, kwargs):
            if args:
                return (x, *args[1:]), kwargs
            return args, {**kwargs, "hidden_states": x}

        def stop(module, args, output):
            raise _Stop(output[0] if isinstance(output, tuple) else output)

        handles = [block.register_forward_pre_hook(substitute, with_kwargs=True), block.register_forward_hook(stop)]
        try:
            self._forward(tuple(x.shape[:2]), attention_mask, x.device)
        except _Stop as done:
            return done.output
        finally:
            for h in handles:
                h.remove()
        raise RuntimeError(f"block {self.t + 1} did not run in the model's forward")
