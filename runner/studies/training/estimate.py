"""What a training spec costs: a few optimizer steps of each network's real training, timed and scaled.

The calibration runs :func:`train` itself (forward, loss, backward, clipping, the SGD step) on a
corpus of random tokens with the spec's vocabulary size and batch shape (a step's cost does not
depend on which tokens), and stops it after a few timed steps. A train task costs its setup plus
its steps (``steps_per_epoch x epochs``), a validation pass over the real validation split's
size per epoch, and its checkpoint and resume files (each timed once); disk is its checkpoints
(and the resume file) at the model's size. A tagger's training is timed with 50 tags.

The measure tasks are timed as they run: each network's tasks at its busiest checkpoint, one after
another from an empty cache (the model loaded, the analysis tokens run through it once, as at every
checkpoint), on the real corpus and a real store in a temporary folder, with the network's
untrained weights saved as that checkpoint. Their mean scales to all of the network's measure
tasks. Checkpoint suites' measures are not timed (the estimate then says it is a lower bound).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from runner.studies.training.data.corpus import Corpus, TagStreams, Variant
from runner.studies.training.data.tokens import Vocabulary, batchify
from runner.core.estimate import Enough, NoEstimate, StepTimer, Unit, device_key
from runner.studies.training.spec import NetworkSpec, LSTMTraining, read_corpus
from runner.plugin.measures import measures
from runner.storage.store import Store
from runner.studies.training.context import Context
from runner.studies.training.layout import build_layout

if TYPE_CHECKING:
    import torch

if TYPE_CHECKING:
    from runner.plugin.study import Prepared

TAGS = 50


def estimate(p, device: torch.device, precision: str | None, calibrated) -> tuple[list[Unit], list[str]]:
    import torch  # lazy: torch

    if precision not in (None, "fp32"):
        raise NoEstimate("the training study trains in fp32")
    stats = p.state.stats
    if stats is None:
        raise NoEstimate("the corpus has not been read")
    training = p.spec.training
    units, untimed = [], []
    measured = _MeasureTimer(p, device, calibrated)
    valid = stats.valid_tokens
    for n, net in enumerate(p.spec.model):
        tasks = [t for t in p.tasks if t.network == n]
        trains = [t for t in tasks if t.kind == "train"]
        key = {"study": "training", "device": device_key(device), "torch": torch.__version__, "kind": net.kind,
               "mode": net.mode if net.kind == "tagger" else None, "vocab": stats.vocab, "valid_tokens": valid,
               "training": training.model_dump(mode="json", include={
                   "embedding_dim", "hidden_dim", "num_layers", "dropout", "batch_size", "bptt", "clip", "momentum",
                   "eval_batch_size"}), "v": 2}
        timed = calibrated(key, lambda net=net: time_training(net, training, stats.vocab, device, valid))
        n_checkpoints = len(p.state.steps)
        # per epoch: a validation pass and the resume file; per checkpoint: its file and the resume file
        ends = training.epochs * (timed["eval_s"] + timed["save_s"]) + 2 * n_checkpoints * timed["save_s"]
        seconds = sum(timed["setup_s"] + t.steps * timed["step_s"] + ends for t in trains)
        measures = [t for t in tasks if t.kind != "train"]
        measuring = measured(n, measures) if measures else 0.0
        if measuring is None:
            untimed += measures
        seconds += measuring or 0.0
        checkpoints = n_checkpoints + 1  # and the resume file
        units.append(Unit(net.name, [[t.id] for t in tasks], seconds, checkpoints * timed["param_bytes"] * len(trains),
                          lower_bound=measuring is None))
    notes = ["disk: the checkpoints only, not the store's measures"]
    if untimed:
        notes.insert(0, f"the {len(untimed)} measure tasks of the networks marked >= are not timed ({measured.why})")
    if any(n.kind == "tagger" for n in p.spec.model):
        notes.append(f"taggers' training timed with {TAGS} tags")
    return units, notes


class _MeasureTimer:
    """Seconds of each network's measure tasks, calibrated once per network kind and measures (see
    the module's docstring): None when they cannot be timed (``why`` says why)."""

    def __init__(self, p: Prepared, device: torch.device, calibrated):
        self.p, self.device, self.calibrated = p, device, calibrated
        self.why = ""
        self._corpus = None

    def __call__(self, network: int, tasks: list) -> float | None:
        """Seconds of all of ``tasks`` (one network's measure tasks), or None."""
        import torch  # lazy: torch

        p = self.p
        if p.state.suites is not None:
            self.why = "checkpoint suites' measures are not timed"
            return None
        busiest = max({t.checkpoint for t in tasks}, key=lambda c: (sum(t.checkpoint == c for t in tasks), c))
        first = {}  # one task of each measure, at the busiest checkpoint where it runs there
        for t in sorted(tasks, key=lambda t: t.checkpoint != busiest):
            first.setdefault(t.measure, t)
        net, spec, stats = p.spec.model[network], p.spec, p.state.stats
        key = {"study": "training-measures", "device": device_key(self.device), "torch": torch.__version__,
               "network": net.model_dump(mode="json", exclude={"name", "seed"}), "corpus": spec.corpus.model_dump(mode="json"),
               "stats": {"vocab": stats.vocab, "tokens": list(stats.tokens)},
               "training": spec.training.model_dump(mode="json", include={"embedding_dim", "hidden_dim", "num_layers",
                                                                            "bptt", "eval_batch_size", "batch_size"}),
               "tasks": [[t.measure, t.kind, t.params] for t in first.values()], "v": 2}
        try:
            timed = self.calibrated(key, lambda: self._time(network, busiest, list(first.values())))
        except NoEstimate as err:
            self.why = str(err)
            return None
        checkpoints = len({t.checkpoint for t in tasks})
        return checkpoints * timed["load_s"] + sum(timed["task_s"][t.measure] for t in tasks)

    def corpus(self):

        if self._corpus is None:
            p = self.p
            if p.state.corpus is None:
                p.state = p.state.with_corpus(read_corpus(p.spec, list(p.state.tagsets), p.spec_file.path.parent))
            self._corpus = p.state.corpus
        return self._corpus

    def _time(self, network: int, checkpoint: int, tasks: list) -> dict:
        """Load the network at ``checkpoint`` and run it over the analysis tokens (``load_s``), then
        run ``tasks`` as the session would (``task_s``: seconds by measure)."""
        import torch  # lazy: torch
        from runner.checkpointed.files import save, weights  # lazy: torch
        from runner.studies.training.train import build_model  # lazy: torch

        p, corpus = self.p, self.corpus()
        spec, steps = p.spec, p.state.steps
        layout = build_layout(spec, steps, p.state.steps_per_epoch, corpus, None)
        with tempfile.TemporaryDirectory(prefix="calibration-") as tmp:
            paths = {}
            for n, net in enumerate(spec.model):  # every network: a task may read another's checkpoints
                f = Path(tmp) / f"{n}.safetensors"
                model = build_model(net, spec.training, corpus, spec.network_seed(n))
                save(f, weights(model), {"kind": "calibration"})
                paths.update({(n, c): f for c in range(len(steps))})
            store = Store(Path(tmp) / "calibration.zarr")
            store.open(layout, {})
            ctx = Context(spec, len(steps), corpus, layout, store, self.device, paths)
            ctx.base = p.spec_file.path.parent
            t0 = time.perf_counter()
            ctx.activations(network, checkpoint)
            load_s = time.perf_counter() - t0
            registry, task_s = measures("training"), {}
            for t in tasks:
                reg = registry[t.kind]
                t0 = time.perf_counter()
                with torch.random.fork_rng():
                    reg(reg.Params(kind=t.kind, **t.params)).run(ctx, t)
                task_s[t.measure] = time.perf_counter() - t0
        return {"load_s": load_s, "task_s": task_s}


def time_training(net: NetworkSpec, training: LSTMTraining, vocab: int, device: torch.device,
                  valid_tokens: int = 0) -> dict:
    """Train the network on random tokens until a few steps are timed; then time a validation pass
    over ``valid_tokens`` random tokens (``eval_s``) and one checkpoint file (``save_s``)."""
    import torch  # lazy: torch
    from runner.checkpointed.files import save, weights  # lazy: torch
    from runner.studies.training.train import build_model, evaluate, train  # lazy: torch

    timer = StepTimer(device)
    gen = torch.Generator().manual_seed(0)
    tokens = (timer.warmup + timer.max_steps + 2) * training.batch_size * training.bptt  # no epoch end
    stream = lambda size, high: torch.randint(0, high, (size,), generator=gen)  # noqa: E731
    words = _vocabulary(vocab)
    corpus = Corpus(words, stream(tokens, vocab), stream(training.eval_batch_size * training.bptt * 2, vocab),
                    stream(10, vocab))
    if net.corpus_variant:
        corpus.variants[net.corpus_variant] = Variant(corpus.train, corpus.valid)
    if net.kind == "tagger":
        corpus.tags[net.tagset] = TagStreams(_vocabulary(TAGS), stream(tokens, TAGS), stream(corpus.valid.numel(), TAGS))
        net = net.model_copy(update={"shuffled": False})  # the same step on tags in another order
    model = build_model(net, training, corpus, 0)  # once untimed: imports warm, as in a run
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    with tempfile.TemporaryDirectory(prefix="calibration-") as tmp:
        timer.start()
        try:
            for _ in train(net, 0, training, corpus, [], "calibration", Path(tmp), device,
                           timer.progress):
                pass
        except Enough:
            pass
        val = batchify(stream(max(valid_tokens, 2 * training.eval_batch_size), vocab), training.eval_batch_size)
        val_tags = batchify(stream(val.numel(), TAGS), training.eval_batch_size) if net.kind == "tagger" else None
        t0 = time.perf_counter()
        evaluate(model.to(device), val.to(device), None if val_tags is None else val_tags.to(device), training.bptt)
        eval_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        save(Path(tmp) / "checkpoint.safetensors", weights(model), {"kind": "calibration"})
        save_s = time.perf_counter() - t0
    return {**timer.result(), "param_bytes": param_bytes, "eval_s": eval_s, "save_s": save_s}


def _vocabulary(size: int) -> Vocabulary:
    itos = tuple(str(i) for i in range(size))
    return Vocabulary(itos, {s: i for i, s in enumerate(itos)}, {s: 1 for s in itos}, unk=None, eos=None)


def thread_key(p) -> dict:
    import torch  # lazy: torch

    stats, training = p.state.stats, p.spec.training
    return {"study": "training", "torch": torch.__version__, "vocab": stats.vocab if stats else None,
            "training": training.model_dump(mode="json", include={
                "embedding_dim", "hidden_dim", "num_layers", "batch_size", "bptt"})}


def thread_probe(p, device: torch.device):
    """One training step (forward and backward on random tokens) of the spec's LSTM language model,
    for :mod:`runner.run.threads`; None for suites of published checkpoints and unread corpora."""
    import torch  # lazy: torch
    from runner.studies.training.train import build_model  # lazy: torch

    stats, training = p.state.stats, p.spec.training
    lm = next((n for n in p.spec.model if n.kind == "lm"), None)
    if stats is None or p.state.suites or lm is None:
        return None
    empty = torch.zeros(0, dtype=torch.long)
    model = build_model(lm, training, Corpus(_vocabulary(stats.vocab), empty, empty, empty), 0, device)
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, stats.vocab, (training.batch_size, training.bptt), generator=gen).to(device)

    def step() -> None:
        model.zero_grad(set_to_none=True)
        logits, _ = model(x)
        model.loss(logits, x).backward()

    return step
