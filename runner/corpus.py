"""Corpora and tags for the LSTM training studies of Saphra's thesis (Chapters 4 and 6).

What the thesis does, and where it is implemented here:

* Preprocessing (Ch. 4 Sec. 3, Ch. 6 Sec. 2): "a corpus of tokenized, lowercased English
  Wikipedia (70/10/20 train/dev/test split). To reduce the number of unique words (mostly names)
  in the corpus, we excluded any sentence with a word which appears fewer than 100 times. Those
  words which still appear fewer than 100 times after this filter are replaced with <UNK>."
  -> ``preprocess`` / ``preprocess_tagged``, ``split_corpus``, ``build_vocabulary``.
* Batching (Ch. 6 Sec. 2): "The batch size is set to forty, the maximum sequence length to 35"
  -> ``batchify`` / ``get_batch`` as in pytorch/examples ``word_language_model``.
* Tags (Ch. 4 Sec. 3.1): silver UD POS tags added with spaCy -> ``spacy_tags``; gold PTB POS
  from a treebank -> ``read_conllu`` (UPOS and XPOS columns); "Global topic ... we classify each
  word of sequence by its source Wikipedia article" -> ``topic_tags``; "we also trained our
  taggers on the same data with randomly shuffled labels, as in Zhang et al. (2016)" ->
  ``shuffled_tags``.

Only plain arguments come in; nothing here imports the rest of ``runner``.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

import torch
from torch import Tensor

T = TypeVar("T")

UNK = "<unk>"
EOS = "<eos>"

# --------------------------------------------------------------------------------------------
# vocabulary


@dataclass(frozen=True)
class Vocabulary:
    """Index <-> token maps with the training-set frequency of every entry.

    ``itos[i]`` is the token with id ``i``; ``stoi`` inverts it; ``counts[token]`` is its frequency
    in the sentences the vocabulary was built from (``counts[unk]`` sums the words folded into it;
    ``eos`` counts one per sentence). Tokens missing from ``stoi`` encode to ``unk`` (an error when
    ``unk`` is None, as for tag sets).
    """

    itos: tuple[str, ...]
    stoi: Mapping[str, int]
    counts: Mapping[str, int]
    unk: str | None = UNK
    eos: str | None = EOS

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: object) -> bool:
        return token in self.stoi

    @property
    def unk_id(self) -> int | None:
        return None if self.unk is None else self.stoi[self.unk]

    @property
    def eos_id(self) -> int | None:
        return None if self.eos is None else self.stoi[self.eos]

    def encode(self, tokens: Iterable[str]) -> list[int]:
        unk_id = self.unk_id
        ids = []
        for tok in tokens:
            i = self.stoi.get(tok, unk_id)
            if i is None:
                raise KeyError(f"{tok!r} is not in the vocabulary and it has no unk token")
            ids.append(i)
        return ids

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[int(i)] for i in ids]


def build_vocabulary(
    sentences: Iterable[Sequence[str]],
    min_count: int = 1,
    unk: str | None = UNK,
    *,
    eos: str | None = EOS,
) -> Vocabulary:
    """Vocabulary of the words seen at least ``min_count`` times; the rest fold into ``unk``.

    Order: ``unk``, ``eos`` (those not None), then words by decreasing count, ties alphabetical,
    so ids are deterministic. Build it from the *training* split (Ch. 6: words "appearing fewer
    than 100 times in the resulting training set are replaced"). For tag sets use
    ``min_count=1, unk=None`` and the same ``eos`` as the word vocabulary so that streams align.
    """
    if min_count < 1:
        raise ValueError(f"min_count must be >= 1, got {min_count}")
    if unk is None and min_count > 1:
        raise ValueError("min_count > 1 drops words, which needs an unk token")
    word_counts: Counter[str] = Counter()
    n_sentences = 0
    for sentence in sentences:
        word_counts.update(sentence)
        n_sentences += 1
    specials = [s for s in (unk, eos) if s is not None]
    if len(set(specials)) != len(specials):
        raise ValueError("unk and eos must differ")
    counts: dict[str, int] = {s: 0 for s in specials}
    kept = []
    for word, c in sorted(word_counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if word in counts:  # a special token written in the text, e.g. wikitext's "<unk>"
            counts[word] += c
        elif c >= min_count:
            kept.append(word)
            counts[word] = c
        else:
            counts[unk] += c  # type: ignore[index]
    if eos is not None:
        counts[eos] += n_sentences
    itos = tuple(specials + kept)
    stoi = {w: i for i, w in enumerate(itos)}
    return Vocabulary(itos=itos, stoi=stoi, counts=counts, unk=unk, eos=eos)


def encode_corpus(sentences: Iterable[Sequence[str]], vocab: Vocabulary) -> Tensor:
    """One flat int64 stream, ``(n_tokens,)``: each sentence's ids then ``vocab.eos`` if any
    (pytorch/examples ``Corpus.tokenize``). Use it for words and tags alike."""
    ids: list[int] = []
    eos_id = vocab.eos_id
    for sentence in sentences:
        ids.extend(vocab.encode(sentence))
        if eos_id is not None:
            ids.append(eos_id)
    return torch.tensor(ids, dtype=torch.long)


# --------------------------------------------------------------------------------------------
# preprocessing and splits


def _preprocess(
    sentences: Sequence[Sequence[str]],
    *,
    lowercase: bool,
    min_count: int | None,
    drop_rare_sentences: bool,
    drop_below: int | None,
    counts: Mapping[str, int] | None,
    unk: str,
) -> tuple[list[list[str]], list[int]]:
    sents = [[w.lower() for w in s] if lowercase else list(s) for s in sentences]
    kept = list(range(len(sents)))
    if drop_rare_sentences:
        threshold = drop_below if drop_below is not None else min_count
        if threshold is None:
            raise ValueError("drop_rare_sentences needs min_count or drop_below")
        before: Counter[str] = Counter(w for s in sents for w in s)
        kept = [i for i in kept if all(before[w] >= threshold for w in sents[i])]
        sents = [sents[i] for i in kept]
    if min_count is not None:
        after = counts if counts is not None else Counter(w for s in sents for w in s)
        sents = [[w if after.get(w, 0) >= min_count else unk for w in s] for s in sents]
    return sents, kept


def preprocess(
    sentences: Sequence[Sequence[str]],
    *,
    lowercase: bool = True,
    min_count: int | None = None,
    drop_rare_sentences: bool = False,
    drop_below: int | None = None,
    counts: Mapping[str, int] | None = None,
    unk: str = UNK,
) -> list[list[str]]:
    """The thesis' preprocessing, in its order (thesis setting: ``min_count=100,
    drop_rare_sentences=True``):

    1. ``lowercase`` every token;
    2. ``drop_rare_sentences``: drop every sentence containing a word seen fewer than
       ``drop_below`` (default ``min_count``) times in ``sentences``;
    3. ``min_count``: replace words seen fewer than ``min_count`` times *after* the filter by
       ``unk``. Counts come from the surviving sentences, or from ``counts`` when given -- pass
       the training split's lowercased counts (``Counter`` of its words) to replace by
       training-set frequency in dev and test, as the thesis does.

    ``min_count=None`` and ``drop_rare_sentences=False`` leave the words as they are.
    """
    return _preprocess(
        sentences, lowercase=lowercase, min_count=min_count,
        drop_rare_sentences=drop_rare_sentences, drop_below=drop_below, counts=counts, unk=unk,
    )[0]


def split_corpus(
    items: Sequence[T],
    fractions: Sequence[float] = (0.7, 0.1, 0.2),
    seed: int = 0,
    *,
    shuffle: bool = True,
) -> tuple[list[T], ...]:
    """Split ``items`` into ``len(fractions)`` parts (thesis: 70/10/20 train/dev/test).

    Deterministic: a ``random.Random(seed)`` permutation (or the original order with
    ``shuffle=False``), cut at ``round(n * cumulative fraction)``, so the parts partition the items
    exactly. Split sentences, not documents, when topic tags must see every document in training.
    """
    if not fractions or any(f < 0 for f in fractions) or abs(sum(fractions) - 1.0) > 1e-6:
        raise ValueError(f"fractions must be non-negative and sum to 1, got {tuple(fractions)}")
    order = list(range(len(items)))
    if shuffle:
        random.Random(seed).shuffle(order)
    n, parts, start, cum = len(items), [], 0, 0.0
    for k, f in enumerate(fractions):
        cum += f
        end = n if k == len(fractions) - 1 else round(n * cum)
        parts.append([items[i] for i in order[start:end]])
        start = end
    return tuple(parts)


# --------------------------------------------------------------------------------------------
# readers


@dataclass(frozen=True)
class TaggedSentence:
    """A sentence with per-token tags and the id of the document it came from."""

    words: tuple[str, ...]
    upos: tuple[str, ...]
    xpos: tuple[str, ...]
    doc_id: str | None = None

    def __post_init__(self) -> None:
        if not len(self.words) == len(self.upos) == len(self.xpos):
            raise ValueError("words, upos and xpos must have the same length")


def preprocess_tagged(
    sentences: Sequence[TaggedSentence],
    *,
    lowercase: bool = True,
    min_count: int | None = None,
    drop_rare_sentences: bool = False,
    drop_below: int | None = None,
    counts: Mapping[str, int] | None = None,
    unk: str = UNK,
) -> list[TaggedSentence]:
    """``preprocess`` on the words of tagged sentences; tags and doc ids follow their words."""
    words, kept = _preprocess(
        [s.words for s in sentences], lowercase=lowercase, min_count=min_count,
        drop_rare_sentences=drop_rare_sentences, drop_below=drop_below, counts=counts, unk=unk,
    )
    return [
        TaggedSentence(tuple(w), sentences[i].upos, sentences[i].xpos, sentences[i].doc_id)
        for w, i in zip(words, kept)
    ]


def read_text(path: str | Path) -> list[list[str]]:
    """One sentence per line, whitespace-separated tokens; blank lines are skipped."""
    with open(path, encoding="utf-8") as f:
        return [line.split() for line in f if line.strip()]


def parse_conllu(text: str) -> list[TaggedSentence]:
    """Parse CoNLL-U text (https://universaldependencies.org/format.html).

    Word lines have ten tab-separated fields; FORM, UPOS and XPOS are kept. Comment lines are
    skipped except ``# newdoc`` / ``# newdoc id = X``, which starts a document (id ``X``, or its
    ordinal among the newdoc lines when no id is given) that following sentences belong to until
    the next one. Multiword-token ranges (``1-2``) and empty nodes (``1.1``) are skipped, so
    ``words`` are the syntactic words. Sentences end at a blank line or at the end of the text.
    """
    sentences: list[TaggedSentence] = []
    doc_id: str | None = None
    n_docs = 0
    words: list[str] = []
    upos: list[str] = []
    xpos: list[str] = []

    def flush() -> None:
        if words:
            sentences.append(TaggedSentence(tuple(words), tuple(upos), tuple(xpos), doc_id))
        words.clear()
        upos.clear()
        xpos.clear()

    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            flush()
            continue
        if line.startswith("#"):
            body = line[1:].strip()
            if body == "newdoc" or body.startswith("newdoc ") or body.startswith("newdoc\t"):
                flush()
                n_docs += 1
                key, sep, value = body[len("newdoc"):].partition("=")
                doc_id = value.strip() if sep and key.strip() == "id" else str(n_docs - 1)
            continue
        fields = line.split("\t")
        if len(fields) != 10:
            raise ValueError(
                f"CoNLL-U line {lineno}: expected 10 tab-separated fields, got {len(fields)}"
            )
        token_id = fields[0]
        if "-" in token_id or "." in token_id:
            continue  # multiword-token range or empty node
        if not token_id.isdigit():
            raise ValueError(f"CoNLL-U line {lineno}: bad ID {token_id!r}")
        words.append(fields[1])
        upos.append(fields[3])
        xpos.append(fields[4])
    flush()
    return sentences


def read_conllu(path: str | Path) -> list[TaggedSentence]:
    """``parse_conllu`` on a UTF-8 file."""
    return parse_conllu(Path(path).read_text(encoding="utf-8"))


def load_hf_text(
    dataset_id: str = "wikitext",
    subset: str | None = "wikitext-2-raw-v1",
    split: str = "train",
    field: str = "text",
) -> list[list[str]]:
    """Whitespace-tokenized non-empty records of a Hugging Face dataset, via ``datasets``.

    Wikitext records are lines of articles (paragraphs and `` = Heading = `` lines), not
    sentences; ``wikitext_articles`` groups them by article for topic tags. Needs network access
    or a populated Hugging Face cache.
    """
    try:
        import datasets
    except ImportError as e:  # pragma: no cover - a declared dependency
        raise RuntimeError("load_hf_text needs the 'datasets' package") from e
    try:
        ds = datasets.load_dataset(dataset_id, subset, split=split)
    except Exception as e:
        raise RuntimeError(
            f"could not load Hugging Face dataset {dataset_id!r} (subset {subset!r}, split "
            f"{split!r}): {type(e).__name__}: {e}. Downloading needs network access to the "
            "Hugging Face Hub; offline, the dataset must already be in the cache (HF_HOME / "
            "HF_DATASETS_CACHE, with HF_DATASETS_OFFLINE=1)."
        ) from e
    if field not in ds.column_names:
        raise KeyError(f"dataset {dataset_id!r} has no field {field!r}; fields: {ds.column_names}")
    return [tokens for text in ds[field] if (tokens := str(text).split())]


def wikitext_articles(records: Sequence[Sequence[str]]) -> list[tuple[str, list[list[str]]]]:
    """Group tokenized wikitext records into ``(title, records)`` articles.

    A record ``= Title =`` (single equals signs) starts an article; section headings
    (``= = Section = =``) are dropped. Records before the first title are skipped.
    """
    articles: list[tuple[str, list[list[str]]]] = []
    for rec in records:
        if len(rec) >= 3 and rec[0] == "=" and rec[-1] == "=" and "=" not in rec[1:-1]:
            articles.append((" ".join(rec[1:-1]), []))
        elif rec and rec[0] == "=" and rec[-1] == "=":
            continue  # section heading
        elif articles:
            articles[-1][1].append(list(rec))
    return articles


# --------------------------------------------------------------------------------------------
# tags


def spacy_tags(
    sentences: Sequence[Sequence[str]],
    model: str = "en_core_web_sm",
    doc_ids: Sequence[str | None] | None = None,
) -> list[TaggedSentence]:
    """Silver tags from spaCy (thesis Ch. 4: UD POS "automatically added ... with spacy").

    The sentences keep their tokenization; ``upos`` is ``token.pos_`` (UD), ``xpos`` is
    ``token.tag_`` (PTB for the English models). spaCy is optional: install it and a model,
    e.g. ``pip install spacy && python -m spacy download en_core_web_sm``.
    """
    try:
        import spacy
        from spacy.tokens import Doc
    except ImportError as e:
        raise RuntimeError(
            "spacy_tags needs spaCy, which is optional and not installed: "
            f"pip install spacy && python -m spacy download {model}"
        ) from e
    try:
        nlp = spacy.load(model, exclude=["parser", "ner", "lemmatizer"])
    except OSError as e:
        raise RuntimeError(
            f"spaCy model {model!r} is not installed: python -m spacy download {model}"
        ) from e
    if doc_ids is not None and len(doc_ids) != len(sentences):
        raise ValueError("doc_ids must have one entry per sentence")
    out = []
    for k, words in enumerate(sentences):
        doc = Doc(nlp.vocab, words=list(words))
        for _, proc in nlp.pipeline:
            doc = proc(doc)
        out.append(TaggedSentence(
            tuple(words), tuple(t.pos_ for t in doc), tuple(t.tag_ for t in doc),
            None if doc_ids is None else doc_ids[k],
        ))
    return out


def topic_tags(sentences: Sequence[TaggedSentence]) -> list[list[str]]:
    """Thesis Ch. 4 "global topic": every token is tagged with its sentence's document id."""
    tags = []
    for k, s in enumerate(sentences):
        if s.doc_id is None:
            raise ValueError(f"sentence {k} has no doc_id")
        tags.append([s.doc_id] * len(s.words))
    return tags


def shuffled_tags(
    tags: Sequence[Sequence[str]],
    seed: int = 0,
    *,
    per: Literal["token", "type"] = "token",
    words: Sequence[Sequence[str]] | None = None,
) -> list[list[str]]:
    """Control tags with the word-tag association destroyed.

    ``per="token"`` (default; the thesis' control): "we also trained our taggers on the same data
    with randomly shuffled labels, as in Zhang et al. (2016)" -- the corpus' tag tokens are
    permuted across all positions. The tag distribution is kept exactly, but a word type gets
    different tags at different occurrences, so nothing generalizes; this matches the thesis'
    Table 2, where the randomized input taggers score near the majority-class rate (UDP POS 21%,
    topic 5%), which a per-type assignment would not give (a type -> tag map is trivially
    learnable by an input tagger).

    ``per="type"`` (a control-task variant, Hewitt and Liang 2019; not the thesis'): each word
    type in ``words`` gets one tag drawn from the corpus' tag distribution, used at every
    occurrence. The distribution is kept in expectation, not exactly.
    """
    rng = random.Random(seed)
    lengths = [len(t) for t in tags]
    flat = [t for sent in tags for t in sent]
    if per == "token":
        rng.shuffle(flat)
    elif per == "type":
        if words is None:
            raise ValueError("per='type' needs the words")
        if [len(w) for w in words] != lengths:
            raise ValueError("words and tags must have the same sentence lengths")
        population = sorted(Counter(flat).items())
        labels, weights = [t for t, _ in population], [c for _, c in population]
        types = sorted({w for sent in words for w in sent})
        drawn = rng.choices(labels, weights=weights, k=len(types)) if labels else []
        mapping = dict(zip(types, drawn))
        flat = [mapping[w] for sent in words for w in sent]
    else:
        raise ValueError(f"per must be 'token' or 'type', got {per!r}")
    out, start = [], 0
    for n in lengths:
        out.append(flat[start:start + n])
        start += n
    return out


# --------------------------------------------------------------------------------------------
# batching


def batchify(token_ids: Tensor, batch_size: int) -> Tensor:
    """``(n_tokens,)`` -> ``(n_steps, batch_size)``: column b is the b-th contiguous slice of the
    stream, the remainder is dropped (pytorch/examples; thesis batch size 40)."""
    if token_ids.dim() != 1:
        raise ValueError(f"token_ids must be 1-D, got shape {tuple(token_ids.shape)}")
    n_steps = token_ids.numel() // batch_size
    if n_steps < 1:
        raise ValueError(f"{token_ids.numel()} tokens cannot fill one step of {batch_size} columns")
    return token_ids[: n_steps * batch_size].view(batch_size, n_steps).t().contiguous()


def get_batch(
    source: Tensor, i: int, bptt: int = 35, *, batch_first: bool = True
) -> tuple[Tensor, Tensor]:
    """Rows ``i .. i+seq`` of a batchified stream and the same rows shifted by one
    (thesis: sequence length 35). ``seq = min(bptt, n_steps - 1 - i)``.

    Returns ``(inputs, targets)``, each ``(batch, seq)`` by default -- the layout
    ``models.lstm`` expects -- or ``(seq, batch)`` with ``batch_first=False``. Unlike
    pytorch/examples the targets are not flattened; ``targets.reshape(-1)`` does that. On a tag
    stream the pair is (tags y_t, next tags y_{t+1}) for ``LSTMTagger.targets``.
    """
    seq = min(bptt, source.shape[0] - 1 - i)
    if seq < 1:
        raise IndexError(f"no batch at step {i} of a stream with {source.shape[0]} steps")
    data, target = source[i : i + seq], source[i + 1 : i + 1 + seq]
    if batch_first:
        return data.t().contiguous(), target.t().contiguous()
    return data, target
