"""Sources and tags for the LSTM training studies (Saphra's thesis, Ch. 4 Sec. 3.1).

* Gold PTB/UD POS from a treebank -> ``read_conllu`` (UPOS and XPOS columns); plain text ->
  ``read_text``; hub corpora -> ``load_hf_text`` (WikiText articles -> ``wikitext_articles``).
* Silver UD POS tags added with spaCy -> ``spacy_tags``; "Global topic ... we classify each word of
  sequence by its source Wikipedia article" -> ``topic_tags``; "we also trained our taggers on the
  same data with randomly shuffled labels, as in Zhang et al. (2016)" -> ``shuffled_tags``.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal



from runner.training.corpus import UNK, _preprocess

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
