"""The activation context the kit gives the measures of a study with checkpoints: a network's activations
at a checkpoint, read once through its family's adapter (:meth:`models.registry.Family.activations`) and
kept for every measure of the group (:class:`ActivationCache`), and its gradients through the same adapter.

A study says how a network is read at a checkpoint (a :class:`Reading`: the family, the model, the analysis
batches in order, the analysis sentence); the kit captures, flattens to ``(tokens, dim)`` rows and caches.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from models.activations import Loss, token_rows
from models.base import MapInputs

#: Captures of the analysis batches -> ``{layer: (rows, dim)}``.
Rows = Callable[[list[dict[str, Tensor]]], dict[str, Tensor]]


def forked_rng(device):
    """Run a measure between training steps with the RNG forked, so it cannot change the training run."""
    return torch.random.fork_rng(devices=[device] if device.type == "cuda" else [])


def token_rows_of(batches: Sequence[MapInputs]) -> Rows:
    """Rows of each batch's tokens, padding left out, batch after batch (the default of a :class:`Reading`)."""
    def rows(captures: list[dict[str, Tensor]]) -> dict[str, Tensor]:
        parts: dict[str, list[Tensor]] = {}
        for inputs, captured in zip(batches, captures):
            for name, a in token_rows(captured, inputs.attention_mask).items():
                parts.setdefault(name, []).append(a)
        return {k: v[0] if len(v) == 1 else torch.cat(v) for k, v in parts.items()}
    return rows


@dataclass(frozen=True)
class Reading:
    """How a study reads one network at one checkpoint through its family's adapter."""

    family: Any
    """Its :class:`models.registry.Family` (``activations(model, **options)`` gives the adapter)."""
    model: Any
    """The network at the checkpoint (eval mode)."""
    batches: tuple[MapInputs, ...]
    """The analysis tokens, batch after batch, one stream (a recurrent model's state carried across them)."""
    sentence: MapInputs | None = None
    """The analysis sentence (one sequence), read from a new stream after the batches."""
    options: dict = field(default_factory=dict)
    """The adapter's options (a generator of the model's random draws)."""
    dtype: torch.dtype | None = None
    """The activations are kept in this type (None: the model's)."""
    rows: Rows | None = None
    """The batches' captures as ``(rows, dim)`` (None: :func:`token_rows_of`; a suite pools subwords per word)."""
    losses: tuple[Loss, ...] = ()
    """The loss of each batch whose gradients :meth:`ActivationCache.gradients` takes (none: not read)."""

    def to_rows(self, captures: list[dict[str, Tensor]]) -> dict[str, Tensor]:
        return (self.rows or token_rows_of(self.batches))(captures)


class Captured:
    """A network's activations at a checkpoint: ``rows`` ``{layer: (tokens, dim)}``, ``sentence``
    ``{layer: (seq, dim)}``, the ``model`` read and, when the analysis is one batch, that batch's capture
    ``{layer: (batch, seq, dim)}`` with its ``mask`` (a study's measures of examples read it)."""

    def __init__(self, reading: Reading, captures: list[dict[str, Tensor]], sentence: dict[str, Tensor]):
        self.model = reading.model
        self.rows = reading.to_rows(captures)
        self.sentence = sentence
        one = len(captures) == 1
        self.batch = captures[0] if one else None
        self.mask = reading.batches[0].attention_mask if one else None


def capture(reading: Reading) -> Captured:
    """Read ``reading``'s batches, then its sentence from a new stream, through the family's adapter."""
    adapter = reading.family.activations(reading.model, **reading.options)
    cast = (lambda d: d) if reading.dtype is None else (lambda d: {k: v.to(reading.dtype) for k, v in d.items()})
    captures = [cast(adapter.capture(inputs)) for inputs in reading.batches]
    sentence: dict[str, Tensor] = {}
    if reading.sentence is not None:
        adapter.reset()
        sentence = {k: v[0] for k, v in cast(adapter.capture(reading.sentence)).items()}
    return Captured(reading, captures, sentence)


class ActivationCache:
    """Each (network, checkpoint)'s :class:`Captured`, read once for all the measures of a group and kept for
    the next groups (the ``size`` last read: every checkpoint is compared with its network's final one).
    The group's own is read where its measures run; any other with the random state forked, so reading it
    here rather than earlier cannot change what the group's measures draw."""

    def __init__(self, reading: Callable[..., Reading], device, size: int = 3):
        self.reading, self.device, self.size = reading, device, size
        self._kept: OrderedDict[tuple[int, int], Captured] = OrderedDict()
        self._held: tuple[int, int] | None = None

    @contextmanager
    def holding(self, network: int, checkpoint: int) -> Iterator[None]:
        """While a group of (network, checkpoint) runs: its activations are the group's."""
        self._held = (network, checkpoint)
        try:
            yield
        finally:
            self._held = None

    def __call__(self, network: int, checkpoint: int) -> Captured:
        key = (network, checkpoint)
        if key not in self._kept:
            with nullcontext() if key == self._held else forked_rng(self.device):
                self._kept[key] = capture(self.reading(network, checkpoint))
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)
        self._kept.move_to_end(key)
        return self._kept[key]

    def gradients(self, network: int, checkpoint: int, names: Sequence[str] | None = None
                  ) -> Iterator[tuple[dict[str, Tensor], dict[str, Tensor]]]:
        """Each analysis batch's (activations, d loss / d activations) of the named hook points, batch after
        batch through one adapter (a stream), each batch's loss the reading's; not kept."""
        yield from self._gradients(self.reading(network, checkpoint, gradients=True), names)

    def gradient_rows(self, network: int, checkpoint: int, names: Sequence[str] | None = None
                      ) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        """The (activations, gradients) of every analysis batch as rows (the reading's ``rows``: a suite's
        words)."""
        reading = self.reading(network, checkpoint, gradients=True)
        pairs = list(self._gradients(reading, names))
        return reading.to_rows([a for a, _ in pairs]), reading.to_rows([g for _, g in pairs])

    @staticmethod
    def _gradients(reading: Reading, names):
        adapter = reading.family.activations(reading.model, **reading.options)
        for inputs, loss in zip(reading.batches, reading.losses, strict=True):
            yield adapter.capture_gradients(inputs, loss, names)
