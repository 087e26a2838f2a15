"""One way to read a model's activations: named hook points, one adapter per architecture.

As TransformerLens puts hook points on every model, serving forward and backward hooks alike, every model
the runner builds or loads has an :class:`Activations` adapter, and the way in is its family's
:meth:`models.registry.Family.activations` (``family_for(source).activations(model)``):

- ``layer_names()``: its hook points, bottom up;
- ``capture(inputs, names=None) -> {name: (batch, seq, dim)}``: one forward pass without gradients
  on ``inputs`` (a :class:`~models.base.MapInputs`: token ids, attention mask, a generator), the
  output of each named hook point (default: all), in the order of ``layer_names()``;
- ``capture_gradients(inputs, loss, names=None) -> (activations, gradients)``: one forward pass with
  gradients and one backward pass of ``loss(output)`` (a scalar of the model's output), each named hook
  point's output and d loss / d output, both ``{name: (batch, seq, dim)}``, detached;
- ``reset()``: the next capture starts a new stream (a recurrent model's hidden state from zeros;
  random draws continue).

The adapters, each beside its architecture:

- ALBERT and every depth map: :class:`MapActivations` (here: every map is one) (``embedding`` = x_0, ``layerT`` = x_T);
- the LSTM LM and taggers: :class:`models.lstm.LSTMActivations` (``embedding``, ``lstm1`` .., ``logits``);
- TransJect and its baselines: :class:`models.transject.TransJectActivations` (``embedding`` = X^(0),
  ``layer1`` ..);
- the transformers families of checkpoint suites: :class:`models.suites.SuiteActivations` (``embedding``,
  ``layer1`` .., where :data:`models.suites.ADAPTERS` says);
- any other module (a family without an adapter of its own): :class:`ModuleActivations`, its named
  children.

:func:`token_rows` flattens a capture to the ``(tokens, dim)`` rows that checkpoint measures read (padding
left out).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor, nn

from models.base import DynamicalMap, MapInputs


@runtime_checkable
class Activations(Protocol):
    """A model's named hook points (see the module docstring)."""

    def layer_names(self) -> tuple[str, ...]: ...

    def capture(self, inputs: MapInputs, names: Sequence[str] | None = None) -> dict[str, Tensor]: ...

    def capture_gradients(self, inputs: MapInputs, loss: Callable[[Any], Tensor], names: Sequence[str] | None = None
                          ) -> tuple[dict[str, Tensor], dict[str, Tensor]]: ...

    def reset(self) -> None: ...


#: A loss of a model's output (a scalar), whose gradients ``capture_gradients`` takes.
Loss = Callable[[Any], Tensor]


@contextmanager
def hooked(modules: dict[str, nn.Module], out: dict[str, Tensor]) -> Iterator[None]:
    """Forward hooks keeping each module's output (the first of a tuple) in ``out[name]``; removed on exit."""
    def keep(name: str):
        def hook(module, args, output):
            out[name] = output[0] if isinstance(output, tuple) else output
        return hook

    handles = [m.register_forward_hook(keep(name)) for name, m in modules.items()]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def gradients(loss: Tensor, outputs: dict[str, Tensor]) -> dict[str, Tensor]:
    """d loss / d each output (zeros where the loss does not depend on it)."""
    grads = torch.autograd.grad(loss, list(outputs.values()), allow_unused=True)
    return {name: torch.zeros_like(h) if g is None else g.detach() for (name, h), g in zip(outputs.items(), grads)}


class ModuleActivations:
    """Named hook points of any module: its named children, read by forward hooks on ``model(input_ids)``
    (the adapter of a family without one of its own, :meth:`models.registry.Family.activations`)."""

    def __init__(self, model: nn.Module):
        self.model = model
        self.modules = dict(model.named_children())

    def layer_names(self) -> tuple[str, ...]:
        return tuple(self.modules)

    def reset(self) -> None:
        pass

    def _run(self, inputs: MapInputs, names, out: dict[str, Tensor]):
        with hooked({k: self.modules[k] for k in chosen(self.layer_names(), names)}, out):
            return self.model(inputs.input_ids)

    def capture(self, inputs: MapInputs, names=None) -> dict[str, Tensor]:
        out: dict[str, Tensor] = {}
        with torch.no_grad():
            self._run(inputs, names, out)
        return out

    def capture_gradients(self, inputs: MapInputs, loss: Loss, names=None):
        out: dict[str, Tensor] = {}
        with torch.enable_grad():
            value = loss(self._run(inputs, names, out))
            grads = gradients(value, out)
        return {k: v.detach() for k, v in out.items()}, grads


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

    def reset(self) -> None:
        pass

    def _run(self, inputs: MapInputs, names, track: bool = False) -> dict[str, Tensor]:
        names = chosen(self.layer_names(), names)
        out: dict[str, Tensor] = {}
        if not names:
            return out
        x = self.model.initial_state(inputs)
        if track and not x.requires_grad:  # a map without trained weights: the states still carry gradients
            x = x.detach().requires_grad_()
        for t, name in enumerate(self.layer_names()):
            if t:
                self.model.at(t - 1)
                x = self.model.step(x, inputs.attention_mask)
            if name in names:
                out[name] = x
            if name == names[-1]:
                break
        return out

    def capture(self, inputs: MapInputs, names=None) -> dict[str, Tensor]:
        with torch.no_grad():
            return self._run(inputs, names)

    def capture_gradients(self, inputs: MapInputs, loss: Loss, names=None):
        """``loss`` of x_T (the last step's state)."""
        with torch.enable_grad():
            out = self._run(inputs, None, track=True)
            value = loss(out[self.layer_names()[-1]])
            kept = {k: out[k] for k in chosen(self.layer_names(), names)}
            grads = gradients(value, kept)
        return {k: v.detach() for k, v in kept.items()}, grads
