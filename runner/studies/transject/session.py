"""A TransJect run (:class:`TransJectSession`): the data and tokenizer, the store's layout, the
checkpoints, training and measuring; the study's plugin (:mod:`runner.studies.transject.study`)
opens it and its estimate (:mod:`runner.studies.transject.estimate`) times it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from models.activations import tokens
from models.hub import ModelLoadError, load_tokenizer
from models.registry import family_for
from runner.data.registry import InputError
from runner.studies.transject.data.classification import Split, build_vocab, encode, labelled_splits, tokenize
from runner.checkpointed.activations import Reading
from runner.checkpointed.axes import write_curves
from runner.checkpointed.files import load_weights
from runner.checkpointed.schedule import checkpoint_resource
from runner.checkpointed.session import CheckpointedSession, relative_path
from runner.core.device import set_precision
from runner.plugin.measures import measure_problems, measures
from runner.core.plan import Task
from runner.spec.specfile import SpecError
from runner.plugin.study import Prepared, SourceUnavailable
from runner.studies.transject import measures as _registrations  # noqa: F401  (registers the measures)
from runner.studies.transject.layout import build_layout
from runner.studies.transject.measure import TransJectShape, View
from runner.studies.transject.models import (build, load_checkpoint_model, n_experts, n_layers,
                                             params_of, read_checkpoint, source_of, vocab_size)
from runner.studies.transject.spec import PAPER_SENTENCE, TransJectSpec
from runner.studies.transject.state import Net
from runner.studies.transject.train import TransJectRun, checkpoint_name, evaluate, export, steps_per_epoch, train_run


def load_splits(spec: TransJectSpec, base: Path, how=None) -> tuple[Split, Split]:
    d = spec.data
    how = how or d.tokenize
    train, test = labelled_splits(d.source, base, splits=(d.train_split, d.test_split), text=d.text, label=d.label,
                                  how=how, lowercase=d.lowercase, test_fraction=d.test_fraction,
                                  seed=spec.experiment.seed, subset=d.subset, options=d.listops.model_dump())
    cut = lambda s, n: s if n is None else Split(s.tokens[:n], s.labels[:n])  # noqa: E731
    return cut(train, d.max_train), cut(test, d.max_test)


@dataclass
class Data:
    """What a run reads from its data source: both splits, the vocabulary and the analysis sentence."""

    train: Split
    test: Split
    vocab: list[str]
    unk: str
    sentence: list[str]


def read_data(p: Prepared) -> Data:
    """The spec's splits (tokenized by its hub tokenizer, if it names one), vocabulary and analysis
    sentence (``max_length`` tokens at most)."""
    d = p.spec.data
    hub_tokenizer = None
    if d.tokenizer and not d.pretokenized:
        try:
            hub_tokenizer = load_tokenizer(d.tokenizer)
        except ModelLoadError as err:
            raise SourceUnavailable(str(err)) from None
    how = hub_tokenizer.tokenize if hub_tokenizer is not None else d.tokenize
    try:
        train, test = load_splits(p.spec, p.spec_file.path.parent, how)
    except InputError as err:
        raise SourceUnavailable(str(err)) from None
    if not train.labels or not test.labels:
        raise SourceUnavailable(f"[data] source {d.source!r}: an empty split (train {len(train.labels)}, "
                          f"test {len(test.labels)} examples)")
    if hub_tokenizer is not None:
        vocab, unk = list(hub_tokenizer.convert_ids_to_tokens(list(range(len(hub_tokenizer))))), hub_tokenizer.unk_token or "<unk>"
    else:
        vocab, unk = build_vocab(train.tokens, d.vocab_size), "<unk>"
    if d.analysis_text is not None:  # ListOps: its tokens are separated by spaces
        sentence = d.analysis_text.split() if d.pretokenized else tokenize(d.analysis_text, how, d.lowercase)
    elif d.pretokenized:
        sentence = test.tokens[0]
    else:
        sentence = tokenize(PAPER_SENTENCE, how, d.lowercase)
    return Data(train, test, vocab, unk, sentence[: d.max_length])


class TransJectSession(CheckpointedSession):
    """A run: the data, the store's layout, training, loading saved weights and measuring (the
    kit's :class:`~runner.checkpointed.session.CheckpointedSession` drives them)."""

    def __init__(self, p: Prepared, device):
        super().__init__(p, device)
        spec, d = p.spec, p.spec.data
        data = p.state.data or read_data(p)
        p.state = p.state.with_data(data)  # a distributed executor's workers get it with the plan: they never read it
        train, test = data.train, data.test
        self.vocab, self.unk = data.vocab, data.unk
        self.n_classes = d.n_classes or d.implied("n_classes") or max(train.labels + test.labels) + 1
        labels = set(train.labels + test.labels)
        if min(labels) < 0 or max(labels) >= self.n_classes:  # a hub set's labels are first seen here
            raise SpecError(p.spec_file.path, [p.spec_file.problem(
                ("data", "n_classes"), f"labels are classes 0..{self.n_classes - 1}, but {d.source!r} holds "
                f"{min(labels) if min(labels) < 0 else max(labels)}")])
        set_precision("fp32")
        self.train = encode(train.tokens, train.labels, self.vocab, d.max_length, self.unk)
        self.test_split = test
        self.sentence = data.sentence
        self.spe = steps_per_epoch(len(self.train.labels), spec.training.batch_size)
        self.dirs = p.state.dirs
        self.vocabs: dict[int, list[str]] = {}
        self.nets: list[Net] = []
        for n, net in enumerate(p.state.nets):
            m = net.entry
            if m.checkpoint:
                variant, params, vocab = read_checkpoint(self.dirs[n])
                if vocab is not None:
                    self.vocabs[n] = vocab
            else:
                variant, params = m.variant, params_of(m, len(self.vocab), self.n_classes, spec.pooling(m))
            self.nets.append(dataclasses.replace(net, variant=variant, params=params))
        layers = ["embedding"] + [f"layer{i + 1}" for i in range(max(n_layers(n.params) for n in self.nets))]
        experts = max(n_experts(n.variant, n.params) for n in self.nets)
        self.registrations = {m.kind: measures("transject")[m.kind](m) for m in spec.measure}
        late = [p.spec_file.problem(loc, message, type(spec)) for loc, message in
                measure_problems(p.study.name, spec, p.study.measure_view(spec).knowing(self.sentence))]
        if late:  # the analysis sentence of ListOps or a hub tokenizer is known only now
            raise SpecError(p.spec_file.path, late)
        self.layout = build_layout(spec, self.nets, self.spe, TransJectShape(layers, experts, list(self.sentence),
                                                                    [n.label for n in self.nets]),
                                   self.registrations)
        self.n_layers = len(layers)
        self.layer_names = layers
        self.seed = spec.experiment.seed
        self.labels = [net.label for net in self.nets]
        self._encoded: dict[int, tuple] = {}
        self._runs: dict[int, TransJectRun] = {}  # the networks training now (their best epoch, once trained)

    # ---------------------------------------------------------------- data per network

    def encoded(self, n: int):
        """(test set, analysis examples, analysis sentence ids) encoded with the network's vocabulary."""
        if n not in self._encoded:
            vocab = self.vocabs.get(n, self.vocab)
            d = self.spec.data
            test = encode(self.test_split.tokens, self.test_split.labels, vocab, d.max_length, self.unk)
            k = min(d.analysis_examples, len(test.labels))
            sent = encode([self.sentence], [0], vocab, max(len(self.sentence), 1), self.unk)
            vsize = vocab_size(self.nets[n].params)
            for t in (test.ids, sent.ids):
                t[t >= vsize] = 1  # a checkpoint with a smaller vocabulary than its vocab.json: <unk>
            self._encoded[n] = (test, (test.ids[:k], test.mask[:k]), sent.ids)
        return self._encoded[n]

    # ---------------------------------------------------------------- what the kit's session asks

    def train_id(self, n: int) -> str | None:
        return self.nets[n].train_id if self.nets[n].trained else None

    def checkpoint_files(self, n: int) -> dict[int, tuple[Path, int]]:
        ckpt = self.checkpoint_dir(self.store, n)
        return {e: (ckpt / checkpoint_name(e, 0), e * self.spe) for e in range(self.spec.training.epochs + 1)}

    def scan(self) -> None:
        for n, net in enumerate(self.nets):
            if not net.trained:  # a saved model: its one checkpoint is there from the start
                self.paths[(n, 0)] = self.dirs[n] / "model.safetensors"
        super().scan()

    def handlers(self) -> dict:
        return {"load": self._load}

    def training(self, t: Task, report):
        net, E, spe = self.nets[t.network], self.spec.training.epochs, self.spe
        test, _, _ = self.encoded(t.network)
        run = self._runs[t.network] = TransJectRun(net.variant, net.params, net.seed, self.spec.training,
                                                   self.train, test, self.device)
        return train_run(run, t.id, net.label, self.checkpoint_dir(report.store, t.network), self.device,
                         lambda step: report.progress(min(E, step // spe)))

    def write_curves(self, store, n: int, c) -> None:
        write_curves(store, n, {"train_loss": c.train_loss, "test_loss": c.test_loss, "test_accuracy": c.test_accuracy})

    def _rel(self, path: Path) -> np.ndarray:
        return relative_path(path, self.p.store_path)

    def trained(self, t: Task, report, done) -> dict:
        store, n, net = report.store, t.network, self.nets[t.network]
        c, best = done.curves, self._runs.pop(n).best_epoch
        store.write("best_epoch", (n,), np.asarray(best, dtype=np.float64))
        store.write("stopped_epoch", (n,), np.asarray(done.epochs, dtype=np.float64))
        if best > 0:
            store.write("accuracy", (n,), np.asarray(c.test_accuracy[best - 1]))
            store.write("final_test_loss", (n,), np.asarray(c.test_loss[best - 1]))
            out = store.state_dir / "export" / net.label
            export(out, net.variant, net.params, self.checkpoint_dir(store, n) / checkpoint_name(best, 0),
                   self.vocab)
            store.write("export_path", (n,), self._rel(out))
        return {"resumed_from": done.resumed_epoch}

    def _load(self, t: Task, report) -> dict:
        n = t.network
        model = load_checkpoint_model(self.dirs[n], self.device)
        test, _, _ = self.encoded(n)
        loss, acc = evaluate(model, test, self.spec.training.batch_size, self.device, self.nets[n].seed)
        report.store.write("accuracy", (n,), np.asarray(acc))
        report.store.write("final_test_loss", (n,), np.asarray(loss))
        report.store.write("checkpoint_path", (n, 0), self._rel(self.dirs[n]))
        report.provide(checkpoint_resource(n, 0))
        return {}

    # ---------------------------------------------------------------- measures

    def model_at(self, n: int, e: int):
        net = self.nets[n]
        if not net.trained:
            return load_checkpoint_model(self.dirs[n], self.device)
        model = build(net.variant, net.params, 0, self.device)
        load_weights(model, self.paths[(n, e)], self.device)
        return model.eval()

    def reading(self, n: int, e: int, gradients: bool = False) -> Reading:
        """The network at epoch ``e`` read through its family's adapter, in float64: the analysis examples (one
        batch, padding masked), then the analysis sentence, the entropic u drawn from one generator per epoch."""
        model = self.model_at(n, e)
        _, (ids, mask), sent = self.encoded(n)
        gen = torch.Generator(device=self.device).manual_seed(self.seed * 1_000_003 + e)
        return Reading(family_for(source_of(self.nets[n].variant)), model,
                       (tokens(ids.to(self.device), mask.to(self.device)),), tokens(sent.to(self.device)),
                       {"generator": gen}, torch.float64)

    def view(self, n: int, e: int) -> View:
        """The view of (n, e) (what :class:`~.measure.EpochContext` gives a measure), from the kit's activation
        cache: read once for the measures of the running group, and kept for the next groups (every epoch of a
        network compared with its final one)."""
        got = self.cache(n, e)
        return View(got.model, self.nets[n].variant, self.nets[n].params, list(got.batch.values()), got.mask,
                    list(got.sentence.values()), self.seed * 1_000_003 + e)

    @property
    def sentence_tokens(self) -> list[str]:
        return list(self.sentence)

    def measure(self, group: list[Task]) -> None:
        n, e = group[0].network, group[0].checkpoint
        if self.paths.get((n, e)) is None:
            return  # after an early stop there are no weights at this epoch: the cell stays NaN
        self.cache(n, e)  # the group's activations, read before its measures draw (as they always were)
        for t in group:
            self.registrations[t.kind].run(self, t)
