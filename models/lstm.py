"""LSTM language model and LSTM taggers of Saphra's thesis, with activation/gradient capture.

Everything the training-dynamics studies of Saphra (2021, PhD thesis, Edinburgh) train from
scratch lives in this one file, nanoGPT style:

* ``LSTMLanguageModel`` -- Chapter 6 ("Beyond Words: The Development of Feature Sparsity",
  Section 2 Methods; also Chapter 4, Section 2.1): "a standard 2-layer LSTM LM", "The
  embeddings produced by the encoding layer are 200 units, and the recurrent layers have 200
  hidden units each. The batch size is set to forty, the maximum sequence length to 35, and the
  dropout ratio to 0.2. The optimizer is standard SGD with clipped gradients at l2 = 0.25, where
  the learning rate begins at 20 and is quartered whenever loss fails to improve." Its Figure 1
  names the intermediate activations h^e_t (embedding), h^1_t, h^2_t (the two LSTM layers) and
  the gradients backpropagated into them; ``capture`` records exactly these (plus the logits'
  gradient x-bar_t).
* ``LSTMTagger`` -- Chapter 4 ("Beyond Diagnostic Classifiers", Section 2.2 Tagging models):
  "a one-layer LSTM: h^e'_t = embedding(x_t); h^1'_t, c^1'_t = LSTM(h^e'_t, h^1'_{t-1},
  c^1'_{t-1}); y_{t+1} ~ softmax(h^1'_t)" -- the *tag predictor*; "We will also discuss input
  taggers, which share this architecture but instead sample y_t, the tag of the most recently
  observed word." Both are trained with batch 40, dropout 0.2, sequence length 35 (Section 3).

The training recipe (SGD lr 20, clip 0.25, lr / 4 on plateau, uniform(-0.1, 0.1) init, dropout on
the embedding, between layers and before the decoder) is that of pytorch/examples
``word_language_model``, which the thesis' hyper-parameters match one for one.

Layout: every tensor here is **batch first**. ``input_ids`` is ``(batch, seq)`` int64, logits are
``(batch, seq, vocab)``, captured activations and gradients are ``(batch, seq, dim)``. Hidden
states keep PyTorch's ``(1, batch, hidden)`` per layer.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from models.activations import Loss, chosen

#: Targets with this value are skipped by ``F.cross_entropy`` (its default ``ignore_index``).
IGNORE_INDEX = -100

#: Per-layer LSTM state ``(h, c)``, each ``(1, batch, hidden)``.
LayerState = tuple[Tensor, Tensor]
#: State of a whole stack: one ``LayerState`` per LSTM layer, bottom first.
Hidden = tuple[LayerState, ...]


# --------------------------------------------------------------------------------------------
# configs


@dataclass(frozen=True)
class LSTMLanguageModelConfig:
    """Chapter 6 LM: 200-unit embedding, two 200-unit LSTM layers, dropout 0.2."""

    vocab_size: int
    embedding_dim: int = 200
    hidden_dim: int = 200
    num_layers: int = 2
    dropout: float = 0.2
    #: Share the embedding and decoder matrices (needs ``embedding_dim == hidden_dim``).
    #: The thesis does not tie them, hence the default.
    tie_weights: bool = False

    def __post_init__(self) -> None:
        if self.vocab_size < 1 or self.embedding_dim < 1 or self.hidden_dim < 1:
            raise ValueError("vocab_size, embedding_dim and hidden_dim must be positive")
        if self.num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {self.num_layers}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.tie_weights and self.embedding_dim != self.hidden_dim:
            raise ValueError("tie_weights needs embedding_dim == hidden_dim")


TaggerMode = Literal["tag_predictor", "input_tagger"]


@dataclass(frozen=True)
class LSTMTaggerConfig:
    """Chapter 4 tagger: embedding -> one LSTM layer -> softmax over tags.

    ``mode="tag_predictor"`` predicts y_{t+1}, the tag of the *next* word (Eq. 7);
    ``mode="input_tagger"`` predicts y_t, the tag of the word just read.
    """

    vocab_size: int
    n_tags: int
    embedding_dim: int = 200
    hidden_dim: int = 200
    dropout: float = 0.2
    mode: TaggerMode = "tag_predictor"

    def __post_init__(self) -> None:
        if self.vocab_size < 1 or self.n_tags < 1:
            raise ValueError("vocab_size and n_tags must be positive")
        if self.embedding_dim < 1 or self.hidden_dim < 1:
            raise ValueError("embedding_dim and hidden_dim must be positive")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.mode not in ("tag_predictor", "input_tagger"):
            raise ValueError(f"mode must be 'tag_predictor' or 'input_tagger', got {self.mode!r}")


# --------------------------------------------------------------------------------------------
# models


class _LSTMStack(nn.Module):
    """embedding -> dropout -> lstm1 -> dropout -> ... -> lstmN -> dropout -> decoder.

    Each layer is its own single-layer ``nn.LSTM`` (``lstm1``, ``lstm2``, ...) so that forward
    hooks see every layer's output; this is the same computation as one multi-layer ``nn.LSTM``
    with inter-layer dropout.
    """

    def __init__(
        self, vocab_size: int, n_out: int, embedding_dim: int, hidden_dim: int,
        num_layers: int, dropout: float,
    ) -> None:
        super().__init__()
        self.num_layers = num_layers
        self.hidden_dim = hidden_dim
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        self.drop = nn.Dropout(dropout)
        for i in range(num_layers):
            d_in = embedding_dim if i == 0 else hidden_dim
            lstm = nn.LSTM(d_in, hidden_dim, num_layers=1, batch_first=True)
            self.add_module(f"lstm{i + 1}", lstm)
        self.decoder = nn.Linear(hidden_dim, n_out)
        # pytorch/examples word_language_model init: uniform(-0.1, 0.1), zero decoder bias.
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)

    def train(self, mode: bool = True) -> _LSTMStack:
        """Dropout follows ``mode``; the LSTM modules always stay in training mode.

        cuDNN's RNN backward exists only for a forward run in training mode, and measures take
        gradients of a model in eval mode (sparsity of gradients, loss change allocation). A
        one-layer ``nn.LSTM`` has no dropout of its own, so its training mode computes the same
        function; only this model's ``nn.Dropout`` depends on ``mode``."""
        super().train(mode)
        for lstm in self.lstms():
            lstm.train(True)
        return self

    def lstms(self) -> list[nn.LSTM]:
        return [getattr(self, f"lstm{i + 1}") for i in range(self.num_layers)]

    def layer_names(self) -> tuple[str, ...]:
        """Capturable layers, bottom up: ``("embedding", "lstm1", ..., "lstmN")``."""
        return ("embedding",) + tuple(f"lstm{i + 1}" for i in range(self.num_layers))

    def init_hidden(self, batch: int) -> Hidden:
        """Zero state for ``batch`` sequences: per layer ``(h, c)``, each ``(1, batch, hidden)``."""
        w = self.decoder.weight
        return tuple(
            (w.new_zeros(1, batch, self.hidden_dim), w.new_zeros(1, batch, self.hidden_dim))
            for _ in range(self.num_layers)
        )

    @staticmethod
    def detach_hidden(hidden: Hidden) -> Hidden:
        """Cut the graph between BPTT chunks (truncated backpropagation through time)."""
        return tuple((h.detach(), c.detach()) for h, c in hidden)

    def forward(self, input_ids: Tensor, hidden: Hidden | None = None) -> tuple[Tensor, Hidden]:
        """``input_ids`` ``(batch, seq)`` int64 -> logits ``(batch, seq, n_out)``, new hidden.

        ``hidden=None`` starts from zeros; pass the returned state (detached) to continue a
        stream across BPTT chunks.
        """
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must be (batch, seq), got shape {tuple(input_ids.shape)}")
        if hidden is None:
            hidden = self.init_hidden(input_ids.shape[0])
        if len(hidden) != self.num_layers:
            raise ValueError(f"hidden has {len(hidden)} layers, model has {self.num_layers}")
        x = self.drop(self.embedding(input_ids))  # (batch, seq, embedding_dim)
        new_hidden = []
        for lstm, state in zip(self.lstms(), hidden):
            x, state = lstm(x, state)  # (batch, seq, hidden_dim); h, c: (1, batch, hidden_dim)
            x = self.drop(x)
            new_hidden.append(state)
        logits = self.decoder(x)  # (batch, seq, n_out)
        return logits, tuple(new_hidden)


class LSTMLanguageModel(_LSTMStack):
    """Chapter 6 LSTM LM: logits at position t are the distribution of token t+1."""

    def __init__(self, config: LSTMLanguageModelConfig) -> None:
        super().__init__(
            config.vocab_size, config.vocab_size, config.embedding_dim, config.hidden_dim,
            config.num_layers, config.dropout,
        )
        self.config = config
        if config.tie_weights:
            self.decoder.weight = self.embedding.weight

    def loss(self, logits: Tensor, targets: Tensor) -> Tensor:
        """Mean cross entropy; ``logits`` ``(batch, seq, vocab)``, ``targets`` ``(batch, seq)``."""
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


class LSTMTagger(_LSTMStack):
    """Chapter 4 tag model: a one-layer LSTM over words with a softmax over tags."""

    def __init__(self, config: LSTMTaggerConfig) -> None:
        super().__init__(
            config.vocab_size, config.n_tags, config.embedding_dim, config.hidden_dim,
            1, config.dropout,
        )
        self.config = config

    @property
    def mode(self) -> TaggerMode:
        return self.config.mode

    def targets(self, tags: Tensor, next_tags: Tensor | None = None) -> Tensor:
        """Targets for the logits at each input position, ``(batch, seq)``.

        ``tags`` ``(batch, seq)`` are the tags of the input words (``tags[:, t]`` is y_t, the tag
        of ``input_ids[:, t]``).

        * ``input_tagger``: the target at t is y_t, i.e. ``tags`` itself.
        * ``tag_predictor``: the target at t is y_{t+1}. Without ``next_tags`` the tags are shifted
          left and the last position, whose next tag is not in the chunk, is ``IGNORE_INDEX``.
          On a batchified tag stream pass ``next_tags`` -- the ``target`` half of
          ``runner.studies.training.data.tokens.get_batch(tag_stream, i)`` -- and it is returned unchanged, so no
          position is lost.
        """
        if tags.dim() != 2:
            raise ValueError(f"tags must be (batch, seq), got shape {tuple(tags.shape)}")
        if self.mode == "input_tagger":
            return tags
        if next_tags is not None:
            if next_tags.shape != tags.shape:
                raise ValueError("next_tags must have the shape of tags")
            return next_tags
        out = torch.full_like(tags, IGNORE_INDEX)
        out[:, :-1] = tags[:, 1:]
        return out

    def loss(self, logits: Tensor, targets: Tensor) -> Tensor:
        """Mean cross entropy over positions whose target is not ``IGNORE_INDEX``."""
        return F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=IGNORE_INDEX
        )


# --------------------------------------------------------------------------------------------
# capture


def layer_names(model: _LSTMStack | None = None) -> tuple[str, ...]:
    """Capturable layers of ``model``; without a model, those of the thesis' 2-layer LM."""
    if model is None:
        return ("embedding", "lstm1", "lstm2")
    return model.layer_names()


@dataclass
class Captured:
    """Filled by ``capture``: ``activations[name]`` after a forward, ``gradients[name]`` after a
    backward. Both ``(batch, seq, dim)``, detached; a later forward/backward overwrites them."""

    activations: dict[str, Tensor] = field(default_factory=dict)
    gradients: dict[str, Tensor] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Tensor:
        return self.activations[name]


@contextmanager
def capture(
    model: _LSTMStack, names: Sequence[str] | None = None, *, gradients: bool = False
) -> Iterator[Captured]:
    """Record outputs (and, with ``gradients=True``, d loss / d output) of named layers.

    ``names`` are from ``model.layer_names()`` plus ``"logits"`` (default: all layers). With
    ``gradients=True`` the logits' gradient is recorded under ``"logits"`` as well, whether or not
    it is named (Chapter 6, Figure 1: x-bar_t). Layer outputs are taken before dropout: the
    embedding module's output is h^e_t, an LSTM module's output sequence is h^k_t.

    Forward hooks and tensor hooks are removed on exit, so nothing outlives the ``with`` block;
    a backward run after exit records nothing. Gradients need the forward to have run with grad
    enabled (in ``eval()`` mode too, so dropout does not blur the picture).
    """
    available = model.layer_names() + ("logits",)
    names = tuple(model.layer_names() if names is None else names)
    unknown = [n for n in names if n not in available]
    if unknown:
        raise ValueError(f"unknown layer names {unknown}; available: {available}")
    watch = list(dict.fromkeys(names + (("logits",) if gradients else ())))
    out = Captured()
    handles: list[torch.utils.hooks.RemovableHandle] = []

    def make_hook(name: str):
        def hook(_module: nn.Module, _inputs: tuple, output) -> None:
            tensor = output[0] if isinstance(output, tuple) else output  # nn.LSTM: (out, (h, c))
            if name in names:
                out.activations[name] = tensor.detach()
            if gradients and tensor.requires_grad:

                def grad_hook(grad: Tensor) -> None:
                    out.gradients[name] = grad.detach()

                handles.append(tensor.register_hook(grad_hook))

        return hook

    try:
        for name in watch:
            module = model.decoder if name == "logits" else getattr(model, name)
            handles.append(module.register_forward_hook(make_hook(name)))
        yield out
    finally:
        for handle in handles:
            handle.remove()
        handles.clear()


class LSTMActivations:
    """Named hook points of an LSTM (:mod:`models.activations`): ``embedding`` (h^e_t), ``lstm1`` ..
    ``lstmN`` (h^k_t) and ``logits``, before dropout.

    A stream: each :meth:`capture` continues from the hidden state the last one left (truncated BPTT
    windows of one token stream, as the thesis reads its analysis tokens); the first, and the first
    after :meth:`reset`, starts from zeros."""

    def __init__(self, model: _LSTMStack):
        self.model = model
        self.hidden: Hidden | None = None

    def layer_names(self) -> tuple[str, ...]:
        return self.model.layer_names() + ("logits",)

    def reset(self) -> None:
        self.hidden = None

    def capture(self, inputs, names: Sequence[str] | None = None) -> dict[str, Tensor]:
        names = chosen(self.layer_names(), names)
        ids = inputs.input_ids
        if self.hidden is None:
            self.hidden = self.model.init_hidden(ids.shape[0])
        with torch.no_grad(), capture(self.model, names) as cap:
            _, self.hidden = self.model(ids, self.hidden)
        return {name: cap.activations[name] for name in names}

    def capture_gradients(self, inputs, loss: Loss, names: Sequence[str] | None = None
                          ) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        """``loss(logits)`` backpropagated through the window (the stream's hidden state detached before it,
        truncated BPTT; the weights' gradients are set too)."""
        names = chosen(self.layer_names(), names)
        ids = inputs.input_ids
        hidden = self.model.init_hidden(ids.shape[0]) if self.hidden is None else self.hidden
        with torch.enable_grad(), capture(self.model, names, gradients=True) as cap:
            logits, self.hidden = self.model(ids, self.model.detach_hidden(hidden))
            self.model.zero_grad(set_to_none=True)
            loss(logits).backward()
        return {n: cap.activations[n] for n in names}, {n: cap.gradients[n] for n in names}
