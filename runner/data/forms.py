"""The records data sources give, one type per form (:mod:`runner.data.registry`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Documents:
    """The ``documents`` (or ``rows``) of a source: ``(origin, item)`` pairs in reading order, where
    the item is a text (``documents``) or a record (``rows``)."""

    label: str
    """The source as messages name it (a path, ``hf:<id>/<subset>[<split>]``)."""
    items: Iterable[tuple[str, object]]
    shuffled: bool = False
    """Read in a seeded shuffled order (take at most one sentence per document)."""

    def __iter__(self) -> Iterator[tuple[str, object]]:
        return iter(self.items)


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

    @classmethod
    def untagged(cls, words: tuple[str, ...], doc_id: str | None = None) -> TaggedSentence:
        """Words without tags (``_`` for each)."""
        return cls(words, ("_",) * len(words), ("_",) * len(words), doc_id)


@dataclass
class Labelled:
    """One split of labelled texts: ``texts[i]`` has the class ``labels[i]``."""

    texts: list[str]
    labels: list


def numbered(train: Labelled, test: Labelled) -> tuple[Labelled, Labelled]:
    """Integer labels as they are; other labels numbered in the sorted order of both splits' values."""
    values = train.labels + test.labels
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return train, test
    names = sorted({str(v) for v in values})
    number = lambda s: Labelled(s.texts, [names.index(str(v)) for v in s.labels])  # noqa: E731
    return number(train), number(test)
