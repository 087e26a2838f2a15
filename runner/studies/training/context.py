"""What checkpoint measures share: the analysis tokens, the checkpoints, and a small cache.

Each measure task loads the checkpoints it needs, runs the network over the analysis tokens (the
first ``corpus.analysis_tokens`` tokens of ``analysis_split`` (validation by default; the
``tag_articles`` documents' when set), dropout off, hidden state carried across
``bptt`` windows) and writes its (network, checkpoint) cell of the store.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import Tensor

from models.lstm import capture
from runner.checkpointed.files import load_weights
from runner.checkpointed.session import write_cell
from runner.data.corpus import Corpus
from runner.data.tokens import batchify, get_batch
from runner.layout import Layout
from runner.plan import Task
from runner.store import Store
from runner.studies.training.spec import TrainingStudy
from runner.studies.training.train import build_model


class Context:
    """What measure tasks share: corpus, analysis streams, checkpoint paths and a small cache."""

    def __init__(self, study: TrainingStudy, n_checkpoints: int, corpus: Corpus, layout: Layout, store: Store,
                 device: torch.device, paths: dict[tuple[int, int], Path]):
        self.study, self.corpus, self.layout, self.store, self.device = study, corpus, layout, store, device
        self.paths = paths
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
        m = build_model(self.study.model[network], self.study.training, self.corpus, 0, self.device)
        load_weights(m, self.paths[(network, checkpoint)], self.device)
        return m.eval()

    def model(self, network: int, checkpoint: int):
        key = ("model", network, checkpoint)
        if key not in self._cache:
            self._put(key, self.fresh_model(network, checkpoint))
        return self._cache[key]

    def activations(self, network: int, checkpoint: int) -> dict[str, Tensor]:
        """Every layer's output on the analysis tokens, ``(n_tokens, dim)`` each."""
        key = ("acts", network, checkpoint)
        if key not in self._cache:
            model = self.model(network, checkpoint)
            parts: dict[str, list[Tensor]] = {}
            hidden = model.init_hidden(self.columns)
            with torch.no_grad(), capture(model, model.layer_names() + ("logits",)) as cap:
                for i in self.windows():
                    x, _ = get_batch(self.words, i, self.bptt)
                    _, hidden = model(x, hidden)
                    for name, a in cap.activations.items():
                        parts.setdefault(name, []).append(a.reshape(-1, a.shape[-1]))
            self._put(key, {k: torch.cat(v) for k, v in parts.items()})
        return self._cache[key]

    def tag_labels(self, tagset: str) -> tuple[Tensor, Tensor]:
        """The tag of each analysis token whose activation :meth:`activations` holds, and of the token after it."""
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
        write_cell(self.store, name, task, values)

    def layer_index(self) -> dict[str, int]:
        return {str(v): i for i, v in enumerate(self.layout.coords["layer"].values)}
