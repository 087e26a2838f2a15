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
from pathlib import Path
from typing import TYPE_CHECKING

from models.registry import cache_dir
from runner.core.plan import Task
from runner.core.requirements import Requirement, device_requirement
from runner.data.files import anchor
from runner.data.registry import TAGGED, InputError, data_identity, data_source_for
from runner.spec import footprint
from runner.spec.specfile import SpecError, SpecFile
from runner.studies.training.extend import extensions
from runner.studies.training import measures as _registrations  # noqa: F401  (registers the measures)
from runner.studies.training import sizes
from runner.studies.training.data.corpus import Corpus, CorpusError
from runner.studies.training.data.tiny_tagged import SOURCE as TINY_TAGGED
from runner.studies.training.estimate import estimate, thread_key, thread_probe
from runner.studies.training.plan import make_tasks, suite_tasks, task_label
from runner.studies.training.spec import (
    GMB_TAGSETS,
    TABLES,
    TrainingStudySpec,
    check_sources,
    missing_extras,
    read_corpus,
    spec_model,
)
from runner.studies.training.suite import resolve as resolve_suites
from runner.studies.training.state import CorpusStats, TrainingState
from runner.plugin.measures import measures
from runner.checkpointed.workers import CheckpointedWorkers
from runner.core.estimate import Estimates
from runner.plugin.study import (
    ChecksFiles,
    Describes,
    DrawsFigures,
    Explains,
    Extends,
    HasExamples,
    PlanFields,
    Prepared,
    SourceUnavailable,
    Study,
    TimesThreads,
    ViewsMeasures,
    register,
)
from models.hub import ModelLoadError
from models.suites import load_config
from runner.run.prepare import prepare_all
from runner.studies.training.data.treebank import load_treebank

if TYPE_CHECKING:
    from runner.studies.training.session import TrainingSession

#: A training spec resolved: its state is the corpus' statistics and the checkpoint schedule.
TrainingPrepared = Prepared[TrainingState]


def _source_identity(study: TrainingStudySpec, base: Path) -> str:
    return data_identity(study.corpus.source, base, TAGGED)


def _gmb_identity(study: TrainingStudySpec, key: str, base: Path) -> str:
    path = Path(anchor(getattr(study.corpus, key), base))
    return f"{key} {path.resolve()} sha256 {hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else '-'}"


def _stats_path(study: TrainingStudySpec, tagsets: list[str], base: Path) -> Path:
    key = json.dumps(["stats v2", study.corpus.key(), tagsets, study.experiment.seed,
                      study.training.batch_size, study.training.bptt, _source_identity(study, base)]
                     + [_gmb_identity(study, k, base) for k in ("gmb_pos", "gmb_sem") if getattr(study.corpus, k)],
                     sort_keys=True)
    return cache_dir() / "corpora" / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"


def _stats(corpus: Corpus, study: TrainingStudySpec) -> CorpusStats:
    # taggers of another corpus (GMB, the longest documents) have steps of their own
    from runner.studies.training.session import corpus_key  # lazy: torch
    from runner.studies.training.train import steps_per_epoch  # lazy: torch

    own = {t: steps_per_epoch(s.words[0].numel(), study.training) for t, s in corpus.tags.items() if s.words is not None}
    return CorpusStats(corpus_key(corpus), steps_per_epoch(corpus.train.numel(), study.training),
                       corpus.train.numel(), corpus.valid.numel(), corpus.test.numel(), len(corpus.vocab), own)


UD_EWT = ("UD English-EWT (github.com/UniversalDependencies/UD_English-EWT, e.g. en_ewt-ud-test.conllu) as a "
          "local .conllu file, or a hub dataset with the UD columns tokens, upos, head in the datasets cache")


def _treebanks_unmet(study: TrainingStudySpec, base: Path) -> list[str]:
    """Treebanks of measures (``treebank = ...``) that are not here: a missing file, an uncached hub set."""
    out = []
    registry = measures("training")
    for i, m in enumerate(study.measure):
        tb, *options = registry[m.kind].tags.named(m, "data") or [None]
        if not tb:
            continue
        where = f"[[measure]] {i} ({m.kind}) treebank {tb!r}"
        reader = data_source_for(tb)
        if not (reader and reader.remote):
            path = Path(anchor(tb, base))
            if not path.is_file():
                out.append(f"{where}: no file {path}; download {UD_EWT}")
            continue
        try:
            load_treebank(tb, base, *options)
        except InputError as err:
            out.append(f"{where}: not available here ({err}); use {UD_EWT}")
    return out


GMB = ("the Groningen Meaning Bank's tags as a GMB-style file, one token per line: word, PTB POS, SEM tag "
       "(e.g. the silver SEM data of Bjerva et al. 2016, gmb.let.rug.nl / pmb.let.rug.nl)")


def _gmb_unmet(study: TrainingStudySpec, base: Path) -> list[str]:
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
#: Small specs whose corpora are generated, for ``runner explain`` (:meth:`TrainingStudy.variables_of`).
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
class TrainingStudy(Study, ChecksFiles, ViewsMeasures, Describes, PlanFields, HasExamples, Explains,
                    CheckpointedWorkers, Estimates, TimesThreads, Extends, DrawsFigures):
    """Networks measured while they train (training as time): LSTM language models and taggers."""

    name, spec_factory, table_models = "training", staticmethod(spec_model), TABLES
    figure_recipes = "runner.studies.training.figures"

    def measure_view(self, spec: TrainingStudySpec):
        return spec.view()

    def check(self, spec: TrainingStudySpec, sf: SpecFile) -> list[str]:
        return check_sources(spec, sf)

    def prepare(self, spec: TrainingStudySpec, sf: SpecFile) -> TrainingPrepared:
        unmet = missing_extras(spec) + _treebanks_unmet(spec, sf.path.parent) + _gmb_unmet(spec, sf.path.parent)
        unmet += device_requirement("[training] device", spec.training.device)
        gmb_missing = {k for k in GMB_TAGSETS.values() if any(k in u for u in unmet)}
        tagsets = [t for t in spec.tagsets() if not (unmet and t.startswith("spacy_"))  # spaCy may be missing
                   and GMB_TAGSETS.get(t) not in gmb_missing]  # and GMB files
        stats_file = _stats_path(spec, tagsets, sf.path.parent)
        corpus = None
        stats = CorpusStats.read(stats_file)
        if stats is None:
            if spec.corpus.scaffold is not None:
                sizes.check_scaffold(spec.corpus.scaffold)
            try:
                corpus = read_corpus(spec, tagsets, sf.path.parent)
                stats = _stats(corpus, spec)
                stats.write(stats_file)
            except CorpusError as err:
                if not (spec.corpus.reader and spec.corpus.reader.remote):
                    raise SourceUnavailable(str(err)) from None
                unmet.append(Requirement.from_error(err.where, err, kind="data") if err.where and err.reason
                             else str(err))
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
                            state=TrainingState(None, suites.steps if suites else None, suites=suites))
        if suites is not None:
            needs = sizes.suite_needs(spec, stats, _configs(spec, suites))
            identities = [[suites.identity(n, c, net) for c in range(len(suites.steps))]
                          for n, net in enumerate(spec.model)]
            return Prepared(self, spec, sf, suite_tasks(spec, identities, stats.corpus_key), labels,
                            spec.training.device, unmet,
                            state=TrainingState(stats, suites.steps, corpus, stats_file, tuple(tagsets), suites),
                            needs=needs)
        if stats.steps_per_epoch < 1:
            raise SpecError(sf.path, [sf.problem(("training", "batch_size"), f"batch_size x bptt ({spec.training.batch_size} "
                                                 f"x {spec.training.bptt}) is larger than the training split "
                                                 f"({stats.train_tokens} tokens)")])
        for t, own in stats.tagger_steps_per_epoch.items():
            if not 1 <= own <= stats.steps_per_epoch:
                raise SpecError(sf.path, [sf.problem(("corpus", "source"), f"taggers of tag set {t!r} train {own} steps "
                                                     f"per epoch, the LM {stats.steps_per_epoch}; a tagger's corpus "
                                                     "must be no larger than the LM's (the store's curves follow the "
                                                     "LM's steps) and hold at least batch_size x bptt tokens")])
        problems = sizes.schedule_problems(spec, stats.steps_per_epoch)
        column = stats.train_tokens // spec.training.batch_size - 1  # a stream's length: what one sequence can take
        if spec.training.bptt > column:
            problems.append((("training", "bptt"), f"{spec.training.bptt} is longer than a training stream ({column} "
                             f"tokens: {stats.train_tokens} tokens in batch_size = {spec.training.batch_size} streams); "
                             "every sequence would be cut short"))
        if stats.valid_tokens < 2 * spec.training.eval_batch_size:
            problems.append((("corpus", "split"), f"the validation split holds {stats.valid_tokens} tokens, fewer than "
                             f"2 x eval_batch_size = {2 * spec.training.eval_batch_size}; validation needs two rows"))
        if problems:
            raise SpecError(sf.path, [sf.problem(loc, msg, type(spec)) for loc, msg in problems])
        needs = sizes.training_needs(spec, stats)
        footprint.check(needs, spec.store_path())  # before planning: the plan grows with the epochs
        steps, tasks = make_tasks(spec, stats.steps_per_epoch, stats.corpus_key)
        return Prepared(self, spec, sf, tasks, labels, spec.training.device, unmet,
                        state=TrainingState(stats, steps, corpus, stats_file, tuple(tagsets)), needs=needs)

    def describe(self, p: TrainingPrepared) -> list[str]:
        s, stats, steps = p.spec, p.state.stats, p.state.steps
        if stats is None:
            lines = [f"corpus     {s.corpus.source}: not read (see the requirements below); the schedule and the "
                     "task ids follow once it is"]
        else:
            train, valid, test = stats.tokens
            lines = [f"corpus     {s.corpus.source}: {train} / {valid} / {test} tokens (train/valid/test), "
                     f"vocabulary {stats.vocab}"]
        if s.suites:
            return lines + self._describe_suites(p)
        lines.append("training   " + " ".join(f"{k}={v}" for k, v in s.training.model_dump().items()))
        if steps is not None:
            short = str(steps) if len(steps) <= 12 else \
                f"[{', '.join(map(str, steps[:6]))}, ..., {', '.join(map(str, steps[-3:]))}]"
            lines.append(f"schedule   {stats.steps_per_epoch} steps/epoch; {len(steps)} checkpoints at steps {short}")
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
    def _describe_suites(p: TrainingPrepared) -> list[str]:
        s, suites = p.spec, p.state.suites
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

    def plan_json(self, p: TrainingPrepared) -> dict:
        stats, suites = p.state.stats, p.state.suites
        out = {"steps_per_epoch": stats.steps_per_epoch if stats and not suites else None,
               "checkpoint_steps": p.state.steps}
        if suites is not None:
            todo = [f for f in suites.fetch if not f.cached and f.missing is None]
            out["downloads"] = {"checkpoints": len(todo), "bytes": sum(f.bytes or 0 for f in todo),
                                "unknown_size": sum(f.bytes is None for f in todo),
                                "revisions": [f"{f.checkpoint.location}@{f.checkpoint.hub_revision or 'main'}"
                                              for f in todo]}
        return out

    def example_spec(self) -> dict:
        return {**EXPLAIN_EXAMPLES[0], "measure": [{"kind": "loss"}]}

    def examples(self) -> list[dict]:
        """The small specs of ``runner explain``, whose corpora are generated: tagged text, then scaffold."""
        return [dict(tables) for tables in EXPLAIN_EXAMPLES]

    def variables_of(self, kind: str) -> list | None:
        """Laid out for a small example (the generated tagged corpus, or a scaffold corpus for the
        scaffold measures), whose corpus is generated; None for a measure that needs data of its own
        (a treebank)."""
        import torch  # lazy: torch
        from runner.studies.training.session import TrainingSession  # lazy: torch

        for tables in EXPLAIN_EXAMPLES:
            data = {**tables, "measure": [{"kind": kind}]}
            try:
                _, (p,) = prepare_all(SpecFile(Path("<explain>"), "", data, located=False))
            except SpecError:
                continue
            if not p.unmet:
                return [v for v in TrainingSession(p, torch.device("cpu")).layout.vars.values() if v.measure == kind]
        return None

    def open(self, p: TrainingPrepared, device, say) -> TrainingSession:
        from runner.studies.training.session import TrainingSession  # lazy: torch

        return TrainingSession(p, device)

    def estimate(self, p: TrainingPrepared, device, precision, calibrated):
        return estimate(p, device, precision, calibrated)

    def thread_probe(self, p: TrainingPrepared, device):
        return thread_probe(p, device)

    def thread_key(self, p: TrainingPrepared) -> dict:
        return thread_key(p)

    def extensions(self, p: TrainingPrepared, replaced, records):
        return extensions(p, replaced, records)


def _configs(spec: TrainingStudySpec, suites) -> list:
    """Each suite network's configuration (its last checkpoint's), None where it cannot be read."""
    out = []
    for net, series in zip(spec.model, suites.series, strict=True):
        try:
            out.append(load_config(series[-1], trust_remote_code=net.trust_remote_code))
        except ModelLoadError:
            out.append(None)
    return out
