"""The training study: LSTM language models and taggers trained with the thesis' recipe and measured
at checkpoints (Saphra 2021, Ch. 4 and 6).

Tasks: one ``train`` task per network, which provides ``checkpoint:<network>:<index>`` as each
scheduled checkpoint is saved, and one task per (measure, network, checkpoint) that needs the
checkpoints it reads; the scheduler runs a measure as soon as they exist, between training steps
(its random state forked, so it cannot change the training run).

Planning needs the corpus' size (steps per epoch) and a hash of its streams (in the task ids).
Both are kept in ``$TRANSIENT_CACHE/corpora/`` under a key of the ``[corpus]`` table and the
source's identity (a local file's bytes), so a plan or a finished apply reads no corpus.
"""

from __future__ import annotations

import hashlib
import json
import platform
from pathlib import Path

import numpy as np

from models.registry import cache_dir
from models.source import Source
from runner import interrupt
from runner.checkpointed.axes import write_curves
from runner.checkpointed.files import checkpoint_dir
from runner.checkpointed.session import Checkpoints, forked_rng
from runner.data.corpus import Corpus, CorpusError, load_corpus
from runner.data.scaffold import VERSION as SCAFFOLD_VERSION
from runner.data.sources import anchor, offline_hub
from runner.data.tiny_tagged import SOURCE as TINY_TAGGED
from runner.data.tiny_tagged import VERSION as TINY_TAGGED_VERSION
from runner.execute.device import device_unavailable, set_precision
from runner.measures import measures
from runner.plan import Task
from runner.requirements import Requirement
from runner.specfile import SpecError, SpecFile, SpecProblem
from runner.studies.training import measures as _registrations  # noqa: F401  (registers the measures)
from runner.studies.training import sizes
from runner.studies.training.context import Context, sentence_words
from runner.studies.training.layout import build_layout
from runner.studies.training.plan import make_tasks, suite_tasks, task_label
from runner.studies.training.spec import (
    GMB_TAGSETS,
    TABLES,
    TrainingStudy,
    check_sources,
    missing_extras,
    spec_model,
)
from runner.studies.training.suite import SuiteContext
from runner.studies.training.suite import resolve as resolve_suites
from runner.studies.training.train import checkpoint_name, steps_per_epoch, train
from runner.study import Prepared, Study, Unavailable, register


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


def _source_identity(study: TrainingStudy, base: Path) -> str:
    src = study.corpus.source
    if src.on_hub:
        return src
    if src == "scaffold:":  # generated: the generator's code is the identity
        return f"{src} v{SCAFFOLD_VERSION}"
    if src == TINY_TAGGED:  # generated: the generator's version is the identity
        return f"{src} v{TINY_TAGGED_VERSION}"
    if src.scheme == "builtin":
        return f"{src} python {platform.python_version()}"  # the builtin text follows Python's version
    path = Path(anchor(src, base))
    return f"{path.resolve()} sha256 {hashlib.sha256(path.read_bytes()).hexdigest()}"


def _gmb_identity(study: TrainingStudy, key: str, base: Path) -> str:
    path = Path(anchor(getattr(study.corpus, key), base))
    return f"{key} {path.resolve()} sha256 {hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else '-'}"


def _stats_path(study: TrainingStudy, tagsets: list[str], base: Path) -> Path:
    key = json.dumps([study.corpus.key(), tagsets, study.experiment.seed,
                      study.training.batch_size, study.training.bptt, _source_identity(study, base)]
                     + [_gmb_identity(study, k, base) for k in ("gmb_pos", "gmb_sem") if getattr(study.corpus, k)],
                     sort_keys=True)
    return cache_dir() / "corpora" / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"


def _stats(corpus: Corpus, study: TrainingStudy) -> dict:
    out = {"corpus_key": corpus_key(corpus), "steps_per_epoch": steps_per_epoch(corpus.train.numel(), study.training),
           "tokens": [corpus.train.numel(), corpus.valid.numel(), corpus.test.numel()], "vocab": len(corpus.vocab)}
    own = {t: steps_per_epoch(s.words[0].numel(), study.training) for t, s in corpus.tags.items() if s.words is not None}
    if own:  # taggers of another corpus (GMB, the longest documents)
        out["tagger_steps_per_epoch"] = own
    return out


UD_EWT = ("UD English-EWT (github.com/UniversalDependencies/UD_English-EWT, e.g. en_ewt-ud-test.conllu) as a "
          "local .conllu file, or a hub dataset with the UD columns tokens, upos, head in the datasets cache")


def _treebanks_unmet(study: TrainingStudy, base: Path) -> list[str]:
    """Treebanks of measures (``treebank = ...``) that are not here: a missing file, an uncached hub set."""
    from runner.data.sources import InputError, load_treebank

    out = []
    for i, m in enumerate(study.measure):
        tb = getattr(m, "treebank", None)
        if not tb:
            continue
        where = f"[[measure]] {i} ({m.kind}) treebank {tb!r}"
        if not Source(tb).on_hub:
            path = Path(anchor(tb, base))
            if not path.is_file():
                out.append(f"{where}: no file {path}; download {UD_EWT}")
            continue
        try:
            load_treebank(tb, base, m.subset, m.split)
        except InputError as err:
            out.append(f"{where}: not available here ({err}); use {UD_EWT}")
    return out


GMB = ("the Groningen Meaning Bank's tags as a GMB-style file, one token per line: word, PTB POS, SEM tag "
       "(e.g. the silver SEM data of Bjerva et al. 2016, gmb.let.rug.nl / pmb.let.rug.nl)")


def _gmb_unmet(study: TrainingStudy, base: Path) -> list[str]:
    """GMB-style tagged files the tag sets need that are not here (data to fetch, not a spec error)."""
    out = []
    for key in dict.fromkeys(GMB_TAGSETS[t] for t in study.tagsets() if t in GMB_TAGSETS):
        name = getattr(study.corpus, key)
        path = Path(anchor(name, base))
        if not path.is_file():
            out.append(Requirement(f"[corpus] {key}", f"no file {path}", kind="file", name=str(path),
                                   fix=f"download {GMB}"))
    return out


_EXPLAIN_TRAINING = {"epochs": 1, "batch_size": 4, "bptt": 5, "eval_batch_size": 2, "embedding_dim": 4, "hidden_dim": 4}
#: Small specs whose corpora are generated, for ``runner explain`` (:meth:`TrainingStudyPlugin.variables_of`).
EXPLAIN_EXAMPLES = (
    {"experiment": {"name": "explain"}, "training": _EXPLAIN_TRAINING,
     "corpus": {"source": TINY_TAGGED, "min_count": 2, "drop_rare_sentences": False, "analysis_tokens": 100},
     "model": [{"name": "lm", "kind": "lm"}, {"name": "tagger", "kind": "tagger", "tagset": "upos"}]},
    {"experiment": {"name": "explain"}, "training": _EXPLAIN_TRAINING,
     "corpus": {"source": "scaffold:", "analysis_tokens": 100,
                "scaffold": {"lengths": [3], "vocab_size": 50, "tokens": 3000, "rules": 40, "phrases": 10,
                             "familiar_repeats": 40, "valid_tokens": 300, "test_cases": 20}},
     "model": [{"name": "familiar", "corpus_variant": "familiar_k3"}]},
)


@register
class TrainingStudyPlugin(Study):
    """Networks measured while they train (training as time): LSTM language models and taggers."""

    name, spec_factory, table_models = "training", staticmethod(spec_model), TABLES
    figure_recipes = "runner.studies.training.figures"

    def check(self, spec: TrainingStudy, sf: SpecFile) -> list[str]:
        return check_sources(spec, sf)

    def prepare(self, spec: TrainingStudy, sf: SpecFile) -> Prepared:
        unmet = missing_extras(spec) + _treebanks_unmet(spec, sf.path.parent) + _gmb_unmet(spec, sf.path.parent)
        device = device_unavailable(spec.training.device)
        if device:
            unmet.append(Requirement("[training] device", device, kind="device", name=spec.training.device))
        gmb_missing = {k for k in GMB_TAGSETS.values() if any(k in u for u in unmet)}
        tagsets = [t for t in spec.tagsets() if not (unmet and t.startswith("spacy_"))  # spaCy may be missing
                   and GMB_TAGSETS.get(t) not in gmb_missing]  # and GMB files
        stats_file = _stats_path(spec, tagsets, sf.path.parent)
        stats = corpus = None
        if stats_file.is_file():
            stats = json.loads(stats_file.read_text())
        else:
            if spec.corpus.scaffold is not None:
                sizes.check_scaffold(spec.corpus.scaffold)
            try:
                corpus = self._load(spec, tagsets, sf.path.parent)
                stats = _stats(corpus, spec)
                stats_file.parent.mkdir(parents=True, exist_ok=True)
                stats_file.write_text(json.dumps(stats))
            except CorpusError as err:
                if not spec.corpus.source.on_hub:
                    raise Unavailable(str(err)) from None
                unmet.append(str(err))
        labels = [n.name for n in spec.model]
        suites = None
        if spec.suites:
            suites, missing = resolve_suites(spec, sf)
            unmet += missing
        if unmet or stats is None:  # the schedule and the ids need the corpus: placeholders for the plan
            tasks = [] if spec.suites else [Task("", "train", "train", i, "train") for i in range(len(labels))]
            tasks += [Task("", m.kind, m.kind, labels.index(n), task_label(m.kind, m.params()))
                      for m in spec.measure for n in spec.measured(m)]
            return Prepared(self, spec, sf, tasks, labels, spec.training.device, unmet,
                            state={"stats": None, "steps": suites.steps if suites else None, "corpus": None,
                                   "suites": suites})
        if suites is not None:
            sizes.check_suites(spec, stats, _configs(spec, suites))
            identities = [[suites.identity(n, c, net) for c in range(len(suites.steps))]
                          for n, net in enumerate(spec.model)]
            return Prepared(self, spec, sf, suite_tasks(spec, identities, stats["corpus_key"]), labels,
                            spec.training.device, unmet, state={"stats": stats, "steps": suites.steps, "corpus": corpus,
                                                                "stats_file": stats_file, "tagsets": tagsets,
                                                                "suites": suites})
        if stats["steps_per_epoch"] < 1:
            raise SpecError(sf.path, [sf.problem(("training", "batch_size"), f"batch_size x bptt ({spec.training.batch_size} "
                                                 f"x {spec.training.bptt}) is larger than the training split "
                                                 f"({stats['tokens'][0]} tokens)")])
        for t, own in stats.get("tagger_steps_per_epoch", {}).items():
            if not 1 <= own <= stats["steps_per_epoch"]:
                raise SpecError(sf.path, [sf.problem(("corpus", "source"), f"taggers of tag set {t!r} train {own} steps "
                                                     f"per epoch, the LM {stats['steps_per_epoch']}; a tagger's corpus "
                                                     "must be no larger than the LM's (the store's curves follow the "
                                                     "LM's steps) and hold at least batch_size x bptt tokens")])
        problems = sizes.schedule_problems(spec, stats["steps_per_epoch"])
        column = stats["tokens"][0] // spec.training.batch_size - 1  # a stream's length: what one sequence can take
        if spec.training.bptt > column:
            problems.append((("training", "bptt"), f"{spec.training.bptt} is longer than a training stream ({column} "
                             f"tokens: {stats['tokens'][0]} tokens in batch_size = {spec.training.batch_size} streams); "
                             "every sequence would be cut short"))
        if stats["tokens"][1] < 2 * spec.training.eval_batch_size:
            problems.append((("corpus", "split"), f"the validation split holds {stats['tokens'][1]} tokens, fewer than "
                             f"2 x eval_batch_size = {2 * spec.training.eval_batch_size}; validation needs two rows"))
        if problems:
            raise SpecError(sf.path, [sf.problem(loc, msg, type(spec)) for loc, msg in problems])
        sizes.check_training(spec, stats, spec.store_path().absolute())
        steps, tasks = make_tasks(spec, stats["steps_per_epoch"], stats["corpus_key"])
        return Prepared(self, spec, sf, tasks, labels, spec.training.device, unmet,
                        state={"stats": stats, "steps": steps, "corpus": corpus, "stats_file": stats_file,
                               "tagsets": tagsets})

    @staticmethod
    def _load(spec: TrainingStudy, tagsets: list[str], base: Path) -> Corpus:
        with offline_hub():  # a hub corpus from the local cache when the hub is off
            try:
                return load_corpus(spec.corpus, tagsets, seed=spec.experiment.seed, base=base)
            except ValueError as err:
                if spec.corpus.source != "scaffold:":
                    raise
                raise SpecProblem(("corpus", "scaffold", "phrases"), str(err)) from None

    def describe(self, p: Prepared) -> list[str]:
        s, stats, steps = p.spec, p.state["stats"], p.state["steps"]
        if stats is None:
            lines = [f"corpus     {s.corpus.source}: not read (see the requirements below); the schedule and the "
                     "task ids follow once it is"]
        else:
            train, valid, test = stats["tokens"]
            lines = [f"corpus     {s.corpus.source}: {train} / {valid} / {test} tokens (train/valid/test), "
                     f"vocabulary {stats['vocab']}"]
        if s.suites:
            return lines + self._describe_suites(p)
        lines.append("training   " + " ".join(f"{k}={v}" for k, v in s.training.model_dump().items()))
        if steps is not None:
            short = str(steps) if len(steps) <= 12 else \
                f"[{', '.join(map(str, steps[:6]))}, ..., {', '.join(map(str, steps[-3:]))}]"
            lines.append(f"schedule   {stats['steps_per_epoch']} steps/epoch; {len(steps)} checkpoints at steps {short}")
        lines.append("models")
        for i, n in enumerate(s.model):
            extra = f" tagset={n.tagset} mode={n.mode}{' shuffled' if n.shuffled else ''}" if n.kind == "tagger" else ""
            if n.corpus_variant:
                extra += f" corpus_variant={n.corpus_variant}"
            lines.append(f"  {n.name:<16} {n.kind} seed={s.network_seed(i)}{extra}")
        lines.append("measures   (every parameter shown, defaults included)")
        lines += [f"  {m.kind:<12} " + " ".join(f"{k}={v}" for k, v in m.params().items()) for m in s.measure]
        return lines

    @staticmethod
    def _describe_suites(p: Prepared) -> list[str]:
        s, suites = p.spec, p.state.get("suites")
        lines = []
        if suites is not None:
            steps = suites.steps
            short = str(steps) if len(steps) <= 12 else \
                f"[{', '.join(map(str, steps[:6]))}, ..., {', '.join(map(str, steps[-3:]))}]"
            lines.append(f"schedule   {len(steps)} checkpoints (revisions) at steps {short}")
            lines += suites.download_lines()
        lines.append("models     (checkpoint suites, measured, not trained)")
        for i, n in enumerate(s.model):
            where = suites.series[i][0].source if suites else n.source
            lines.append(f"  {n.name:<16} suite {where} pool={n.pool} window_words={n.window_words}"
                         + (" trust_remote_code" if n.trust_remote_code else ""))
        if suites is not None and suites.layers:
            lines.append(f"layers     {', '.join(suites.layers)}")
        lines.append("measures   (every parameter shown, defaults included)")
        lines += [f"  {m.kind:<12} " + " ".join(f"{k}={v}" for k, v in m.params().items()) for m in s.measure]
        return lines

    def plan_json(self, p: Prepared) -> dict:
        stats, suites = p.state["stats"], p.state.get("suites")
        out = {"steps_per_epoch": stats["steps_per_epoch"] if stats and not suites else None,
               "checkpoint_steps": p.state["steps"]}
        if suites is not None:
            todo = [f for f in suites.fetch if not f.cached and f.missing is None]
            out["downloads"] = {"checkpoints": len(todo), "bytes": sum(f.bytes or 0 for f in todo),
                                "unknown_size": sum(f.bytes is None for f in todo),
                                "revisions": [f"{f.checkpoint.location}@{f.checkpoint.hub_revision or 'main'}"
                                              for f in todo]}
        return out

    def example_spec(self) -> dict:
        return {**EXPLAIN_EXAMPLES[0], "measure": [{"kind": "loss"}]}

    def variables_of(self, kind: str) -> list | None:
        """Laid out for a small example (the generated tagged corpus, or a scaffold corpus for the
        scaffold measures), whose corpus is generated; None for a measure that needs data of its own
        (a treebank)."""
        import torch

        from runner.apply import prepare_all

        for tables in EXPLAIN_EXAMPLES:
            data = {**tables, "measure": [{"kind": kind}]}
            try:
                _, (p,) = prepare_all(SpecFile(Path("<explain>"), "", data, located=False))
            except SpecError:
                continue
            if not p.unmet:
                return [v for v in TrainingSession(p, torch.device("cpu")).layout.vars.values() if v.measure == kind]
        return None

    def open(self, p: Prepared, device, say) -> TrainingSession:
        return TrainingSession(p, device)

    def estimate(self, p: Prepared, device, precision, calibrated):
        from runner.studies.training.estimate import estimate

        return estimate(p, device, precision, calibrated)

    def thread_probe(self, p: Prepared, device):
        from runner.studies.training.estimate import thread_probe

        return thread_probe(p, device)

    def thread_key(self, p: Prepared) -> dict:
        from runner.studies.training.estimate import thread_key

        return thread_key(p)


class TrainingSession:
    """A training run: the corpus, the store's layout, the checkpoints, training and measuring."""

    def __init__(self, p: Prepared, device):
        self.p, self.spec, self.device = p, p.spec, device
        st = p.state
        corpus = st["corpus"] or TrainingStudyPlugin._load(self.spec, st["tagsets"], p.spec_file.path.parent)
        if corpus_key(corpus) != st["stats"]["corpus_key"]:  # the source changed under the same identity (a hub set)
            st["stats_file"].unlink(missing_ok=True)
            raise Unavailable(f"[corpus] source {self.spec.corpus.source!r} changed since it was planned; run apply "
                              "again to plan it anew")
        st["corpus"] = corpus  # a distributed executor's workers get it with the plan: they never read the source
        set_precision("fp32")  # the thesis' LSTMs in IEEE fp32 (cuDNN would otherwise use TF32 on CUDA)
        self.corpus, self.steps = corpus, st["steps"]
        self.spe = st["stats"]["steps_per_epoch"]
        self.suites = st.get("suites")
        sentence = sentence_words(self.spec, corpus)  # known only now: what a shared measure cannot do with it
        late = [p.spec_file.problem(("measure", i, *loc), message) for i, m in enumerate(self.spec.measure)
                for loc, message in getattr(measures("training")[m.kind](m), "sentence_problems", lambda _: [])(sentence)]
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


def _configs(spec: TrainingStudy, suites) -> list:
    """Each suite network's configuration (its last checkpoint's), None where it cannot be read."""
    from models.hub import ModelLoadError
    from models.suites import load_config

    out = []
    for net, series in zip(spec.model, suites.series, strict=True):
        try:
            out.append(load_config(series[-1], trust_remote_code=net.trust_remote_code))
        except ModelLoadError:
            out.append(None)
    return out


def _write_curves(store, n: int, c) -> None:
    write_curves(store, n, {"train_loss": c.train_loss, "learning_rate": c.lr, "val_loss": c.val_loss,
                            "val_perplexity": np.exp(np.minimum(np.asarray(c.val_loss), 700)),
                            "epoch_train_loss": c.epoch_train_loss, "epoch_learning_rate": c.epoch_lr})
