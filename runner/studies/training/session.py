"""A training run (:class:`TrainingSession`): the corpus, the store's layout, the checkpoints,
training and measuring; the study's plugin (:mod:`runner.studies.training.study`) opens it and
its estimate (:mod:`runner.studies.training.estimate`) times it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from runner.core import interrupt
from runner.checkpointed.axes import write_curves
from runner.checkpointed.files import checkpoint_dir
from runner.checkpointed.session import Checkpoints, forked_rng
from runner.studies.training.data.corpus import Corpus, load_corpus
from runner.data.hub import offline_hub
from runner.core.device import set_precision
from runner.plugin.measures import measure_problems, measures
from runner.core.plan import Task
from runner.spec.specfile import SpecError, SpecProblem
from runner.studies.training.context import Context, sentence_words
from runner.studies.training.layout import build_layout
from runner.studies.training.spec import TrainingStudySpec
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


def read_corpus(spec: TrainingStudySpec, tagsets: list[str], base: Path) -> Corpus:
    """The spec's corpus, read (a hub corpus from the local cache when the hub is off)."""
    with offline_hub():
        try:
            return load_corpus(spec.corpus, tagsets, seed=spec.experiment.seed, base=base)
        except ValueError as err:
            if not spec.corpus.generated:
                raise
            raise SpecProblem(("corpus", "scaffold", "phrases"), str(err)) from None


class TrainingSession:
    """A training run: the corpus, the store's layout, the checkpoints, training and measuring."""

    def __init__(self, p: Prepared, device):
        self.p, self.spec, self.device = p, p.spec, device
        st = p.state
        corpus = st.corpus or read_corpus(self.spec, list(st.tagsets), p.spec_file.path.parent)
        if corpus_key(corpus) != st.stats["corpus_key"]:  # the source changed under the same identity (a hub set)
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
        self.train_ids = {t.network: t.id for t in p.tasks if t.kind == "train"}
        self.checkpoints = Checkpoints(p.store_path)
        self.ctx: Context | None = None
        self.worker = False

    def _dir(self, store, network: int) -> Path:
        return checkpoint_dir(store.state_dir, self.spec.model[network].name, self.train_ids[network])

    def write_inputs(self, store) -> None:
        store.write("word_frequency", (slice(None),), np.asarray(self.corpus.frequencies(), dtype=np.float64))
        if self.corpus.word_class:
            store.write("word_class", (slice(None),), np.asarray(self.corpus.word_class, dtype=object))
        self.attach(store)

    def attach(self, store, worker: bool = False) -> None:
        """Measure on ``store``, laid out and its inputs written (by this process or a distributed
        executor's driver): the measures' context, and the checkpoints saved so far (``worker``: and
        before each measure, those other processes saved since)."""
        self.store, self.worker = store, worker
        if self.suites is not None:
            self.ctx = SuiteContext(self.spec, self.suites, self.corpus, self.layout, store, self.device)
            return
        self._scan()
        self.ctx = Context(self.spec, len(self.steps), self.corpus, self.layout, store, self.device,
                           self.checkpoints.paths)
        self.ctx.base = self.p.spec_file.path.parent  # relative paths of measures (treebanks)

    def _scan(self) -> None:
        """Take the checkpoints saved since the last look."""
        for n in range(len(self.spec.model)):
            files = {c: self._dir(self.store, n) / checkpoint_name(c, s) for c, s in enumerate(self.steps)}
            self.checkpoints.scan(n, files, self.train_ids[n])

    def available(self) -> set[str]:
        return self.checkpoints.available()

    def run(self, group: list[Task], report) -> dict:
        (t,) = group
        if t.kind == "train":
            return self._train(t, report)
        reg = measures("training")[t.kind]
        if self.suites is not None:
            interrupt.stall_point(self.store.state_dir, self.p.labels[t.network], self.steps[t.checkpoint])
        elif self.worker:  # the checkpoints it reads were saved since it opened, by another process
            self._scan()
        with forked_rng(self.device):
            reg(reg.Params(kind=t.kind, **t.params)).run(self.ctx, t)
        return {}

    def _train(self, t: Task, report) -> dict:
        n = t.network
        items = train(self.spec.model[n], t.params["seed"], self.spec.training, self.corpus, self.steps, t.id,
                      self._dir(report.store, n), self.device, report.progress)
        done = self.checkpoints.follow(items, n, report, lambda curves: _write_curves(report.store, n, curves))
        return {"resumed_from": done.resumed_from} if done else {}


def _write_curves(store, n: int, c) -> None:
    write_curves(store, n, {"train_loss": c.train_loss, "learning_rate": c.lr, "val_loss": c.val_loss,
                            "val_perplexity": np.exp(np.minimum(np.asarray(c.val_loss), 700)),
                            "epoch_train_loss": c.epoch_train_loss, "epoch_learning_rate": c.epoch_lr})
