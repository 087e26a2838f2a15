"""Dependency-parsed sentences: the treebanks of the syntactic measures (word-level CD by tree
distance, Saphra 2021 Ch. 4 Sec. 6), from a local ``.conllu`` file or a hub dataset with Universal
Dependencies columns."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import conllu

from models.source import Source
from runner.data.files import anchor
from runner.data.hub import offline_hub
from runner.data.registry import InputError, data_source_for


@dataclass(frozen=True)
class ParsedSentence:
    """A dependency-parsed sentence: words, UPOS and each word's head (1-based, 0 = root)."""

    words: tuple[str, ...]
    upos: tuple[str, ...]
    heads: tuple[int, ...]

    def __post_init__(self) -> None:
        if not len(self.words) == len(self.upos) == len(self.heads):
            raise ValueError("words, upos and heads must have the same length")
        if any(not 0 <= h <= len(self.words) for h in self.heads):
            raise ValueError(f"a head outside 0..{len(self.words)}: {self.heads}")


def parse_conllu_trees(text: str) -> list[ParsedSentence]:
    """Dependency trees of CoNLL-U text (FORM, UPOS, HEAD of the syntactic words), read with
    ``conllu``; sentences whose heads are missing (``_``) are skipped."""
    try:
        parsed = conllu.parse(text)
    except conllu.exceptions.ParseException as err:
        raise ValueError(f"CoNLL-U: {err}") from None
    out = []
    for sentence in parsed:
        words = [t for t in sentence if isinstance(t["id"], int)]
        if words and all(isinstance(t["head"], int) for t in words):
            out.append(ParsedSentence(tuple(t["form"] for t in words), tuple(t["upos"] or "_" for t in words),
                                      tuple(t["head"] for t in words)))
    return out


def load_treebank(source: str, base: Path, subset: str | None = None, split: str = "test") -> list[ParsedSentence]:
    """Parsed sentences of a local ``.conllu`` file (relative to ``base``) or of a hub dataset with
    the Universal Dependencies columns ``tokens``, ``upos`` (names or class ids) and ``head``
    (``hf:<id>``, with ``subset`` and ``split``). Raises ``InputError`` with the reason."""
    reader = data_source_for(source)
    if reader is not None and reader.remote:
        import datasets  # lazy: datasets

        try:
            with offline_hub():
                ds = datasets.load_dataset(Source(source).hub_id, subset, split=split)
        except Exception as exc:  # noqa: BLE001 - not cached, no network, unknown id
            raise InputError(f"treebank {source!r} (subset {subset!r}, split {split!r}): {type(exc).__name__}: "
                             f"{exc}") from None
        missing = {"tokens", "upos", "head"} - set(ds.column_names)
        if missing:
            raise InputError(f"treebank {source!r} lacks the columns {sorted(missing)}; it has {ds.column_names}")
        names = getattr(getattr(ds.features["upos"], "feature", None), "names", None)
        out = []
        for row in ds:
            upos = [names[u] if names and isinstance(u, int) else str(u) for u in row["upos"]]
            try:
                heads = [int(h) for h in row["head"]]
            except (TypeError, ValueError):
                continue  # empty nodes ("None"/"_") in this sentence
            if len(heads) == len(row["tokens"]) == len(upos):
                out.append(ParsedSentence(tuple(row["tokens"]), tuple(upos), tuple(heads)))
        return out
    path = Path(anchor(source, base))
    if not path.is_file():
        raise InputError(f"treebank {source!r}: no such file {path}")
    return parse_conllu_trees(path.read_text(encoding="utf-8"))
