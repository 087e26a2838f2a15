"""The corpus of a training study: sentences -> preprocessing -> split -> vocabulary -> streams.

Built from the data sources (:mod:`runner.data`), :mod:`runner.studies.training.data.tokens` (the thesis'
preprocessing, vocabulary, batching) and :mod:`runner.studies.training.data.tagsets`. The order is the thesis': lowercase and drop sentences with rare words over the whole corpus, split
70/10/20 by sentence, build the vocabulary on the training split (rarer words encode to
``<unk>``). Tag streams are aligned token for token with the word streams (same ``<eos>``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.data.files import anchor
from runner.data.forms import TaggedSentence
from runner.data.registry import TAGGED, InputError, data_source, read
from runner.studies.training.data import scaffold
from runner.studies.training.data.gmb import GmbSentence, read_gmb
from runner.studies.training.data.tagsets import CLOSED_CLASS, OPEN_CLASS, shuffled_tags, spacy_tags
from runner.studies.training.data.tokens import (
    EOS,
    Vocabulary,
    build_vocabulary,
    encode_corpus,
    preprocess_tagged,
    split_corpus,
)
from runner.core.errors import Unavailable

if TYPE_CHECKING:
    from torch import Tensor


class CorpusError(Unavailable):
    """A corpus that cannot be read; the message names the source and the reason. ``where``,
    ``reason``, ``fix`` and ``detail``: its parts, when known (a plan's requirement)."""

    def __init__(self, message: str, *, where: str | None = None, reason: str | None = None,
                 fix: str | None = None, detail: str | None = None):
        super().__init__(message)
        self.where, self.reason, self.fix, self.detail = where, reason, fix, detail


@dataclass
class TagStreams:
    vocab: Vocabulary
    train: Tensor
    valid: Tensor
    test: Tensor | None = None
    words: tuple[Tensor, Tensor, Tensor] | None = None
    """The (train, valid, test) word streams the tags align with, when they are not the LM corpus'
    (the ``tag_articles`` documents, a GMB file)."""

    def part(self, split: str) -> Tensor:
        return {"train": self.train, "valid": self.valid, "test": self.test}[split]


@dataclass
class Variant:
    """One of several training corpora over one vocabulary (the scaffold corpora of Ch. 5 Sec. 4)."""

    train: Tensor
    valid: Tensor
    coords: dict[str, Any] = field(default_factory=dict)
    """Per-network coordinates of the store for networks trained on it (e.g. ``scaffold_length``)."""
    tests: dict[str, Any] = field(default_factory=dict)
    """Test sets measures read (scaffold: :class:`runner.studies.training.data.scaffold.ScaffoldTests` by domain)."""


@dataclass
class Corpus:
    vocab: Vocabulary
    train: Tensor
    valid: Tensor
    test: Tensor
    tags: dict[str, TagStreams] = field(default_factory=dict)
    word_class: list[str] = field(default_factory=list)
    """Per vocabulary entry: 'open', 'closed' or 'other' by its majority UPOS in training ('' unknown)."""
    train_tag_sentences: dict[str, list[list[str]]] = field(default_factory=dict)
    variants: dict[str, Variant] = field(default_factory=dict)
    """Named training corpora (a ``[[model]]`` picks one with ``corpus_variant``); ``train`` and
    ``valid`` are then those of the first."""
    document_words: tuple[Tensor, Tensor, Tensor] | None = None
    """(train, valid, test) word streams of the ``tag_articles`` longest documents, when set."""

    def analysis_streams(self, split: str = "valid") -> tuple[Tensor, dict[str, Tensor]]:
        """The words measures read (``split`` of the ``tag_articles`` documents when set, else of the
        corpus) and the tag streams aligned with them (tag sets of another corpus left out)."""
        words = dict(zip(("train", "valid", "test"), self.document_words or (self.train, self.valid, self.test)))
        tags = {t: s.part(split) for t, s in self.tags.items() if s.words is self.document_words}
        return words[split], tags

    def tagger_streams(self, tagset: str) -> tuple[Tensor, Tensor]:
        """The (train, valid) word streams a tagger of ``tagset`` reads."""
        s = self.tags[tagset]
        return (s.words[0], s.words[1]) if s.words is not None else (self.train, self.valid)

    def streams(self, variant: str | None = None) -> tuple[Tensor, Tensor]:
        """The (train, valid) streams a network trains on."""
        if variant is None:
            return self.train, self.valid
        if variant not in self.variants:
            raise CorpusError(f"the corpus has no variant {variant!r}; variants: {sorted(self.variants)}")
        v = self.variants[variant]
        return v.train, v.valid

    def frequencies(self) -> list[int]:
        return [int(self.vocab.counts.get(w, 0)) for w in self.vocab.itos]

    def shuffled_train_tags(self, tagset: str, seed: int) -> Tensor:
        """The training tag stream with tag tokens permuted across the corpus (Zhang et al. 2016)."""
        sents = shuffled_tags(self.train_tag_sentences[tagset], seed=seed)
        return encode_corpus(sents, self.tags[tagset].vocab)


def _sentences(spec, base: Path) -> list[TaggedSentence]:
    try:
        return read(data_source(spec.source, TAGGED, "[corpus] source"), TAGGED,
                    spec.source, base, subset=spec.subset, field=spec.field, doc_field=getattr(spec, "doc_field", None))
    except InputError as err:
        raise CorpusError(f"[corpus] source {spec.source!r}: {err}", where=f"[corpus] source {spec.source!r}",
                          reason=err.reason, fix=err.fix, detail=err.detail) from None


def scaffold_variants(spec) -> list[str]:
    """Variant names of a ``scaffold:`` corpus: ``<setting>_k<k>``."""
    sc = spec.scaffold
    return [f"{s}_k{k}" for k in sc.lengths for s in sc.settings]


def _scaffold_corpus(spec, seed: int) -> Corpus:
    import torch  # lazy: torch

    sc = spec.scaffold
    cfg = scaffold.ScaffoldConfig(**sc.model_dump(exclude={"lengths", "settings"}))
    itos = tuple(scaffold.vocabulary(cfg.vocab_size))
    variants: dict[str, Variant] = {}
    for k in sc.lengths:
        made = scaffold.generate(cfg, k, seed, tuple(sc.settings))
        tests = dict(made.tests)
        for setting in sc.settings:
            variants[f"{setting}_k{k}"] = Variant(
                torch.from_numpy(made.train[setting].tokens), torch.from_numpy(made.valid[setting].tokens),
                {"scaffold_length": k, "familiar_scaffold": setting == "familiar"}, tests)
    first = next(iter(variants.values()))
    counts = torch.bincount(first.train, minlength=len(itos)).tolist()
    vocab = Vocabulary(itos, {w: i for i, w in enumerate(itos)}, dict(zip(itos, counts)), unk=None, eos=None)
    test = torch.from_numpy(first.tests["in_domain"].inputs.reshape(-1))
    return Corpus(vocab, first.train, first.valid, test, variants=variants)


def load_corpus(spec, tagsets: list[str], seed: int, base: Path = Path(".")) -> Corpus:
    """Read and preprocess the corpus; ``seed`` draws the split; ``tagsets`` are encoded too.
    ``source = "scaffold:"`` generates the synthetic scaffold corpora instead (``seed`` draws them)."""
    if scaffold.generates(spec.source):
        if tagsets:
            raise CorpusError(f"the scaffold corpus has no tags; tag sets {tagsets} need a tagged corpus")
        return _scaffold_corpus(spec, seed)
    sents = _sentences(spec, base)
    if spec.max_sentences:
        sents = sents[: spec.max_sentences]
    sents = preprocess_tagged(sents, lowercase=spec.lowercase, drop_rare_sentences=spec.drop_rare_sentences,
                              drop_below=spec.min_count if spec.drop_rare_sentences else None)
    if len(sents) < 3:
        raise CorpusError(f"[corpus] source {spec.source!r}: only {len(sents)} sentences after preprocessing")
    documents = longest_documents(sents, spec.tag_articles) if getattr(spec, "tag_articles", None) else None
    if any(t.startswith("spacy_") for t in tagsets):
        tag_these = sents if documents is None else documents
        try:
            tagged = spacy_tags([s.words for s in tag_these], doc_ids=[s.doc_id for s in tag_these])
        except RuntimeError as err:
            raise CorpusError(f"[corpus] spaCy tags: {err}") from None
        tagged = [TaggedSentence(s.words, s.upos, s.xpos, s.doc_id) for s in tagged]
        if documents is None:
            sents = tagged
        else:
            documents = tagged
    train, valid, test = split_corpus(sents, spec.split, seed=seed)
    vocab = build_vocabulary([s.words for s in train], min_count=spec.min_count,
                             max_size=getattr(spec, "max_vocab", None))
    corpus = Corpus(vocab, *(encode_corpus([s.words for s in part], vocab) for part in (train, valid, test)))
    doc_parts = None
    if documents is not None:
        doc_parts = split_corpus(documents, spec.split, seed=seed)
        corpus.document_words = tuple(encode_corpus([s.words for s in part], vocab) for part in doc_parts)
    gmb: dict[str, list] = {}
    for t in tagsets:
        words = None
        if t in ("gmb_pos", "sem_coarse", "sem_fine"):
            key = "gmb_pos" if t == "gmb_pos" else "gmb_sem"
            if key not in gmb:
                parts = _gmb_parts(spec, key, base, seed)
                gmb[key] = (parts, tuple(encode_corpus([s.words for s in part], vocab) for part in parts))
            parts, words = gmb[key]
            column = {"gmb_pos": "pos", "sem_fine": "sem", "sem_coarse": "sem_coarse"}[t]
            tagged_parts = [[list(getattr(s, column)) for s in part] for part in parts]
        else:
            parts = (train, valid, test) if doc_parts is None else doc_parts
            words = corpus.document_words

            def tags_of(part, t=t):
                column = {"upos": "upos", "xpos": "xpos", "spacy_upos": "upos", "spacy_xpos": "xpos"}.get(t)
                if column is None:
                    if any(s.doc_id is None for s in part):
                        raise CorpusError(f"[corpus] source {spec.source!r}: tag set 'topic' needs document ids")
                    return [[s.doc_id] * len(s.words) for s in part]
                return [list(getattr(s, column)) for s in part]

            tagged_parts = [tags_of(part) for part in parts]
        tr, va, te = tagged_parts
        tvocab = build_vocabulary(tr + va, min_count=1, unk=None, eos=EOS)
        corpus.tags[t] = TagStreams(tvocab, encode_corpus(tr, tvocab), encode_corpus(va, tvocab),
                                    encode_corpus(_known_tags(te, tvocab), tvocab), words)
        corpus.train_tag_sentences[t] = tr
    corpus.word_class = _word_classes(train, vocab) if any(s.upos and s.upos[0] != "_" for s in train[:50]) else []
    return corpus


def longest_documents(sents: list[TaggedSentence], n: int) -> list[TaggedSentence]:
    """The sentences of the ``n`` documents with the most tokens, in corpus order (ties: the earlier
    document), thesis Ch. 4: "the 100 longest articles in Wikipedia"."""
    if any(s.doc_id is None for s in sents):
        raise CorpusError("tag_articles needs document ids (an hf: source or a .conllu with # newdoc)")
    sizes: dict[str, int] = {}
    for s in sents:
        sizes[s.doc_id] = sizes.get(s.doc_id, 0) + len(s.words)
    order = {d: k for k, d in enumerate(sizes)}
    keep = set(sorted(sizes, key=lambda d: (-sizes[d], order[d]))[:n])
    return [s for s in sents if s.doc_id in keep]


def _gmb_parts(spec, key: str, base: Path, seed: int) -> tuple[list, list, list]:
    """The train / valid / test sentences of a GMB-style tagged file (lowercased as the corpus)."""
    path = Path(anchor(getattr(spec, key), base))
    try:
        sents = read_gmb(path)
    except (OSError, ValueError) as err:
        raise CorpusError(f"[corpus] {key} {getattr(spec, key)!r}: {err}") from None
    if spec.lowercase:
        sents = [GmbSentence(tuple(w.lower() for w in s.words), s.pos, s.sem) for s in sents]
    if len(sents) < 3:
        raise CorpusError(f"[corpus] {key} {getattr(spec, key)!r}: {len(sents)} sentences; the split needs 3")
    return split_corpus(sents, spec.split, seed=seed)


def _known_tags(sentences: list[list[str]], tvocab: Vocabulary) -> list[list[str]]:
    """Test tags with tags unseen in training and validation replaced by the most frequent tag (the tag
    vocabulary has no unknown entry)."""
    common = max((w for w in tvocab.itos if w != tvocab.eos), key=lambda w: tvocab.counts.get(w, 0))
    return [[t if t in tvocab.stoi else common for t in sent] for sent in sentences]


def _word_classes(train: list[TaggedSentence], vocab: Vocabulary) -> list[str]:
    by_word: dict[int, Counter] = {}
    for s in train:
        for w, pos in zip(vocab.encode(s.words), s.upos):
            by_word.setdefault(w, Counter())[pos] += 1
    out = []
    for i in range(len(vocab)):
        if i not in by_word:
            out.append("")
            continue
        pos = by_word[i].most_common(1)[0][0]
        out.append("open" if pos in OPEN_CLASS else "closed" if pos in CLOSED_CLASS else "other")
    return out
