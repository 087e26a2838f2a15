"""What checkpoint measures share: the analysis tokens, the checkpoints, and a small cache.

The activations come from the kit's cache (:class:`runner.checkpointed.activations.ActivationCache`), which
reads the network through its family's adapter as :meth:`Context.reading` says, so the context is also an
:class:`~runner.checkpointed.measure.ActivationContext`: the kit's measures (``svcca``, ``entropy``,
``distances``) read ``activations`` and ``sentence_activations`` (:func:`analysis_sentence`), and gradients
come through the same adapter (:meth:`Context.gradients`).

Each measure task loads the checkpoints it needs, runs the network over the analysis tokens (the
first ``corpus.analysis_tokens`` tokens of ``analysis_split`` (validation by default; the
``tag_articles`` documents' when set), dropout off, hidden state carried across
``bptt`` windows) and writes its (network, checkpoint) cell of the store.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from models.registry import family_for
from runner.studies.training.data.corpus import Corpus
from runner.studies.training.data.tokens import batchify, get_batch
from runner.core.layout import Layout
from runner.core.plan import Task
from runner.storage.store import Store
from runner.studies.training.spec import TrainingStudySpec

if TYPE_CHECKING:
    import torch
    from torch import Tensor
    from runner.checkpointed.activations import ActivationCache, Reading


#: The most tokens of the analysis sentence (the token pairs of ``distances``).
SENTENCE_TOKENS = 40


def analysis_sentence(study: TrainingStudySpec, corpus: Corpus) -> Tensor:
    """The analysis tokens' first sentence (through its first ``<eos>``; at most :data:`SENTENCE_TOKENS`
    tokens): the sentence whose token pairs ``distances`` measures, as TransJect's analysis sentence (Fig. 1)."""
    words, _ = corpus.analysis_streams(study.corpus.analysis_split)
    first = words[:min(study.corpus.analysis_tokens, SENTENCE_TOKENS)]
    eos = corpus.vocab.stoi.get(corpus.vocab.eos) if corpus.vocab.eos else None
    ends = (first[1:] == eos).nonzero() if eos is not None else []
    return first[:int(ends[0]) + 2] if len(ends) else first


def sentence_words(study: TrainingStudySpec, corpus: Corpus) -> list[str]:
    return [corpus.vocab.itos[int(i)] for i in analysis_sentence(study, corpus)]


class Context:
    """What measure tasks share: corpus, analysis streams, checkpoint paths and a small cache."""

    def __init__(self, study: TrainingStudySpec, n_checkpoints: int, corpus: Corpus, layout: Layout, store: Store,
                 device: torch.device, paths: dict[tuple[int, int], Path], cache: ActivationCache | None = None):
        """``cache``: the session's (the kit's); none: one of its own (a calibration's context)."""
        from runner.checkpointed.activations import ActivationCache  # lazy: torch

        self.study, self.corpus, self.layout, self.store, self.device = study, corpus, layout, store, device
        self.paths, self.cache = paths, cache or ActivationCache(self.reading, device)
        self.names = [m.name for m in study.model]
        self.last = n_checkpoints - 1
        self.seed = study.experiment.seed
        tr = study.training
        self.bptt = tr.bptt
        words, tags = corpus.analysis_streams(study.corpus.analysis_split)
        n = min(study.corpus.analysis_tokens, words.numel())
        self.columns = max(1, min(tr.eval_batch_size, n // (2 * tr.bptt) or 1))
        self.words = batchify(words[:n], self.columns).to(device)
        self.tags = {t: batchify(s[:n], self.columns).to(device) for t, s in tags.items()}
        self._cache: OrderedDict = OrderedDict()

    def windows(self) -> Iterator[int]:
        return iter(range(0, self.words.shape[0] - 1, self.bptt))

    def fresh_model(self, network: int, checkpoint: int):
        """The network at a checkpoint, in eval mode, a new copy (for measures that change weights)."""
        from runner.checkpointed.files import load_weights  # lazy: torch
        from runner.studies.training.train import build_model  # lazy: torch

        m = build_model(self.study.model[network], self.study.training, self.corpus, 0, self.device)
        load_weights(m, self.paths[(network, checkpoint)], self.device)
        return m.eval()

    def model(self, network: int, checkpoint: int):
        key = ("model", network, checkpoint)
        if key not in self._cache:
            self._put(key, self.fresh_model(network, checkpoint))
        return self._cache[key]

    def reading(self, network: int, checkpoint: int, gradients: bool = False) -> Reading:
        """The network at a checkpoint read through the LSTM family's adapter: the analysis windows one after
        the other (the hidden state carried), each with its mean next-word loss; the sentence from zeros."""
        from models.activations import tokens  # lazy: torch
        from runner.checkpointed.activations import Reading  # lazy: torch
        from runner.studies.training.train import source_of  # lazy: torch

        model = self.model(network, checkpoint)
        windows = [get_batch(self.words, i, self.bptt) for i in self.windows()]
        losses = tuple((lambda logits, y=y: model.loss(logits, y)) for _, y in windows) if gradients else ()
        return Reading(family_for(source_of(self.study.model[network])), model, tuple(tokens(x) for x, _ in windows),
                       tokens(self.sentence_ids.to(self.device)[None]), losses=losses)

    def activations(self, network: int, checkpoint: int) -> dict[str, Tensor]:
        """Every layer's output on the analysis tokens, ``(n_tokens, dim)`` each."""
        return self.cache(network, checkpoint).rows

    @cached_property
    def sentence_ids(self) -> Tensor:
        return analysis_sentence(self.study, self.corpus)

    @cached_property
    def sentence_tokens(self) -> list[str]:
        return [self.corpus.vocab.itos[int(i)] for i in self.sentence_ids]

    def sentence_activations(self, network: int, checkpoint: int) -> dict[str, Tensor]:
        """Every layer's output on the analysis sentence read from a zero state, ``(seq, dim)`` each."""
        return self.cache(network, checkpoint).sentence

    def gradients(self, network: int, checkpoint: int, names=None):
        """Per analysis window: each named layer's (activations, gradients of the window's mean next-word loss)."""
        return self.cache.gradients(network, checkpoint, names)

    def final(self, network: int) -> int:
        return self.last

    def tag_labels(self, tagset: str) -> tuple[Tensor, Tensor]:
        """The tag of each analysis token whose activation :meth:`activations` holds, and of the token after it."""
        import torch  # lazy: torch

        cur, nxt = [], []
        for i in self.windows():
            t, nt = get_batch(self.tags[tagset], i, self.bptt)
            cur.append(t.reshape(-1))
            nxt.append(nt.reshape(-1))
        return torch.cat(cur), torch.cat(nxt)

    def _put(self, key, value) -> None:
        self._cache[key] = value
        self._cache.move_to_end(key)
        while len(self._cache) > 6:
            self._cache.popitem(last=False)

    def write(self, name: str, task: Task, values) -> None:
        from runner.checkpointed.session import write_cell  # lazy: torch

        write_cell(self.store, name, task, values)

    def layer_index(self) -> dict[str, int]:
        return {str(v): i for i, v in enumerate(self.layout.coords["layer"].values)}

    def reference_layer(self, network: int) -> str:
        """A tagger's representation: its LSTM layer (Ch. 4 Figs. 8-11)."""
        return "lstm1"
