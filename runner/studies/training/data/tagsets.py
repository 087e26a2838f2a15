"""Tag sets of the training studies (Saphra's thesis, Ch. 4 Sec. 3.1).

Gold UD/PTB POS come with a CoNLL-U corpus (:func:`runner.data.files.read_conllu`). Silver UD
POS tags are added with spaCy (:func:`spacy_tags`); "global topic ... we classify each word of
sequence by its source Wikipedia article" (:func:`topic_tags`); "we also trained our taggers on
the same data with randomly shuffled labels, as in Zhang et al. (2016)" (:func:`shuffled_tags`).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from typing import Literal

from runner.data.forms import TaggedSentence

#: Universal Dependencies open-class UPOS tags; the closed classes are listed too, the rest is "other".
OPEN_CLASS = frozenset({"ADJ", "ADV", "INTJ", "NOUN", "PROPN", "VERB"})
CLOSED_CLASS = frozenset({"ADP", "AUX", "CCONJ", "DET", "NUM", "PART", "PRON", "SCONJ"})


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
        import spacy  # lazy: spacy
        from spacy.tokens import Doc  # lazy: spacy
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
