"""The corpus of a training study: sentences -> preprocessing -> split -> vocabulary -> streams.

Built from :mod:`runner.data.sources` (readers), :mod:`runner.data.tokens` (the thesis'
preprocessing, vocabulary, batching) and :mod:`runner.data.tagsets`. The order is the thesis': lowercase and drop sentences with rare words over the whole corpus, split
70/10/20 by sentence, build the vocabulary on the training split (rarer words encode to
``<unk>``). Tag streams are aligned token for token with the word streams (same ``<eos>``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from runner.data.sentences import split_sentences
from runner.data.sources import TaggedSentence, anchor, builtin_documents, load_hf_text, read_conllu, read_text, wikitext_articles
from runner.data.tagsets import CLOSED_CLASS, OPEN_CLASS, shuffled_tags, spacy_tags
from runner.data.tokens import EOS, Vocabulary, build_vocabulary, encode_corpus, preprocess_tagged, split_corpus


class CorpusError(Exception):
    """A corpus that cannot be read; the message names the source and the reason."""


@dataclass
class TagStreams:
    vocab: Vocabulary
    train: Tensor
    valid: Tensor


@dataclass
class Variant:
    """One of several training corpora over one vocabulary (the scaffold corpora of Ch. 5 Sec. 4)."""

    train: Tensor
    valid: Tensor
    coords: dict[str, Any] = field(default_factory=dict)
    """Per-network coordinates of the store for networks trained on it (e.g. ``scaffold_length``)."""
    tests: dict[str, Any] = field(default_factory=dict)
    """Test sets measures read (scaffold: :class:`runner.data.scaffold.ScaffoldTests` by domain)."""


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
    src = spec.source
    if src.startswith("hf:"):
        try:
            records = load_hf_text(src.removeprefix("hf:"), spec.subset, "train", spec.field)
        except (RuntimeError, KeyError) as err:
            raise CorpusError(f"[corpus] source {src!r}: {err}") from None
        out = []
        for title, recs in wikitext_articles(records) or [("0", records)]:
            out += [TaggedSentence(tuple(r), ("_",) * len(r), ("_",) * len(r), title) for r in recs]
        return out
    if src.startswith("builtin:"):  # the same English prose as the depth study's inputs
        out = []
        for topic, text in builtin_documents(src.removeprefix("builtin:")):
            for sentence in split_sentences(text):
                words = tuple(sentence.split())
                out.append(TaggedSentence(words, ("_",) * len(words), ("_",) * len(words), topic))
        return out
    path = Path(anchor(src, base))
    try:
        if path.suffix == ".conllu":
            return read_conllu(path)
        return [TaggedSentence(tuple(w), ("_",) * len(w), ("_",) * len(w), None) for w in read_text(path)]
    except (OSError, ValueError) as err:
        raise CorpusError(f"[corpus] source {src!r}: {err}") from None


def scaffold_variants(spec) -> list[str]:
    """Variant names of a ``scaffold:`` corpus: ``<setting>_k<k>``."""
    sc = spec.scaffold
    return [f"{s}_k{k}" for k in sc.lengths for s in sc.settings]


def _scaffold_corpus(spec, seed: int) -> Corpus:
    from runner.data.scaffold import ScaffoldConfig, generate, vocabulary

    sc = spec.scaffold
    cfg = ScaffoldConfig(**sc.model_dump(exclude={"lengths", "settings"}))
    itos = tuple(vocabulary(cfg.vocab_size))
    variants: dict[str, Variant] = {}
    for k in sc.lengths:
        made = generate(cfg, k, seed, tuple(sc.settings))
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
    if spec.source == "scaffold:":
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
    if any(t.startswith("spacy_") for t in tagsets):
        try:
            tagged = spacy_tags([s.words for s in sents], doc_ids=[s.doc_id for s in sents])
        except RuntimeError as err:
            raise CorpusError(f"[corpus] spaCy tags: {err}") from None
        sents = [TaggedSentence(s.words, s.upos, s.xpos, s.doc_id) for s in tagged]
    train, valid, test = split_corpus(sents, spec.split, seed=seed)
    vocab = build_vocabulary([s.words for s in train], min_count=spec.min_count)
    corpus = Corpus(vocab, *(encode_corpus([s.words for s in part], vocab) for part in (train, valid, test)))
    for t in tagsets:
        def tags_of(part, t=t):
            column = {"upos": "upos", "xpos": "xpos", "spacy_upos": "upos", "spacy_xpos": "xpos"}.get(t)
            if column is None:
                if any(s.doc_id is None for s in part):
                    raise CorpusError(f"[corpus] source {spec.source!r}: tag set 'topic' needs document ids")
                return [[s.doc_id] * len(s.words) for s in part]
            return [list(getattr(s, column)) for s in part]

        tr, va = tags_of(train), tags_of(valid)
        tvocab = build_vocabulary(tr + va, min_count=1, unk=None, eos=EOS)
        corpus.tags[t] = TagStreams(tvocab, encode_corpus(tr, tvocab), encode_corpus(va, tvocab))
        corpus.train_tag_sentences[t] = tr
    corpus.word_class = _word_classes(train, vocab) if any(s.upos and s.upos[0] != "_" for s in train[:50]) else []
    return corpus


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


def analysis_slice(stream: Tensor, tokens: int, columns: int) -> Tensor:
    """The first ``tokens`` tokens (+1 for targets) of a stream as ``(columns, length)`` rows."""
    n = min(tokens + 1, stream.numel())
    length = n // columns
    if length < 2:
        raise CorpusError(f"analysis needs at least {2 * columns} validation tokens; the split has {stream.numel()}")
    return stream[: length * columns].view(columns, length)
