"""Regenerate ``tiny_tagged.conllu``: a small synthetic CoNLL-U corpus for the training tests.

A toy grammar with determiners, adjectives, nouns, verbs, prepositions and punctuation, in four
"documents" (topics) that each draw their nouns from their own list, so that UPOS, XPOS and
topic tags are all learnable. Deterministic: ``python tests/data/make_tiny_conllu.py``.
"""

from __future__ import annotations

import random
from pathlib import Path

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


def sentence(rng: random.Random, nouns: list[str]) -> list[tuple[str, str, str]]:
    def np_() -> list[tuple[str, str, str]]:
        d = rng.choice(DET)
        out = [(d[0], "DET", d[1])]
        if rng.random() < 0.5:
            out.append((rng.choice(ADJ), "ADJ", "JJ"))
        n = rng.choice(nouns)
        plural = rng.random() < 0.2
        out.append((n + "s" if plural else n, "NOUN", "NNS" if plural else "NN"))
        return out

    v = rng.choice(VERB)
    words = np_() + [(v[0], "VERB", v[1])] + np_()
    if rng.random() < 0.4:
        words += [(rng.choice(ADP), "ADP", "IN")] + np_()
    return words + [(".", "PUNCT", ".")]


def main(n_per_topic: int = 60, seed: int = 0) -> str:
    rng = random.Random(seed)
    lines, sid = [], 0
    for topic, nouns in TOPICS.items():
        lines.append(f"# newdoc id = {topic}")
        for _ in range(n_per_topic):
            sid += 1
            lines.append(f"# sent_id = {sid}")
            for i, (w, upos, xpos) in enumerate(sentence(rng, nouns), 1):
                lines.append(f"{i}\t{w}\t{w}\t{upos}\t{xpos}\t_\t0\t_\t_\t_")
            lines.append("")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    Path(__file__).with_name("tiny_tagged.conllu").write_text(main(), encoding="utf-8")
