"""A training run (:class:`TrainingSession`): the corpus, the store's layout, the checkpoints,
training and measuring; the study's plugin (:mod:`runner.studies.training.study`) opens it and
its estimate (:mod:`runner.studies.training.estimate`) times it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from runner.core import interrupt
from runner.checkpointed.axes import write_curves
from runner.checkpointed.session import CheckpointedSession
from runner.studies.training.data.corpus import Corpus
from runner.core.device import set_precision
from runner.plugin.measures import measure_problems, measures
from runner.core.plan import Task
from runner.spec.specfile import SpecError
from runner.studies.training.context import Context, sentence_words
from runner.studies.training.layout import build_layout
from runner.studies.training.spec import read_corpus
from runner.studies.training.suite import SuiteContext
from runner.studies.training.train import checkpoint_name, train
from runner.plugin.study import Prepared, SourceUnavailable


def corpus_key(corpus: Corpus) -> str:
    h = hashlib.sha256()
    for t in (corpus.train, corpus.valid, corpus.test):
        h.update(t.numpy().tobytes())
    h.update("\n".join(corpus.vocab.itos).encode())
    for name in sorted(corpus.tags):
        s = corpus.tags[name]
        h.update(name.encode() + s.train.numpy().tobytes() + s.valid.numpy().tobytes())
        if s.words is not None:  # tags of another corpus (GMB, the longest documents): its words and test tags
            h.update(s.test.numpy().tobytes() + b"".join(w.numpy().tobytes() for w in s.words))
    for name, v in corpus.variants.items():  # scaffold corpora: each variant's streams and test sets
        h.update(name.encode() + v.train.numpy().tobytes() + v.valid.numpy().tobytes())
        for test, cases in sorted(v.tests.items()):
            h.update(test.encode() + np.ascontiguousarray(cases.inputs).tobytes())
    return h.hexdigest()[:16]


class TrainingSession(CheckpointedSession):
    """A training run: the corpus, the store's layout, training and measuring (the kit's
    :class:`~runner.checkpointed.session.CheckpointedSession` drives them)."""

    def __init__(self, p: Prepared, device):
        super().__init__(p, device)
        st = p.state
        corpus = st.corpus or read_corpus(self.spec, list(st.tagsets), p.spec_file.path.parent)
        if corpus_key(corpus) != st.stats.corpus_key:  # the source changed under the same identity (a hub set)
            st.stats_file.unlink(missing_ok=True)
            raise SourceUnavailable(f"[corpus] source {self.spec.corpus.source!r} changed since it was planned; run apply "
                              "again to plan it anew")
        p.state = st.with_corpus(corpus)  # a distributed executor's workers get it with the plan: they never read it
        set_precision("fp32")  # the thesis' LSTMs in IEEE fp32 (cuDNN would otherwise use TF32 on CUDA)
        self.corpus, self.steps = corpus, st.steps
        self.spe = st.steps_per_epoch
        self.suites = st.suites
        sentence = sentence_words(self.spec, corpus)  # known only now: what a shared measure cannot do with it
        late = [p.spec_file.problem(loc, message, type(self.spec)) for loc, message in
                measure_problems(p.study.name, self.spec, p.study.measure_view(self.spec).knowing(sentence))]
        if late:
            raise SpecError(p.spec_file.path, late)
        self.layout = build_layout(self.spec, self.steps, self.spe, corpus, self.suites)
        self.labels = [m.name for m in self.spec.model]
        self.train_ids = {t.network: t.id for t in p.tasks if t.kind == "train"}
        self.ctx: Context | None = None

    def write_inputs(self, store) -> None:
        store.write("word_frequency", (slice(None),), np.asarray(self.corpus.frequencies(), dtype=np.float64))
        if self.corpus.word_class:
            store.write("word_class", (slice(None),), np.asarray(self.corpus.word_class, dtype=object))
        self.attach(store)

    def attach(self, store, worker: bool = False) -> None:
        """Measure on ``store``: the kit's look at the checkpoints, then the measures' context."""
        super().attach(store, worker)
        if self.suites is not None:
            self.ctx = SuiteContext(self.spec, self.suites, self.corpus, self.layout, store, self.device, self.cache)
            return
        self.ctx = Context(self.spec, len(self.steps), self.corpus, self.layout, store, self.device, self.paths,
                           self.cache)
        self.ctx.base = self.p.spec_file.path.parent  # relative paths of measures (treebanks)

    # ---------------------------------------------------------------- what the kit's session asks

    def train_id(self, network: int) -> str | None:
        return self.train_ids.get(network)  # none for a suite: it is not trained here

    def checkpoint_files(self, network: int) -> dict[int, tuple[Path, int]]:
        folder = self.checkpoint_dir(self.store, network)
        return {c: (folder / checkpoint_name(c, s), s) for c, s in enumerate(self.steps)}

    def training(self, t: Task, report):
        return train(self.spec.model[t.network], self.spec.network_seed(t.network), self.spec.training, self.corpus, self.steps, t.id,
                     self.checkpoint_dir(report.store, t.network), self.device, report.progress)

    def write_curves(self, store, n: int, c) -> None:
        write_curves(store, n, {"train_loss": c.train_loss, "learning_rate": c.lr, "val_loss": c.val_loss,
                                "val_perplexity": np.exp(np.minimum(np.asarray(c.val_loss), 700)),
                                "epoch_train_loss": c.epoch_train_loss, "epoch_learning_rate": c.epoch_lr})

    def reading(self, network: int, checkpoint: int, gradients: bool = False):
        return self.ctx.reading(network, checkpoint, gradients)

    def measure(self, group: list[Task]) -> None:
        (t,) = group
        reg = measures("training")[t.kind]
        if self.suites is not None:
            interrupt.stall_point(self.store.state_dir, self.p.labels[t.network], self.steps[t.checkpoint])
        reg(reg.Params(kind=t.kind, **t.params)).run(self.ctx, t)
