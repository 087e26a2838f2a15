"""``builtin:pydoc-topics``: offline English prose, the standard library's ``pydoc_data.topics``.

One document per topic in sorted order, code blocks and heading underlines dropped, each paragraph
on one line (:func:`builtin_documents`). It follows the running Python version. Every study reads
this one text the same way.
"""

from __future__ import annotations

import platform
import re
from pathlib import Path

from pydoc_data.topics import topics

from models.source import Source
from runner.data.forms import Documents, TaggedSentence
from runner.data.registry import DOCUMENTS, TAGGED, DataSource, InputError, register_data_source
from runner.data.text import split_sentences

NAME = "pydoc-topics"
_UNDERLINE = re.compile(r"^[\s*=\-~^#+_`'\"]+$")


def builtin_documents(name: str = NAME) -> list[tuple[str, str]]:
    """The documents of the builtin corpus as ``(topic, text)`` pairs, in a fixed order."""
    if name != NAME:
        raise InputError(f"unknown builtin source 'builtin:{name}'; known: 'builtin:{NAME}'")
    return [(topic, _reflow(topics[topic])) for topic in sorted(topics)]


def _reflow(text: str) -> str:
    """English prose of a pydoc topic: one paragraph per line, code blocks and underlines dropped."""
    paragraphs = []
    for block in re.split(r"\n\s*\n", text):
        lines = [ln for ln in block.split("\n") if ln.strip()]
        if not lines or lines[0][:1].isspace():  # indented: code, grammar, quoted output
            continue
        words = [ln.strip() for ln in lines if not _UNDERLINE.match(ln)]
        if words:
            paragraphs.append(" ".join(words))
    return "\n".join(paragraphs)


class PydocTopics(DataSource):
    name = "Python's help topics"
    scheme = "builtin"
    written = f"'builtin:{NAME}'"
    gives = frozenset({DOCUMENTS, TAGGED})

    def matches(self, source: Source) -> bool:
        return source.scheme == self.scheme and source.name == NAME

    def identity(self, source: Source, base: Path, form: str = "", **options) -> str:
        return f"{source} python {platform.python_version()}"  # the text follows Python's version

    def annotations(self, source: Source) -> frozenset[str]:
        return frozenset()  # its sentences keep their topic, but help pages are not offered as articles

    def documents(self, source, base, **options) -> Documents:
        return Documents(str(source), ((f"{source}: topic {topic!r}", text) for topic, text in builtin_documents()))

    def tagged(self, source, base, **options) -> list[TaggedSentence]:
        return [TaggedSentence.untagged(words, topic) for topic, text in builtin_documents()
                for sentence in split_sentences(text) if (words := tuple(sentence.split()))]


register_data_source(PydocTopics())
