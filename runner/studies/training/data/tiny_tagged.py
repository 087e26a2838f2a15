"""``builtin:tiny-tagged``: a small synthetic tagged corpus, generated, so that tiny training specs
need no file.

A toy grammar with determiners, adjectives, nouns, verbs, prepositions and punctuation, in four
documents (topics) that each draw their nouns from their own list, so that UPOS, XPOS and topic
tags are all learnable: 240 sentences, about 2,000 tokens. Deterministic (a fixed seed); change
:data:`VERSION` with the grammar, since it is part of the corpus' identity in task keys.
"""

from __future__ import annotations

import random
from pathlib import Path

from models.source import Source
from runner.data.forms import TaggedSentence
from runner.data.registry import TAGGED, DataSource, register_data_source

SOURCE = "builtin:tiny-tagged"
VERSION = 1
TOPICS = {
    "animals": ["cat", "dog", "bird", "fish", "horse", "mouse"],
    "food": ["bread", "apple", "soup", "cheese", "rice", "cake"],
    "city": ["street", "bus", "tower", "park", "bridge", "shop"],
    "music": ["song", "drum", "piano", "band", "choir", "tune"],
}
DET = [("the", "DT"), ("a", "DT"), ("this", "DT")]
ADJ = ["small", "red", "old", "quiet", "big", "new"]
VERB = [("sees", "VBZ"), ("likes", "VBZ"), ("finds", "VBZ"), ("saw", "VBD"), ("found", "VBD")]
ADP = ["near", "with", "under", "behind"]


def _sentence(rng: random.Random, nouns: list[str]) -> list[tuple[str, str, str]]:
    def noun_phrase() -> list[tuple[str, str, str]]:
        d = rng.choice(DET)
        out = [(d[0], "DET", d[1])]
        if rng.random() < 0.5:
            out.append((rng.choice(ADJ), "ADJ", "JJ"))
        n = rng.choice(nouns)
        plural = rng.random() < 0.2
        out.append((n + "s" if plural else n, "NOUN", "NNS" if plural else "NN"))
        return out

    v = rng.choice(VERB)
    words = noun_phrase() + [(v[0], "VERB", v[1])] + noun_phrase()
    if rng.random() < 0.4:
        words += [(rng.choice(ADP), "ADP", "IN")] + noun_phrase()
    return words + [(".", "PUNCT", ".")]


def sentences(n_per_topic: int = 60, seed: int = 0) -> list[TaggedSentence]:
    """The corpus: ``n_per_topic`` sentences per topic, topics in a fixed order."""
    rng = random.Random(seed)
    out = []
    for topic, nouns in TOPICS.items():
        for _ in range(n_per_topic):
            words, upos, xpos = zip(*_sentence(rng, nouns), strict=True)
            out.append(TaggedSentence(words, upos, xpos, topic))
    return out


def conllu(n_per_topic: int = 60, seed: int = 0) -> str:
    """The same corpus as CoNLL-U text (``# newdoc id`` per topic)."""
    lines, topic = [], None
    for sid, s in enumerate(sentences(n_per_topic, seed), 1):
        if s.doc_id != topic:
            topic = s.doc_id
            lines.append(f"# newdoc id = {topic}")
        lines.append(f"# sent_id = {sid}")
        lines += [f"{i}\t{w}\t{w}\t{u}\t{x}\t_\t0\t_\t_\t_" for i, (w, u, x) in enumerate(zip(s.words, s.upos, s.xpos), 1)]
        lines.append("")
    return "\n".join(lines) + "\n"


class TinyTagged(DataSource):
    """``builtin:tiny-tagged``: this generated corpus, with gold UPOS, XPOS and topics."""

    name = "tiny tagged corpus"
    scheme = "builtin"
    written = f"'{SOURCE}'"
    gives = frozenset({TAGGED})

    def matches(self, source: Source) -> bool:
        return source == SOURCE

    def identity(self, source: Source, base: Path, form: str = "", **options) -> str:
        return f"{source} v{VERSION}"  # generated: the generator's version is the identity

    def annotations(self, source: Source) -> frozenset[str]:
        return frozenset({"upos", "xpos", "documents"})

    def tagged(self, source, base, **options) -> list[TaggedSentence]:
        return sentences()


register_data_source(TinyTagged())
