"""The training spec: ``[experiment]``, ``[corpus]``, ``[training]``, ``[checkpoints]``, ``[[model]]``
and ``[[measure]]`` (the study's registered measures, :mod:`runner.plugin.measures`).

Each ``[[model]]`` is an LSTM language model or tagger of the thesis; there is no ``[dynamics]``. Every default
is the setting of Saphra's thesis (Ch. 4 and 6): SGD from lr 20, quartered when the validation
loss stops improving, gradient clipping 0.25, batch 40, sequence length 35, dropout 0.2, 50
epochs, 200-unit embedding and LSTM layers, a checkpoint every epoch. """

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, PrivateAttr, create_model, model_validator

from models.source import Source, SourceText
from models.suites import parse_revisions, step_of
from runner.checkpointed.measure import ActivationView
from runner.checkpointed.table import TrainingTable
from runner.data.hub import offline_hub
from runner.data.registry import TAGGED, DataSource, check_data, data_source_for
from runner.plugin.measures import measures, params_union
from runner.spec.specfile import Name, SpecFile, SpecProblem, StudySpec, Table, repeated
from runner.studies.training.data.corpus import Corpus, load_corpus, scaffold_variants
from runner.studies.training.data.scaffold import (
    ScaffoldConfig,
    fill_problem,
    generates,
    scaffold_count,
    valid_counts,
)

LAYERS = ("embedding", "lstm1", "lstm2")
LSTM_LAYERS = ("embedding", "lstm1", "lstm2", "lstm3", "lstm4", "logits")
_SUITE_LAYER = re.compile(r"^(embedding|layer[1-9][0-9]*)$")


def _layer(name: str) -> str:
    if name not in LSTM_LAYERS and not _SUITE_LAYER.match(name):
        raise ValueError(f"{name!r} is no layer: LSTMs have {', '.join(LSTM_LAYERS)}; checkpoint suites have "
                         "embedding, layer1 .. layerN")
    return name


#: A layer of an LSTM (``embedding``, ``lstm1`` .. ``lstm4``, ``logits``) or of a checkpoint suite
#: (:class:`models.suites.Adapter`: ``embedding``, ``layer1`` .. ``layerN``).
Layer = Annotated[str, AfterValidator(_layer)]
TAGSETS = ("upos", "xpos", "topic", "spacy_upos", "spacy_xpos", "gmb_pos", "sem_coarse", "sem_fine")
TagSet = Literal["upos", "xpos", "topic", "spacy_upos", "spacy_xpos", "gmb_pos", "sem_coarse", "sem_fine"]
#: Tag sets read from GMB-style tagged files (:func:`runner.studies.training.data.gmb.read_gmb`), each its own corpus.
GMB_TAGSETS = {"gmb_pos": "gmb_pos", "sem_coarse": "gmb_sem", "sem_fine": "gmb_sem"}




class ScaffoldSpec(Table):
    """The synthetic scaffold corpora of Ch. 5 Sec. 4.2-4.3 (:mod:`runner.studies.training.data.scaffold`); every
    default is the paper's value where it gives one."""

    lengths: list[int] = Field(default_factory=lambda: [2, 4, 6, 8], min_length=1)
    """Scaffold lengths k, one corpus each (the paper colours Figs. 7, 8, 10 by k and names k = 8 in
    Fig. 9; the other lengths are not given in the text)."""
    settings: list[Literal["unfamiliar", "familiar"]] = Field(
        default_factory=lambda: ["unfamiliar", "familiar"], min_length=1)
    """Unfamiliar: each scaffold only inside the rule; familiar: also ``familiar_repeats`` times outside it."""
    vocab_size: int = Field(1000, ge=2)
    """|Sigma| (Sec. 4.2: 1k types)."""
    tokens: int = Field(1_000_000, ge=100)
    """Training tokens per corpus (Sec. 4.2: 1m)."""
    rules: int = Field(1000, ge=1)
    """n, insertions of alpha q omega (Sec. 4.3: 1000)."""
    phrases: int = Field(100, ge=1)
    """Scaffold phrases of length k (Sec. 4.3: 100, so each appears 10 times in the rule)."""
    familiar_repeats: int = Field(1000, ge=0)
    """Occurrences of each scaffold outside the rule, familiar setting (Sec. 4.3: 1000)."""
    valid_tokens: int = Field(100_000, ge=10)
    """Validation tokens (rules and repeats scaled down in proportion; not in the paper)."""
    test_cases: int = Field(1000, ge=1)
    """Rule instances in the in-domain and in the out-domain test set (not in the paper)."""
    context: int = Field(4, ge=0)
    """Random tokens before alpha in a test case (not in the paper)."""

    @model_validator(mode="after")
    def _check(self) -> ScaffoldSpec:
        if len(set(self.lengths)) != len(self.lengths) or min(self.lengths) < 1:
            raise ValueError("lengths must be distinct and >= 1")
        if len(set(self.settings)) != len(self.settings):
            raise ValueError("settings must be distinct")
        return self

    def problems(self) -> list[tuple[tuple, str]]:
        """What the generator could not draw, said with the numbers (it would loop or fail mid-plan)."""
        where = ("corpus", "scaffold")
        cfg = ScaffoldConfig(**self.model_dump(exclude={"lengths", "settings"}))
        repeats = self.familiar_repeats if "familiar" in self.settings else 0
        for k in self.lengths:
            if scaffold_count(self.vocab_size, k, self.phrases + 1) <= self.phrases:
                return [(where + ("phrases",), f"{self.phrases} phrases of length {k} leave no other scaffold of the "
                         f"{scaffold_count(self.vocab_size, k, self.phrases + 1)} over {self.vocab_size} types for the "
                         "out-domain test (and the background); use fewer phrases or more types")]
            problem = fill_problem(self.tokens, self.rules, self.phrases, repeats, k)
            if problem:
                key = "rules" if self.rules * (k + 3) >= self.tokens else "familiar_repeats" if repeats else "tokens"
                return [(where + (key,), f"the training stream of k = {k}: {problem}; raise tokens or lower rules / "
                         "familiar_repeats")]
            problem = fill_problem(self.valid_tokens, *valid_counts(cfg, 0)[:1], self.phrases,
                                   valid_counts(cfg, repeats)[1], k)
            if problem:
                return [(where + ("valid_tokens",), f"the validation stream of k = {k} (rules and repeats scaled by "
                         f"valid_tokens / tokens, at least one rule per phrase): {problem}")]
        return []


class CorpusSpec(Table):
    source: SourceText
    """``hf:<dataset id>`` (e.g. ``hf:Salesforce/wikitext``), a local ``.conllu`` file (words, UPOS,
    XPOS and ``# newdoc`` topics), a local ``.txt`` file (one sentence per line),
    ``builtin:pydoc-topics`` (Python's help texts, offline), ``builtin:tiny-tagged`` (a generated
    2,000-token corpus with UPOS, XPOS and topics, for tiny specs), or ``scaffold:`` (the synthetic
    scaffold corpora of Ch. 5 Sec. 4, set in ``[corpus.scaffold]``; each ``[[model]]`` names its
    ``corpus_variant``)."""
    subset: str | None = None
    """Dataset configuration for ``hf:`` sources (e.g. ``wikitext-2-raw-v1``)."""
    field: str = "text"
    """Column holding the text (``hf:`` sources)."""
    doc_field: str | None = None
    """Column naming the document of a record, for ``hf:`` datasets with one document per record
    (``wikimedia/wikipedia``: ``title``): each record's text is split into sentences
    (:func:`runner.studies.depth.samples.split_sentences`) and whitespace-tokenized, and the document is the
    sentences' topic. Unset: records are WikiText lines grouped into articles by their ``= Title =``."""
    lowercase: bool = True
    """Lowercase every token (thesis: yes)."""
    min_count: int = Field(100, ge=1)
    """Words seen fewer times in the training split become ``<unk>`` (thesis: 100)."""
    drop_rare_sentences: bool = True
    """Drop sentences holding a word seen fewer than ``min_count`` times, before replacing (thesis: yes)."""
    split: list[Annotated[float, Field(ge=0, le=1)]] = Field(default_factory=lambda: [0.7, 0.1, 0.2], min_length=3,
                                                            max_length=3)
    """Train / validation / test fractions of the sentences (thesis: 70/10/20); training and validation
    take a share each (the learning rate follows the validation loss)."""
    max_vocab: int | None = Field(None, ge=3)
    """Keep at most this many types (``<unk>`` and ``<eos>`` included), the most frequent in training;
    the rest become ``<unk>`` (thesis Ch. 4: 20K types, which min_count = 100 gave on its dump)."""
    tag_articles: int | None = Field(None, ge=1)
    """The corpus' tag sets (topic, spaCy, CoNLL-U; not the GMB ones) come from the N longest documents
    (in tokens, after preprocessing) only, split ``split`` on their own; the analysis tokens are then
    that corpus' (thesis Ch. 4: "the
    100 longest articles in Wikipedia in a 70/10/20 train/dev/test split", the "191K-token
    100-article test corpus"). Unset: every sentence of the corpus carries the tags."""
    gmb_pos: str | None = None
    """GMB-style tagged file (word, PTB POS, SEM tag per line; :func:`runner.studies.training.data.gmb.read_gmb`)
    of the ``gmb_pos`` tag set (thesis: human-annotated PTB POS of the Groningen Meaning Bank). It is
    split ``split`` on its own and read with the LM's vocabulary; a missing file is an unmet
    requirement."""
    gmb_sem: str | None = None
    """GMB-style tagged file of the ``sem_fine`` and ``sem_coarse`` tag sets (thesis: silver SEM tags of
    Bjerva et al. 2016, a set of GMB unaligned with the POS one; may be the same file as ``gmb_pos``)."""
    analysis_split: Literal["valid", "test"] = "valid"
    """Split whose first ``analysis_tokens`` tokens checkpoint measures read (thesis Ch. 4: test)."""
    max_sentences: int | None = Field(None, ge=3)
    """Keep only the first N sentences of the source (quick runs)."""
    analysis_tokens: int = Field(2000, ge=16)
    """Tokens of ``analysis_split`` on which checkpoint measures are computed (activations, gradients,
    probes)."""
    scaffold: ScaffoldSpec | None = None
    """Settings of a ``scaffold:`` corpus (default: the paper's)."""

    @model_validator(mode="before")
    @classmethod
    def _default_scaffold(cls, data: Any) -> Any:
        if isinstance(data, dict) and generates(data.get("source")) and data.get("scaffold") is None:
            return {**data, "scaffold": {}}
        return data

    @property
    def reader(self) -> DataSource | None:
        """The data source that reads ``source`` (None: none does; the study's check says so)."""
        return data_source_for(self.source)

    @property
    def generated(self) -> bool:
        """The source generates the scaffold corpora (``scaffold:``): there are no sentences to read."""
        return generates(self.source)

    @model_validator(mode="after")
    def _scaffold(self) -> CorpusSpec:
        if self.scaffold is not None and not self.generated:
            raise ValueError("[corpus.scaffold] needs source = \"scaffold:\"")
        return self

    def split_problems(self) -> list[tuple[tuple, str]]:
        """Fractions that sum to 1 and leave training and validation a share (the analysis split too)."""
        train, valid, test = self.split
        if abs(train + valid + test - 1.0) > 1e-6:
            return [(("corpus", "split"), f"must sum to 1, not {train + valid + test:g}")]
        if train == 0 or valid == 0:
            return [(("corpus", "split"), f"the {'training' if train == 0 else 'validation'} fraction is 0; training "
                     "needs both (the learning rate follows the validation loss each epoch)")]
        if self.analysis_split == "test" and test == 0:
            return [(("corpus", "analysis_split"), "the test fraction of [corpus] split is 0; measure the 'valid' split "
                     "or give the test split a share")]
        return []

    def key(self) -> dict:
        """The table as JSON, without the unset scaffold table and the later options left at their
        defaults (cache keys of older specs stay)."""
        later = {"doc_field": None, "max_vocab": None, "tag_articles": None, "gmb_pos": None, "gmb_sem": None,
                 "analysis_split": "valid", "scaffold": None}
        return self.model_dump(mode="json", exclude={k for k, v in later.items() if getattr(self, k) == v})


#: What a training measure may require of the corpus (its tags' ``requires``), and what the spec says
#: when the corpus lacks it.
NEEDS = {
    "scaffold": "measures the scaffold test sets; it needs [corpus] source = \"scaffold:\"",
    "text": "reads English; the scaffold corpus' networks cannot",
}


class LSTMTraining(TrainingTable):
    epochs: int = Field(50, ge=1)
    """Passes over the training split (thesis: 50)."""
    lr: float = Field(20.0, gt=0)
    """Initial SGD learning rate (thesis: 20)."""
    lr_decay: float = Field(4.0, ge=1)
    """The rate is divided by this when the validation loss does not improve (thesis: 4, 'quartered')."""
    momentum: float = Field(0.0, ge=0, lt=1)
    """SGD momentum (thesis: none)."""
    clip: float = Field(0.25, gt=0)
    """Clip the gradient's global l2 norm to this (thesis: 0.25)."""
    batch_size: int = Field(40, ge=1)
    """Parallel streams (thesis: 40)."""
    bptt: int = Field(35, ge=2)
    """Sequence length of truncated backpropagation through time (thesis: 35)."""
    eval_batch_size: int = Field(10, ge=1)
    """Parallel streams when computing the validation loss."""
    dropout: float = Field(0.2, ge=0, lt=1)
    """Dropout on embeddings, between layers and before the decoder (thesis: 0.2)."""
    embedding_dim: int = Field(200, ge=1)
    """Embedding units (thesis: 200)."""
    hidden_dim: int = Field(200, ge=1)
    """Units of each LSTM layer (thesis: 200)."""
    num_layers: int = Field(2, ge=1, le=4)
    """LSTM layers of the language model (thesis: 2); taggers have one."""
    log_every: int = Field(1, ge=1)
    """Keep the training loss and learning rate every n optimizer steps."""


class LogSpaced(Table):
    start: int = Field(1, ge=1)
    """First step (log scale cannot hold 0; step 0 is the ``initial`` checkpoint)."""
    stop: int | None = Field(None, ge=1)
    """Last step (default: the last step of training)."""
    count: int = Field(10, ge=2)
    """Number of log-spaced steps (rounded to integers, duplicates removed); at most the steps from
    ``start`` to ``stop``."""

    @model_validator(mode="after")
    def _check(self) -> LogSpaced:
        if self.stop is not None and self.start > self.stop:
            raise ValueError(f"start = {self.start} is after stop = {self.stop}")
        if self.stop is not None and self.count > self.stop - self.start + 1:
            raise ValueError(f"count = {self.count} steps cannot be told apart between start = {self.start} and stop = "
                             f"{self.stop} ({self.stop - self.start + 1} steps)")
        return self


class CheckpointSpec(Table):
    every_epoch: bool = True
    """A checkpoint at the end of every epoch (thesis)."""
    steps: list[Annotated[int, Field(ge=0)]] = Field(default_factory=list)
    """Explicit optimizer steps (e.g. [100, 1000]), each within the run (at most epochs x steps per epoch)."""
    log_spaced: LogSpaced | None = None
    """Log-spaced steps, as public checkpoint suites use (e.g. ``{ start = 1, count = 20 }``)."""
    initial: bool = True
    """Also keep the untrained network (step 0)."""


#: Keys of a ``kind = "suite"`` entry only (left out of the ids of trained networks).
SUITE_KEYS = ("source", "revisions", "seeds", "trust_remote_code", "pickled_weights", "pool", "window_words",
              "batch_size")


class NetworkSpec(Table):
    name: Name
    """Label in the store's ``network`` index."""
    kind: Literal["lm", "tagger", "suite"] = "lm"
    """``lm``: the Ch. 6 2-layer LSTM LM; ``tagger``: the Ch. 4 one-layer LSTM tagger; ``suite``: a published
    checkpoint series (Pythia, MultiBERTs, a local directory), measured instead of trained."""
    source: SourceText | None = None
    """Suite: a hub id (``EleutherAI/pythia-160m``) or a local directory of checkpoint folders
    (``path:DIR``, or a path; ``DIR/step1000/config.json``); ``{seed}`` is replaced by each of ``seeds``, and
    ``{revision}`` in a hub id by each revision: one repository per checkpoint, as MultiBERTs publishes them
    (``google/multiberts-seed_{seed}-step_{revision}``, revisions ``["0k", "20k", ...]``)."""
    revisions: str | list[str] | None = None
    """Suite: the revisions, ``"step{0..143000:1000}"`` (first..last:stride) or a list; a local directory
    without them: every step folder in it."""
    seeds: list[int] | None = Field(None, min_length=1)
    """Suite: seeds of the same suite (``source`` holds ``{seed}``), one network ``<name>-s<seed>`` each, the
    replicates of model ``<name>``."""
    trust_remote_code: bool = False
    """Suite: let transformers run the repository's own code (never, unless set)."""
    pickled_weights: bool = False
    """Suite: also load checkpoints published only as ``pytorch_model.bin`` (read with
    ``torch.load(weights_only=True)``); otherwise safetensors only."""
    pool: Literal["mean", "first", "last"] = "mean"
    """Suite: how a word's subword activations become the word's (the analysis text is in words)."""
    window_words: int = Field(64, ge=2)
    """Suite: analysis words per forward window (windows do not overlap)."""
    batch_size: int = Field(8, ge=1)
    """Suite: windows per forward pass."""
    seed: int | None = None
    """Initialisation and dropout seed (default: experiment seed + position of the entry)."""
    tagset: TagSet | None = None
    """Tag set of a tagger: CoNLL-U UPOS/XPOS, document 'topic', or spaCy silver tags."""
    mode: Literal["tag_predictor", "input_tagger"] = "tag_predictor"
    """Predict the tag of the next word (tag predictor) or of the word just read (input tagger)."""
    shuffled: bool = False
    """Train on token-shuffled labels (Zhang et al. 2016), the lower bound of the thesis."""
    corpus_variant: str | None = None
    """Which corpus of a ``scaffold:`` source the network trains on: ``<setting>_k<k>``
    (e.g. ``familiar_k4``)."""

    _entry: int | None = PrivateAttr(None)
    _model: str | None = PrivateAttr(None)
    _replicate: int = PrivateAttr(0)

    def key(self) -> dict:
        """The entry as JSON for task ids (without ``name``; without an unset ``corpus_variant``; a suite's
        keys only for a suite)."""
        drop = {"name"} | ({"corpus_variant"} if self.corpus_variant is None else set())
        drop |= set(SUITE_KEYS) if self.kind != "suite" else {"seeds", "batch_size"}
        return self.model_dump(mode="json", exclude=drop)

    @property
    def model(self) -> str:
        """The ``model`` coordinate: the entry's name (a suite's seeds share it)."""
        return self._model or self.name

    @property
    def replicate(self) -> int:
        return self._replicate

    @model_validator(mode="after")
    def _check(self) -> NetworkSpec:
        if self.kind == "suite":
            if not self.source:
                raise ValueError("a suite needs source (a hub id or a local directory of checkpoint folders)")
            if self.tagset is not None or self.shuffled or self.corpus_variant is not None:
                raise ValueError("tagset, shuffled and corpus_variant apply to trained networks, not suites")
            if (self.seeds is None) != ("{seed}" not in self.source):
                raise ValueError("seeds and a source holding {seed} go together "
                                 "(e.g. source = \"google/multiberts-seed_{seed}\", seeds = [0, 1, 2])")
            if self.seeds is not None and len(set(self.seeds)) != len(self.seeds):
                raise ValueError(f"seeds must be distinct, not {self.seeds}")
            if self.revisions is not None:
                for r in parse_revisions(self.revisions):
                    step_of(r)
            return self
        wrong = sorted(set(SUITE_KEYS) & self.model_fields_set)
        if wrong:
            raise ValueError(f"{', '.join(wrong)} apply to kind = \"suite\" only")
        if self.kind == "tagger" and self.tagset is None:
            raise ValueError(f"a tagger needs a tagset ({', '.join(TAGSETS)})")
        if self.kind == "lm" and (self.tagset is not None or self.shuffled):
            raise ValueError("tagset and shuffled apply to taggers only")
        return self


class TrainingStudySpec(StudySpec):
    """A training spec (its ``measure`` list is typed by :func:`spec_model`)."""

    corpus: CorpusSpec
    training: LSTMTraining = LSTMTraining()
    checkpoints: CheckpointSpec = CheckpointSpec()
    model: list[NetworkSpec] = Field(min_length=1)
    measure: list[Any] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        if isinstance(data, dict) and "network" in data:
            raise ValueError("[[network]] tables are now called [[model]], as in every study; rename them")
        return data

    @model_validator(mode="after")
    def _expand_seeds(self) -> TrainingStudySpec:
        """A suite with ``seeds`` becomes one network per seed, ``<name>-s<seed>`` (model ``<name>``, replicate k)."""
        nets: list[NetworkSpec] = []
        for i, n in enumerate(self.model):
            if n.kind != "suite" or n.seeds is None:
                n._entry = i if n._entry is None else n._entry
                nets.append(n)
                continue
            for k, seed in enumerate(n.seeds):
                one = n.model_copy(update={"name": f"{n.name}-s{seed}", "seeds": None,
                                           "source": Source(n.source.replace("{seed}", str(seed)))})
                one._entry, one._model, one._replicate = i, n.name, k
                nets.append(one)
        object.__setattr__(self, "model", nets)
        return self

    def entry(self, network: int) -> int:
        """The ``[[model]]`` entry a network comes from (for messages)."""
        return self.model[network]._entry if self.model[network]._entry is not None else network

    @property
    def suites(self) -> bool:
        """A spec of checkpoint suites (measured, not trained)."""
        return any(n.kind == "suite" for n in self.model)

    def problems(self) -> list[tuple[tuple, str]]:
        out = repeated(self.model, "model")
        out += self._suite_problems()
        names = [n.name for n in self.model]
        known = set(names)
        registry = measures("training")
        tags = [registry[m.kind].tags for m in self.measure]
        seen = [(m.kind, next(iter(t.named(m, "variant")), None)) for m, t in zip(self.measure, tags)]
        for i, (k, c) in enumerate(seen):
            if (k, c) in seen[:i]:
                out.append((("measure", i, "kind"), "each measure (and svcca compare mode) may appear once; "
                            f"{k}{' ' + c if c else ''} is repeated"))
        for i, (m, t) in enumerate(zip(self.measure, tags)):
            if any(n not in known for n in t.named(m, "networks") + t.named(m, "references")):
                continue  # the measure says which (Measure.problems); the checks below need them
            for n in self.measured(m):
                if self.net(n).kind == "tagger":
                    out.append((("measure", i, "networks"), f"measures language models; {n} is a tagger"))
            for layer in t.named(m, "layers"):
                if layer.startswith("lstm") and int(layer[4:]) > self.training.num_layers:
                    out.append((("measure", i, "layers"),
                                f"layer {layer} but [training] num_layers = {self.training.num_layers}"))
        if not (self.checkpoints.every_epoch or self.checkpoints.steps or self.checkpoints.log_spaced):
            out.append((("checkpoints", "every_epoch"), "the schedule keeps no checkpoint besides the initial "
                        "one; set every_epoch, steps or log_spaced"))
        for i, (m, t) in enumerate(zip(self.measure, tags)):
            needs = {"scaffold": not self.corpus.generated, "text": self.corpus.generated}
            out += [(("measure", i, "kind"), f"{m.kind} {NEEDS[r]}") for r in t.requires if needs.get(r)]
        if self.corpus.scaffold is not None:
            out += self.corpus.scaffold.problems()
        if self.corpus.generated:
            known_variants = scaffold_variants(self.corpus)
            for i, n in enumerate(self.model):
                if n.kind != "lm":
                    out.append((("model", i, "kind"), "the scaffold corpus has no tags; only language models"))
                elif n.corpus_variant not in known_variants:
                    out.append((("model", i, "corpus_variant"), f"a scaffold: corpus needs corpus_variant, one of "
                                f"{known_variants}; not {n.corpus_variant!r}"))
        else:
            for i, n in enumerate(self.model):
                if n.corpus_variant is not None:
                    out.append((("model", i, "corpus_variant"), "corpus_variant needs [corpus] source = \"scaffold:\""))
        for t in self.tagsets():
            if t in GMB_TAGSETS and getattr(self.corpus, GMB_TAGSETS[t]) is None:
                out.append((("corpus", GMB_TAGSETS[t]), f"tag set {t!r} needs a GMB-style tagged file here"))
        for i, (m, t) in enumerate(zip(self.measure, tags)):
            gmb = [s for s in t.named(m, "tagsets") if s in GMB_TAGSETS]
            if gmb:
                out.append((("measure", i, "tagsets"), f"{m.kind} reads tags aligned with the analysis tokens; the "
                            f"GMB tag sets {gmb} are another corpus (train taggers on them instead)"))
        reader = data_source_for(self.corpus.source)
        if self.corpus.tag_articles and not (reader and "documents" in reader.annotations(self.corpus.source)):
            out.append((("corpus", "tag_articles"), "needs documents: an hf: source, builtin:tiny-tagged or a "
                        ".conllu with # newdoc"))
        out += self.corpus.split_problems()
        return out

    def view(self) -> ActivationView:
        """What its measures see of the spec (``Measure.problems``): the analysis sentence is known only
        once the corpus is read (the session asks again then)."""
        width = min(self.training.embedding_dim, self.training.hidden_dim)
        return ActivationView(
            networks=tuple(n.name for n in self.model), kinds=tuple((n.name, "lm" if n.kind == "suite" else n.kind) for n in self.model),
            token_widths=tuple((f"a token of [[model]] {n.name!r} (its {width} components)", width)
                               for n in self.model if n.kind != "suite"),
            source=self.corpus.reader.name if self.corpus.reader else "")

    def net(self, name: str) -> NetworkSpec:
        return next(n for n in self.model if n.name == name)

    def measured(self, m: Any) -> list[str]:
        return measures("training")[m.kind].tags.named(m, "networks") or [n.name for n in self.model if n.kind in ("lm", "suite")]

    def _suite_problems(self) -> list[tuple[tuple, str]]:
        """A spec measures suites or trains networks, not both; suites take the measures that read activations."""
        kinds = {n.kind == "suite" for n in self.model}
        registry = measures("training")
        if kinds != {True}:
            if True in kinds:
                first = next(i for i, n in enumerate(self.model) if n.kind == "suite")
                return [(("model", self.entry(first), "kind"), "a spec either measures checkpoint suites or trains "
                         "networks; put the suites in a spec of their own")]
            return [(("measure", i, "layers"), f"layer(s) {bad} belong to checkpoint suites; LSTMs have "
                     f"{', '.join(LSTM_LAYERS)}")
                    for i, m in enumerate(self.measure)
                    for bad in [[x for x in registry[m.kind].tags.named(m, "layers") if x not in LSTM_LAYERS]] if bad]
        out: list[tuple[tuple, str]] = []
        for i, m in enumerate(self.measure):
            if not registry[m.kind].tags.checkpoint.suites:
                ok = sorted(k for k, r in registry.items() if r.tags.checkpoint and r.tags.checkpoint.suites)
                out.append((("measure", i, "kind"), f"{m.kind} needs networks this runner trains; a suite takes "
                            f"{', '.join(ok)}"))
            elif (layers := registry[m.kind].tags.parameter("layers")) is not None and layers not in m.model_fields_set:
                out.append((("measure", i, "layers"), "name the suite's layers to measure: embedding, layer1 .. "
                            "layerN (the LSTM default does not apply)"))
            elif any(not _SUITE_LAYER.match(x) for x in registry[m.kind].tags.named(m, "layers")):
                out.append((("measure", i, "layers"), f"a suite's layers are embedding, layer1 .. layerN, not "
                            f"{[x for x in registry[m.kind].tags.named(m, 'layers') if not _SUITE_LAYER.match(x)]}"))
        return out

    def network_seed(self, index: int) -> int:
        n = self.model[index]
        return n.seed if n.seed is not None else self.experiment.seed + index

    def tagsets(self) -> list[str]:
        """Tag sets the study needs (taggers, probes, the open/closed split of sparsity)."""
        out = {n.tagset for n in self.model if n.tagset}
        registry = measures("training")
        for m in self.measure:
            out |= set(registry[m.kind].tags.named(m, "tagsets"))
        return [t for t in TAGSETS if t in out]


# --------------------------------------------------------------------------- loading


def spec_model() -> type[TrainingStudySpec]:
    """The spec with the measures registered now (a plugin's measures included)."""
    return _spec_model(tuple(sorted(measures("training"))))


@functools.cache
def _spec_model(kinds: tuple[str, ...]) -> type[TrainingStudySpec]:
    if not kinds:
        return TrainingStudySpec
    return create_model("TrainingStudySpec", __base__=TrainingStudySpec,
                        measure=(list[params_union("training")], Field(default_factory=list)))  # type: ignore[valid-type]


TABLES = {"corpus": CorpusSpec, "scaffold": ScaffoldSpec, "training": LSTMTraining, "checkpoints": CheckpointSpec, "log_spaced": LogSpaced,
          "model": NetworkSpec}


def check_sources(study: TrainingStudySpec, sf: SpecFile) -> list[str]:
    src = study.corpus.source
    where = ("corpus", "source")
    if study.corpus.generated:
        return []
    problem = check_data(src, sf.path.parent, TAGGED, "source")
    if problem:
        return [sf.problem(where, problem)]
    have = data_source_for(src).annotations(src)
    for t in study.tagsets():
        if t in ("upos", "xpos") and t not in have:
            return [sf.problem(where, f"tag set {t!r} needs a .conllu corpus; use spacy_{t} for silver tags "
                               "from spaCy, or 'topic'")]
        if t == "topic" and "documents" not in have:
            return [sf.problem(where, "tag set 'topic' needs documents (.conllu with # newdoc, or wikitext articles)")]
    return []


SPACY_INSTALL = "pip install -e '.[spacy]' && python -m spacy download en_core_web_sm"


def missing_extras(study: TrainingStudySpec) -> list[str]:
    """Optional packages the study needs and this environment lacks, each with its install command."""
    if not any(t.startswith("spacy_") for t in study.tagsets()):
        return []
    try:
        import spacy  # lazy: spacy
    except ImportError:
        return [f"spaCy for the silver tag sets {[t for t in study.tagsets() if t.startswith('spacy_')]}: {SPACY_INSTALL}"]
    if not spacy.util.is_package("en_core_web_sm"):
        return ["spaCy's English model for the silver tag sets: python -m spacy download en_core_web_sm"]
    return []


def read_corpus(spec: TrainingStudySpec, tagsets: list[str], base: Path) -> Corpus:
    """The spec's corpus, read (a hub corpus from the local cache when the hub is off)."""
    with offline_hub():
        try:
            return load_corpus(spec.corpus, tagsets, seed=spec.experiment.seed, base=base)
        except ValueError as err:
            if not spec.corpus.generated:
                raise
            raise SpecProblem(("corpus", "scaffold", "phrases"), str(err)) from None
