"""How a TransJect measure plugs in: it runs at each epoch's checkpoint, on the analysis examples.

A registration (:mod:`runner.plugin.measures`) subclasses the engine's
:class:`~runner.plugin.timings.CheckpointMeasure` with ``study = STUDY``: ``variables`` declares
what it writes (one ``(network, checkpoint)`` cell per task; the ``layer`` axis holds the
embedding layer X^(0) and layers 1..L), and ``run(ctx, task)`` computes it with the pure functions
of :mod:`analyses` from ``ctx.view(task.network, task.checkpoint)``, a :class:`View`: the network at
that checkpoint and its hidden states on the analysis examples and on the analysis sentence (read through the model's activation
adapter, :class:`models.transject.TransJectActivations`), computed once for all the measures of the
checkpoint (they run as one group).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import runner.checkpointed.measures  # noqa: F401 - registers the kit's measures, which this study takes
from runner.checkpointed.measure import KIT
from runner.plugin.measure_protocol import CheckpointContext
from runner.plugin.measures import takes

if TYPE_CHECKING:
    from torch import Tensor

STUDY = "transject"
takes(STUDY, KIT)
PAPER = ("Don't Bet on Sparsity: Designing Brain-Inspired Distance-Preserving Encoder (TransJect), "
         "Secs. 3-4, Figs. 1, 4-6, Tables 2-3")


@dataclass(frozen=True)
class TransJectShape:
    """What the variables depend on besides the measure's parameters."""

    layers: list[str]
    """``embedding``, ``layer1`` .. ``layerL`` (L: the deepest network)."""
    experts: int
    """Experts (TransJect) or attention heads (baselines) of the widest network."""
    sentence: list[str]
    """Tokens of the analysis sentence (Figs. 1 and 6)."""
    names: list[str] = field(default_factory=list)
    """Network labels."""


@dataclass
class View:
    """A network at one checkpoint, run on the analysis data (dropout off, a fixed entropic draw)."""

    model: Any
    variant: str
    params: dict
    hidden: list[Tensor]
    """X^(0..L) on the analysis examples, each ``(batch, seq, d)``, float64."""
    mask: Tensor
    """``(batch, seq)``: 1 on tokens."""
    sentence: list[Tensor]
    """X^(0..L) of the analysis sentence, each ``(seq, d)``, float64."""
    generator_seed: int

    @property
    def baseline(self) -> bool:
        return self.variant in ("transformer", "transformer-rezero")


class EpochContext(CheckpointContext, Protocol):
    """What the TransJect session gives its measures, beyond ``names`` and ``write``."""

    n_layers: int
    """Layers of the store's ``layer`` axis (the embedding and layers 1..L)."""
    layout: Any
    seed: int

    def view(self, network: int, checkpoint: int) -> View:
        """The network at that checkpoint and its hidden states (one per checkpoint, shared by its measures)."""


def tokens_of(hidden: Tensor, mask: Tensor) -> list[Tensor]:
    """The non-padding token vectors of each sequence, ``(n_b, d)`` each."""
    import torch  # lazy: torch

    return [h[m.to(torch.bool)] for h, m in zip(hidden, mask)]
