"""A small file of sentence pairs with scores 0-5 for offline tests of the STS-B path: consecutive
sentences of the builtin pydoc text with constructed scores (not linguistically meaningful)."""

from __future__ import annotations

import json
from pathlib import Path

from runner.studies.depth.samples import split_sentences
from runner.data.pydoc_text import builtin_documents


def write_pairs(path: Path, n: int = 120) -> Path:
    """``n`` records ``{"sentence1", "sentence2", "label"}`` (jsonl) or rows (.tsv); label = (7 i mod 11) / 2."""
    sentences = [s for _, doc in builtin_documents("pydoc-topics") for s in split_sentences(doc) if len(s.split()) >= 6]
    rows = [{"sentence1": sentences[2 * i], "sentence2": sentences[2 * i + 1], "label": (7 * i % 11) / 2}
            for i in range(n)]
    if path.suffix == ".tsv":
        path.write_text("sentence1\tsentence2\tlabel\n" + "".join(
            f"{r['sentence1']}\t{r['sentence2']}\t{r['label']}\n" for r in rows))
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path
