"""A data source added without touching the engine: ``folder:<dir>``, every ``.txt`` file of a folder
one document (its name the document id), for depth inputs and training corpora alike."""

from __future__ import annotations

import hashlib
from pathlib import Path

from models.source import Source
from runner.data.forms import Documents, TaggedSentence
from runner.data.registry import DOCUMENTS, TAGGED, DataSource, register_data_source
from runner.data.text import split_sentences


class Folder(DataSource):
    name = "folder of .txt files"
    scheme = "folder"
    written = "'folder:<dir>'"
    gives = frozenset({DOCUMENTS, TAGGED})

    def files(self, source: Source, base: Path) -> list[Path]:
        folder = source.path if source.path.is_absolute() else base / source.path
        return sorted(folder.glob("*.txt"))

    def check(self, source, base, form, **options):
        return None if self.files(source, base) else f"no .txt file in the folder {source.name!r}"

    def identity(self, source, base, form="", **options):
        h = hashlib.sha256()
        for f in self.files(source, base):
            h.update(f.name.encode() + b"\0" + f.read_bytes())
        return f"{source} sha256 {h.hexdigest()}"

    def annotations(self, source):
        return frozenset({"documents"})

    def documents(self, source, base, **options):
        return Documents(str(source), ((f"{f.name}", f.read_text(encoding="utf-8")) for f in self.files(source, base)))

    def tagged(self, source, base, **options):
        return [TaggedSentence.untagged(words, f.stem) for f in self.files(source, base)
                for sentence in split_sentences(f.read_text(encoding="utf-8")) if (words := tuple(sentence.split()))]


register_data_source(Folder())
