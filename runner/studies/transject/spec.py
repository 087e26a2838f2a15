"""The TransJect spec: ``[experiment]``, ``[data]``, ``[training]``, ``[[model]]`` and ``[[measure]]``.

Defaults are the paper's (Sec. 3.6 and App. B): Adam with lr 5e-4, betas (0.9, 0.98), eps 1e-9,
batches of 32, 30 epochs with early stopping on the test loss (patience 4), L = 6 layers,
d = 512, E = 4 experts; the baselines have 8 heads, d_ff = 2048 and dropout 0.1 (Table 4).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, create_model, model_validator

from models.source import SourceText
from runner.checkpointed.measure import ActivationView
from runner.checkpointed.table import TrainingTable
from runner.data.registry import DataSource, data_source_for
from runner.plugin.measures import measures, params_union
from runner.spec.specfile import Name, StudySpec, Table, repeated
from runner.studies.transject.data.classification import tokenize

Architecture = Literal["transject", "random-transject", "entropic-transject", "random-entropic-transject",
                       "transformer", "transformer-rezero"]
BASELINES = ("transformer", "transformer-rezero")
MAX_TASKS = 100_000
"""Tasks (and checkpoint resources) a plan may hold: each is a few kB in memory, and plan lists them
(measured: 100,000 tasks plan in about 3 s with 0.4 GB; the paper's specs have about 3,400)."""
#: The sentence of Figs. 1 and 6 (an IMDb review).
PAPER_SENTENCE = ("The characters are unlikeable and the script is awful. It's a waste of the talents of "
                  "Deneuve and Auteuil.")


class ListOpsSpec(Table):
    """The ListOps generator (LRA's rules, :mod:`runner.studies.transject.data.listops`); LRA's sizes and lengths."""

    train: int = Field(96_000, ge=1)
    """Training sequences (LRA: 96,000)."""
    test: int = Field(2_000, ge=1)
    """Test sequences (LRA: 2,000)."""
    max_depth: int = Field(10, ge=1)
    max_args: int = Field(10, ge=2)
    min_length: int = Field(500, ge=0)
    """Kept trees have min_length < length < max_length tokens (LRA: 500, 2000)."""
    max_length: int = Field(2000, ge=2)


@dataclass(frozen=True)
class TransJectView(ActivationView):
    """What a TransJect spec shows its measures: the kit's view, and each trained model's experts."""

    expert_widths: tuple[tuple[str, int], ...] = ()
    """(what, components) of each trained model's expert (TransJect) or head (baselines) output."""


class DataSpec(Table):
    source: SourceText = Field(min_length=1)
    """``listops:`` (generated), ``hf:<dataset id>`` (``hf:stanfordnlp/imdb``, ``hf:fancyzhx/ag_news``), or a
    local .parquet/.csv/.jsonl file (``{split}`` in the path is replaced by the split name)."""
    subset: str | None = None
    """Dataset configuration of an ``hf:`` source."""
    text: str = "text"
    """Column holding the text."""
    label: str = "label"
    """Column holding the class (integers; strings are numbered in sorted order)."""
    train_split: str = "train"
    test_split: str = "test"
    test_fraction: float = Field(0.2, gt=0, lt=1)
    """A local source without ``{split}``: the share of its rows kept for testing."""
    listops: ListOpsSpec = ListOpsSpec()
    """The generator's parameters (``listops:`` sources)."""
    tokenize: Literal["word", "char"] = "word"
    """``word``: words and punctuation; ``char``: characters (CharIMDb). ListOps keeps its own tokens."""
    tokenizer: str | None = None
    """A hub tokenizer (id or local directory) whose ``tokenize`` and vocabulary replace ``tokenize``
    and ``vocab_size`` (the paper: ``bert-base-uncased`` for IMDb and AGnews)."""
    lowercase: bool = True
    max_length: int = Field(512, ge=2)
    """Tokens per sequence, longer ones cut (paper: IMDb 512, AGnews 256, ListOps and CharIMDb 1024)."""
    vocab_size: int = Field(30_522, ge=3)
    """Vocabulary entries at most, <pad> and <unk> included (the paper's BERT tokenizer has 30,522)."""
    max_train: int | None = Field(None, ge=1)
    """Keep only the first N training examples (quick runs)."""
    max_test: int | None = Field(None, ge=1)
    """Keep only the first N test examples."""
    n_classes: int | None = Field(None, ge=2)
    """Classes (default: 1 + the largest label seen; ListOps: 10)."""
    analysis_examples: int = Field(32, ge=1)
    """Test examples on which the measures are computed (entropy, bounds, experts)."""
    analysis_text: str | None = None
    """The sentence of Figs. 1 and 6 (distances, Isomap); default: the paper's IMDb sentence for text
    sources, the first test sequence for ListOps."""

    @property
    def reader(self) -> DataSource | None:
        """The data source that reads ``source`` (None: none does; the study's check says so)."""
        return data_source_for(self.source)

    @property
    def pretokenized(self) -> bool:
        """The source's texts are tokens separated by blanks (ListOps): no tokenizer applies."""
        return bool(self.reader and self.reader.pretokenized)

    def implied(self, key: str, default: Any = None) -> Any:
        """A setting the source implies (:attr:`DataSource.defaults`: ListOps' 10 classes)."""
        return (self.reader.defaults if self.reader else {}).get(key, default)


class TransJectTraining(TrainingTable):
    epochs: int = Field(30, ge=1)
    """Epochs at most (paper: 30)."""
    patience: int | None = Field(4, ge=1)
    """Stop when the test loss has not improved for this many epochs (paper: 4); none: never."""
    lr: float = Field(5e-4, gt=0)
    betas: list[Annotated[float, Field(ge=0, lt=1)]] = Field(default_factory=lambda: [0.9, 0.98], min_length=2,
                                                             max_length=2)
    """Adam's beta_1, beta_2 (paper: 0.9, 0.98), each in [0, 1) (Kingma & Ba 2015, Algorithm 1)."""
    eps: float = Field(1e-9, gt=0)
    batch_size: int = Field(32, ge=1)
    """Training and test batches (paper: 32)."""
    reconstruction_weight: float = Field(1.0, ge=0)
    """Weight of the eigenvalue reconstruction loss of the Approx. variants (Sec. 3.1; the paper gives none)."""


class ModelSpec(Table):
    name: Name
    """Label of the model; each seed is the network ``<name>-s<seed>``."""
    variant: Architecture = "transject"
    """A row of Table 1 (transject, random-transject, entropic-transject, random-entropic-transject) or a
    baseline (transformer, transformer-rezero)."""
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    """Initialisation seeds, one network each (the paper: three, for mean and s.d.)."""
    replicates: int | None = Field(None, ge=1)
    """Instead of seeds: this many networks with seeds experiment seed + 0, 1, ..."""
    checkpoint: str | None = None
    """Measure saved weights instead of training: a local directory or a hub model id holding
    config.json, model.safetensors and (optionally) vocab.json, as this study exports them."""
    d_model: int = Field(512, ge=2)
    n_layers: int = Field(6, ge=1)
    n_experts: int = Field(4, ge=1)
    """TransJect's experts per layer (paper: 4)."""
    alpha_init: float = Field(0.01, gt=0, lt=1)
    """TransJect's starting alpha_l (Eq. 3)."""
    gate: Literal["learned", "input"] = "learned"
    """TransJect's expert weights: ``learned``, one convex lambda per layer (Eq. 5, the paper); ``input``,
    per sample from the experts' outputs, as the authors' code (docs/transject.md)."""
    n_heads: int = Field(8, ge=1)
    """Baselines' heads (Table 4: 8)."""
    d_ff: int = Field(2048, ge=1)
    """Baselines' feed-forward size (Table 4: 2048)."""
    dropout: float = Field(0.1, ge=0, lt=1)
    """Baselines' dropout (0.1); TransJect has none."""
    pooling: Literal["mean", "max"] | None = None
    """Default: max for ListOps, mean otherwise (Sec. 3.6)."""

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        if self.replicates is not None and "seeds" in self.model_fields_set:
            raise ValueError("give seeds or replicates, not both")
        if self.d_model % 2:
            raise ValueError("d_model must be even (TransJect: embedding and position take d/2 each)")
        if self.variant in BASELINES and self.gate != "learned":
            raise ValueError(f"gate applies to TransJect's experts, not to the baseline {self.variant!r}")
        if self.variant in BASELINES and self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        return self


class TransJectSpec(StudySpec):
    data: DataSpec
    training: TransJectTraining = TransJectTraining()
    model: list[ModelSpec] = Field(min_length=1)
    measure: list[Any] = Field(default_factory=list)

    def problems(self) -> list[tuple[tuple, str]]:
        out = repeated(self.model, "model")
        kinds = [m.kind for m in self.measure]
        out += [(("measure", i, "kind"), f"each measure may appear once; {k} is repeated")
                for i, k in enumerate(kinds) if k in kinds[:i]]
        for i, m in enumerate(self.model):
            if len(set(m.seeds)) < len(m.seeds):
                out.append((("model", i, "seeds"), f"seeds must be distinct, not {m.seeds}"))
        labels = [self.label(m, s) for _, m, _, s in self.networks()]
        clash = sorted({x for i, x in enumerate(labels) if x in labels[:i]})
        if clash:
            out.append((("model",), f"network labels {clash} occur twice (a model named like another's seed)"))
        if self.data.listops.max_length <= self.data.listops.min_length + 1:
            out.append((("data", "listops", "max_length"), "must exceed min_length + 1"))
        classes = self.data.implied("n_classes")
        if classes is not None and self.data.n_classes is not None and self.data.n_classes < classes:
            out.append((("data", "n_classes"), f"{self.data.n_classes} is fewer than {self.data.reader.name}' {classes} "
                        f"classes (its labels are 0..{classes - 1})"))
        tasks = self.task_count()
        if tasks > MAX_TASKS:
            out.append((("training", "epochs"), f"{self.training.epochs} epochs make {tasks:,} tasks and checkpoints "
                        f"(networks x (1 + measures) x (epochs + 1)); a plan holds at most {MAX_TASKS:,}"))
        return out

    def view(self) -> TransJectView:
        """What its measures see of the spec (``Measure.problems``)."""
        trained = [m for m in self.model if not m.checkpoint]
        deepest = max((m.n_layers for m in trained), default=None)
        sentence = self.analysis_sentence()
        return TransJectView(
            networks=tuple(m.name for m in self.model),
            token_widths=tuple((f"a token of [[model]] {m.name!r} (its d_model components)", m.d_model)
                               for m in trained),
            layers=None if deepest is None else ("embedding", *(f"layer{i + 1}" for i in range(deepest))),
            references=False, sentence=None if sentence is None else tuple(sentence),
            closed_tokens=self.data.implied("tokens"), source=self.data.reader.name if self.data.reader else "",
            expert_widths=tuple(
                (f"a head's output of [[model]] {m.name!r} (d_model / n_heads components)", m.d_model // m.n_heads)
                if m.variant in BASELINES else (f"an expert's output of [[model]] {m.name!r} (its d_model components)",
                                                 m.d_model)
                for m in trained))

    def task_count(self) -> int:
        """Tasks and checkpoint resources of the plan: each trained network has one per epoch (and
        epoch 0) for training and for every measure; a saved checkpoint has one."""
        per = 1 + len(self.measure)
        return sum(per * (1 if m.checkpoint else (self.training.epochs + 1) * len(self.seeds(m))) for m in self.model)

    def seeds(self, m: ModelSpec) -> list[int]:
        if m.replicates is not None:
            return [self.experiment.seed + k for k in range(m.replicates)]
        return list(m.seeds)

    def networks(self) -> list[tuple[int, ModelSpec, int, int]]:
        """(index, model entry, replicate, seed) of every network, in order; a checkpoint model is one network."""
        out = []
        for m in self.model:
            seeds = [0] if m.checkpoint else self.seeds(m)
            for r, s in enumerate(seeds):
                out.append((len(out), m, r, s))
        return out

    def label(self, m: ModelSpec, seed: int) -> str:
        return m.name if m.checkpoint else f"{m.name}-s{seed}"

    def analysis_sentence(self) -> list[str] | None:
        """Tokens of the analysis sentence (Figs. 1 and 6) as the session will have them, or None
        where they come from the data (ListOps' first test sequence) or a hub tokenizer."""
        d = self.data
        if d.tokenizer and not d.pretokenized:
            return None
        if d.analysis_text is not None:  # ListOps: its tokens are separated by spaces
            words = d.analysis_text.split() if d.pretokenized else tokenize(d.analysis_text, d.tokenize, d.lowercase)
        elif d.pretokenized:
            return None
        else:
            words = tokenize(PAPER_SENTENCE, d.tokenize, d.lowercase)
        return words[: d.max_length]

    def pooling(self, m: ModelSpec) -> str:
        return m.pooling or self.data.implied("pooling", "mean")


def spec_model() -> type[TransJectSpec]:
    return _spec_model(tuple(sorted(measures("transject"))))


@functools.cache
def _spec_model(kinds: tuple[str, ...]) -> type[TransJectSpec]:
    if not kinds:
        return TransJectSpec
    return create_model("TransJectSpec", __base__=TransJectSpec,
                        measure=(list[params_union("transject")], Field(default_factory=list)))  # type: ignore[valid-type]


TABLES = {"data": DataSpec, "listops": ListOpsSpec, "training": TransJectTraining, "model": ModelSpec}
