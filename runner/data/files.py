"""``path:<file>`` or a plain path: a local file, read with the ``datasets`` packaged builders.

Documents and rows: ``.txt`` (one document per line), ``.jsonl`` / ``.json`` (records with
``field``), ``.parquet``, ``.csv`` / ``.tsv`` (a header row naming the fields; sentence pairs with a
score, e.g. GLUE's STS-B ``sentence1``, ``sentence2``, ``score``). Training corpora: ``.conllu``
treebanks (words, UPOS, XPOS and ``# newdoc`` documents, read with ``conllu``) or ``.txt`` (one
sentence per line). Labelled splits: ``.parquet``, ``.csv``, ``.jsonl``, ``.json``; ``{split}`` in
the path is replaced by the split's name, and a path without it is one file whose rows are split
into train and test by a seeded shuffle.

A relative path is looked up beside the spec first, then in the working directory (:func:`anchor`).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import conllu

from models.source import Source
from runner.data.forms import Documents, Labelled, TaggedSentence, numbered
from runner.data.hub import HUB_ID, labelled_rows
from runner.data.registry import DOCUMENTS, LABELLED, ROWS, TAGGED, DataSource, InputError, register_data_source
from runner.data.text import document_text, read_text, require_field

LOCAL_EXTENSIONS = {".txt": "text", ".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv",
                    ".tsv": "csv"}
CORPUS_EXTENSIONS = (".conllu", ".txt")
LABELLED_BUILDERS = {".parquet": "parquet", ".csv": "csv", ".jsonl": "json", ".json": "json"}


def anchor(source: str, base: Path) -> Source:
    """A relative local path as seen from the spec's folder ``base`` when it exists there, else as
    typed (relative to the working directory); hub ids and builtins unchanged."""
    src = Source(source)
    local = Path(src.rest)
    if not src.local or local.is_absolute() or not (base / local).exists():
        return src
    return Source(("path:" if src.explicit_path else "") + str(base / local))


def check_file(src: Source, field: str) -> tuple[Path, str]:
    """Validate a local file of documents or rows; return its path and ``datasets`` builder name."""
    path = Path(src.name).expanduser()
    if not path.exists():
        hint = ""
        if not src.explicit_path and HUB_ID.match(src.name) and "/" in src.name:
            hint = f"; for the Hugging Face dataset write 'hf:{src.name}'"
        raise InputError(f"input file not found: {str(path)!r} (source {src!r}){hint}")
    if not path.is_file():
        raise InputError(f"input source {str(path)!r} is not a file; give one .txt, .jsonl, .json or .parquet file")
    suffix = path.suffix.lower()
    if suffix not in LOCAL_EXTENSIONS:
        raise InputError(
            f"input file {str(path)!r} has unsupported extension {suffix or '(none)'!r}; "
            "supported: .txt (one document per line), .jsonl / .json (records with a "
            f"{field!r} field), .parquet, .csv, .tsv (a {field!r} column)"
        )
    builder = LOCAL_EXTENSIONS[suffix]
    if builder == "parquet":
        import pyarrow.parquet as pq  # lazy: pyarrow

        try:
            names = pq.read_schema(path).names
        except Exception as exc:  # noqa: BLE001 - any unreadable file
            raise InputError(f"cannot read parquet file {str(path)!r}: {exc}") from exc
        require_field(names, field, path)
    elif builder in ("json", "csv"):
        try:
            first = next(iter(load_file(path, builder)), None)
        except Exception as exc:  # noqa: BLE001 - malformed JSON and the like
            raise InputError(f"cannot read {builder.upper()} file {str(path)!r}: {exc}") from exc
        if first is None:
            raise InputError(f"input file {str(path)!r} holds no records")
        require_field(list(first), field, path)
    return path, builder


def load_file(path: Path, builder: str):
    """The records of a local file, streamed by a ``datasets`` packaged builder."""
    import datasets  # lazy: datasets

    # .tsv: tab-separated, quotes are text (GLUE's STS-B files have unbalanced quotes)
    options = {"delimiter": "\t", "quoting": 3} if path.suffix.lower() == ".tsv" else {}
    return datasets.load_dataset(builder, data_files=str(path), split="train", streaming=True, **options)


def _records(path: Path, builder: str) -> Iterator[tuple[int, dict]]:
    try:
        rows = iter(load_file(path, builder))
        i = 0
        while True:
            try:
                row = next(rows)
            except StopIteration:
                return
            yield i, row
            i += 1
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - malformed files surface as datasets/pyarrow errors
        raise InputError(f"cannot read input file {str(path)!r}: {type(exc).__name__}: {exc}") from exc


def parse_conllu(text: str) -> list[TaggedSentence]:
    """CoNLL-U text (https://universaldependencies.org/format.html), read with ``conllu``.

    FORM, UPOS and XPOS of the syntactic words are kept: multiword-token ranges (``1-2``) and empty
    nodes (``1.1``) are skipped, and an empty field stays ``_``. ``# newdoc`` / ``# newdoc id = X``
    starts a document (id ``X``, or its ordinal among the newdoc lines when no id is given) that
    the following sentences belong to until the next one.
    """
    for lineno, line in enumerate(text.splitlines(), 1):  # the library names no line; we do
        if line.strip() and not line.startswith("#") and len(line.split("\t")) != 10:
            raise ValueError(f"CoNLL-U line {lineno}: expected 10 tab-separated fields, got {len(line.split(chr(9)))}")
    sentences: list[TaggedSentence] = []
    doc_id: str | None = None
    n_docs = 0
    try:
        parsed = conllu.parse(text)
    except conllu.exceptions.ParseException as err:
        raise ValueError(f"CoNLL-U: {err}") from None  # e.g. an ID that is not a number
    for sentence in parsed:
        meta = sentence.metadata
        if "newdoc id" in meta or "newdoc" in meta:
            n_docs += 1
            doc_id = str(meta["newdoc id"]).strip() if meta.get("newdoc id") else str(n_docs - 1)
        words = [t for t in sentence if isinstance(t["id"], int)]
        if words:
            sentences.append(TaggedSentence(tuple(t["form"] for t in words), tuple(t["upos"] or "_" for t in words),
                                            tuple(t["xpos"] or "_" for t in words), doc_id))
    return sentences


def read_conllu(path: str | Path) -> list[TaggedSentence]:
    """``parse_conllu`` on a UTF-8 file."""
    return parse_conllu(Path(path).read_text(encoding="utf-8"))


def files_digest(paths: list[Path]) -> str:
    """16 hex digits of SHA-256 over the bytes of the files among ``paths`` that exist, in order."""
    h = hashlib.sha256()
    for p in paths:
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


def split_files(source: str, base: Path, splits: tuple[str, str]) -> list[Path]:
    """The file(s) a labelled source names (one per split with ``{split}``), relative to ``base`` first."""
    raw = Source(source).rest
    names = [raw.replace("{split}", s) for s in splits] if "{split}" in raw else [raw]
    out = []
    for name in names:
        p = Path(name).expanduser()
        if not p.is_absolute() and (base / p).exists():
            p = base / p
        out.append(p)
    return out


class LocalFile(DataSource):
    name = "local file"
    scheme = "path"
    written = "a file path (write 'path:<file>' for a name with a colon)"
    gives = frozenset({DOCUMENTS, ROWS, TAGGED, LABELLED})

    def check(self, source: Source, base: Path, form: str, **options: Any) -> str | None:
        if not source.name:
            return f"source {str(source)!r} names no file"
        if form == TAGGED:
            local = Path(anchor(source, base))
            if not local.is_file():
                return f"no such file {source}"
            if local.suffix not in CORPUS_EXTENSIONS:
                return f"local corpora are .conllu or .txt files, not {local.suffix!r}"
        elif form == LABELLED:
            for p in split_files(source, base, options["splits"]):
                if not p.is_file():
                    return f"no such file {str(p)!r}"
                if p.suffix.lower() not in LABELLED_BUILDERS:
                    return (f"local data are {', '.join(LABELLED_BUILDERS)} files, not "
                            f"{p.suffix or '(no extension)'!r}")
        else:
            for field in options.get("fields") or [options.get("field", "text")]:
                try:
                    check_file(anchor(source, base), field)
                except InputError as err:
                    return str(err)
        return None

    def identity(self, source: Source, base: Path, form: str = "", **options: Any) -> str:
        if form == LABELLED:  # every split's file, in the short form the TransJect study's keys have
            return f"local {files_digest(split_files(source, base, options['splits']))}"
        path = Path(anchor(source, base))
        return f"{path.resolve()} sha256 {hashlib.sha256(path.read_bytes()).hexdigest()}"

    def annotations(self, source: Source) -> frozenset[str]:
        return frozenset({"upos", "xpos", "documents"}) if source.name.endswith(".conllu") else frozenset()

    def documents(self, source, base, *, field="text", **options) -> Documents:
        path, builder = check_file(anchor(source, base), field)
        column = "text" if builder == "text" else field
        items = ((f"{path}: row {i}", document_text(row, column, str(path))) for i, row in _records(path, builder))
        return Documents(str(path), items)

    def rows(self, source, base, *, fields, **options) -> Documents:
        src = anchor(source, base)
        path, builder = check_file(src, fields[0])
        for f in fields[1:]:
            check_file(src, f)
        return Documents(str(path), ((f"{path}: row {i}", row) for i, row in _records(path, builder)))

    def tagged(self, source, base, **options) -> list[TaggedSentence]:
        path = Path(anchor(source, base))
        try:
            if path.suffix == ".conllu":
                return read_conllu(path)
            return [TaggedSentence.untagged(tuple(w)) for w in read_text(path)]
        except (OSError, ValueError) as err:
            raise InputError(str(err)) from None

    def labelled(self, source, base, *, splits, text, label, subset, test_fraction, seed,
                 options: Mapping[str, Any]) -> tuple[Labelled, Labelled]:
        import datasets  # lazy: datasets

        problem = self.check(Source(source), base, LABELLED, splits=splits)
        if problem:
            raise InputError(problem)
        read = []
        for p in split_files(source, base, splits):
            try:
                rows = datasets.load_dataset(LABELLED_BUILDERS[p.suffix.lower()], data_files=str(p), split="train")
            except Exception as exc:  # noqa: BLE001
                raise InputError(f"cannot read {str(p)!r}: {type(exc).__name__}: {exc}") from exc
            read.append(labelled_rows(rows, text, label, str(p)))
        if len(read) == 2:
            return numbered(read[0], read[1])
        whole = read[0]
        order = list(range(len(whole.labels)))
        random.Random(seed).shuffle(order)
        n_test = max(1, round(test_fraction * len(order)))
        pick = lambda idx: Labelled([whole.texts[i] for i in idx], [whole.labels[i] for i in idx])  # noqa: E731
        return numbered(pick(sorted(order[n_test:])), pick(sorted(order[:n_test])))


register_data_source(LocalFile())
