"""Plain-text helpers every study shares: sentence splitting and the text field of a record."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from runner.data.registry import InputError

# After ., ! or ? (optionally closed by a quote or bracket), at the following whitespace.
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"'\u201d\u2019)\]]))\s+")


def split_sentences(document: str) -> list[str]:
    """Split a document into stripped, non-empty sentences (line breaks, then ``[.!?] + space``).

    Deliberately simple and deterministic (it will, e.g., split after "e.g. ")."""
    sentences = []
    for line in document.splitlines():
        for piece in _SENTENCE_END.split(line):
            piece = piece.strip()
            if piece:
                sentences.append(piece)
    return sentences


def read_text(path: str | Path) -> list[list[str]]:
    """One sentence per line, whitespace-separated tokens; blank lines are skipped."""
    with open(path, encoding="utf-8") as f:
        return [line.split() for line in f if line.strip()]


def require_field(names: Iterable[str], field: str, where: Any) -> None:
    names = list(names)
    if field not in names:
        raise InputError(
            f"input {str(where)!r} has no field {field!r}; its fields are "
            f"{', '.join(map(repr, names)) or '(none)'}; set the input field to one of them"
        )


def document_text(row: dict, field: str, where: str) -> str | None:
    """The text ``field`` of a record; :class:`InputError` when it is missing or not text."""
    if field not in row:
        require_field(row, field, where)
    value = row[field]
    if value is None or isinstance(value, str):
        return value
    raise InputError(f"input {where!r}: field {field!r} holds {type(value).__name__}, not text; choose a text field")
