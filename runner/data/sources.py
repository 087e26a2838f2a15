"""Where text comes from, for every study: hub datasets, local files, the builtin corpus, CoNLL-U.

Source strings (``source = ...`` in a spec):

``"hf:<dataset id>"``
    A Hugging Face hub dataset (``subset``, ``split``, ``field`` name the part and the column).
    Streamed for depth inputs; read through the ``datasets`` cache for training corpora. With the
    hub switched off or out of reach (:func:`models.hub.hub_off`), only the local cache is used.
``"path:<file>"`` or a plain path
    A local ``.txt`` (one document per line), ``.jsonl`` / ``.json`` (records with ``field``) or
    ``.parquet`` file, read with the ``datasets`` packaged builders; ``.conllu`` treebanks for
    training corpora (words, UPOS, XPOS and ``# newdoc`` documents, read with ``conllu``).
    ``.csv`` / ``.tsv`` tables (a header row naming the fields; sentence pairs with a score, e.g.
    GLUE's STS-B ``sentence1``, ``sentence2``, ``score``: see ``draw_pairs`` in
    :mod:`runner.data.sentences`).
``"builtin:pydoc-topics"``
    Offline English prose: the standard library's ``pydoc_data.topics``, one document per topic in
    sorted order, code blocks and heading underlines dropped, each paragraph on one line
    (:func:`builtin_documents`). It follows the running Python version. Every study reads this
    one text the same way.

A relative path is looked up beside the spec first, then in the working directory
(:func:`anchor`), in every study.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models.source import Source

BUILTIN_SOURCES = ("pydoc-topics",)
LOCAL_EXTENSIONS = {".txt": "text", ".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv",
                    ".tsv": "csv"}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[A-Za-z0-9][\w.\-]*)?$")
_UNDERLINE = re.compile(r"^[\s*=\-~^#+_`'\"]+$")


class InputError(Exception):
    """The input source cannot give the requested samples; the message says why and what to do."""


def anchor(source: str, base: Path) -> Source:
    """A relative local path as seen from the spec's folder ``base`` when it exists there, else as
    typed (relative to the working directory); hub ids and builtins unchanged."""
    src = Source(source)
    local = Path(src.rest)
    if not src.local or local.is_absolute() or not (base / local).exists():
        return src
    return Source(("path:" if src.explicit_path else "") + str(base / local))


# --------------------------------------------------------------------------- builtin text


def builtin_documents(name: str) -> list[tuple[str, str]]:
    """The documents of a builtin corpus as ``(label, text)`` pairs, in a fixed order."""
    if name != "pydoc-topics":
        raise InputError(
            f"unknown builtin source 'builtin:{name}'; known: "
            + ", ".join(f"'builtin:{n}'" for n in BUILTIN_SOURCES)
        )
    from pydoc_data.topics import topics

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


# --------------------------------------------------------------------------- sources


# --------------------------------------------------------------------------- hub and local files


def _parse(source: str) -> Source:
    """The input source, checked: a hub dataset id, a known builtin text or a file name."""
    if not isinstance(source, str) or not source.strip():
        raise InputError(
            f"input source {source!r} is empty; give 'hf:<dataset id>', a local "
            "file path (.txt, .jsonl, .json, .parquet) or 'builtin:pydoc-topics'"
        )
    src = Source(source.strip())
    if src.scheme not in ("hf", "builtin", "path"):
        raise InputError(
            f"input source {src!r}: unknown scheme {src.scheme + ':'!r}; give 'hf:<dataset id>', "
            "'builtin:pydoc-topics' or a file path (write 'path:<file>' for a name with a colon)"
        )
    if src.on_hub and not _HUB_ID.match(src.name):
        raise InputError(
            f"input source {src!r}: {src.name!r} is not a Hugging Face dataset id; "
            "write it as 'hf:<owner>/<name>' (e.g. 'hf:wikimedia/wikipedia')"
        )
    if src.scheme == "builtin" and src.name not in BUILTIN_SOURCES:
        raise InputError(
            f"unknown builtin input source {src!r}; known: "
            + ", ".join(f"'builtin:{n}'" for n in BUILTIN_SOURCES)
        )
    if src.local and not src.name:
        raise InputError(f"input source {src!r} names no file")
    return src


def _check_local(src: Source, field: str) -> tuple[Path, str]:
    """Validate a local file source; return its path and ``datasets`` builder name."""
    path = Path(src.name).expanduser()
    if not path.exists():
        hint = ""
        if not src.explicit_path and _HUB_ID.match(src.name) and "/" in src.name:
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
        import pyarrow.parquet as pq

        try:
            names = pq.read_schema(path).names
        except Exception as exc:  # noqa: BLE001 - any unreadable file
            raise InputError(f"cannot read parquet file {str(path)!r}: {exc}") from exc
        _require_field(names, field, path)
    elif builder in ("json", "csv"):
        try:
            first = next(iter(_load_local(path, builder)), None)
        except Exception as exc:  # noqa: BLE001 - malformed JSON and the like
            raise InputError(f"cannot read {builder.upper()} file {str(path)!r}: {exc}") from exc
        if first is None:
            raise InputError(f"input file {str(path)!r} holds no records")
        _require_field(list(first), field, path)
    return path, builder


def _require_field(names: Iterable[str], field: str, where: Any) -> None:
    names = list(names)
    if field not in names:
        raise InputError(
            f"input {str(where)!r} has no field {field!r}; its fields are "
            f"{', '.join(map(repr, names)) or '(none)'}; set the input field to one of them"
        )


def check_source(
    source: str, *, subset: str | None = None, split: str = "train", field: str | Sequence[str] = "text"
) -> None:
    """Cheap validation before any compute; raises :class:`InputError`.

    Local files: exists, supported extension, and (``.jsonl``/``.json``/``.parquet``/``.csv``/
    ``.tsv``) has ``field`` (each of them, when several). Builtin corpora: the name is known.
    Hub ids: syntax only, no network call.
    """
    src = _parse(source)
    if src.local:
        for f in [field] if isinstance(field, str) else field:
            _check_local(src, f)


# --------------------------------------------------------------------------- loading


def _load_local(path: Path, builder: str):
    import datasets

    # .tsv: tab-separated, quotes are text (GLUE's STS-B files have unbalanced quotes)
    options = {"delimiter": "\t", "quoting": 3} if path.suffix.lower() == ".tsv" else {}
    return datasets.load_dataset(builder, data_files=str(path), split="train", streaming=True, **options)


def _document(row: dict, field: str, where: str) -> str | None:
    if field not in row:
        _require_field(row, field, where)
    value = row[field]
    if value is None or isinstance(value, str):
        return value
    raise InputError(f"input {where!r}: field {field!r} holds {type(value).__name__}, not text; choose a text field")


def _local_documents(path: Path, builder: str, column: str) -> Iterator[tuple[str, str | None]]:
    try:
        rows = iter(_load_local(path, builder))
        i = 0
        while True:
            try:
                row = next(rows)
            except StopIteration:
                return
            yield f"{path}: row {i}", _document(row, column, str(path))
            i += 1
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - malformed files surface as datasets/pyarrow errors
        raise InputError(f"cannot read input file {str(path)!r}: {type(exc).__name__}: {exc}") from exc


@contextlib.contextmanager
def _offline_from_env() -> Iterator[bool]:
    """With the hub switched off or out of reach (:func:`models.hub.hub_off`), make ``datasets``
    use its local cache only, now (it reads the switches once, at import)."""
    from models.hub import hub_off

    if not hub_off():
        yield False
        return
    import datasets.config
    import huggingface_hub.constants as hub_constants

    saved = (datasets.config.HF_HUB_OFFLINE, datasets.config.HF_DATASETS_OFFLINE, hub_constants.HF_HUB_OFFLINE)
    datasets.config.HF_HUB_OFFLINE = datasets.config.HF_DATASETS_OFFLINE = True
    hub_constants.HF_HUB_OFFLINE = True
    try:
        yield True
    finally:
        (datasets.config.HF_HUB_OFFLINE, datasets.config.HF_DATASETS_OFFLINE, hub_constants.HF_HUB_OFFLINE) = saved


offline_hub = _offline_from_env


def _hub_error(label: str, src: Source, subset, split, streaming, exc: BaseException, offline: bool) -> InputError:
    args = ", ".join(repr(a) for a in (src.name, subset) if a is not None)
    mode = " (offline mode is on: HF_HUB_OFFLINE / HF_DATASETS_OFFLINE)" if offline else ""
    return InputError(
        f"could not read hub dataset {label}{mode}: {type(exc).__name__}: {exc}. "
        "Check the dataset id, subset and split. If this machine has no network, save a part of "
        "the dataset to a file on a machine that has, e.g. datasets.Dataset.from_list(list("
        f"datasets.load_dataset({args}, split={split!r}, streaming=True).take(100_000)))"
        ".to_parquet('corpus.parquet'), copy it here and give its path as the input source"
        + (" (or use 'builtin:pydoc-topics' for a demo)." if streaming else
           ", or fill the datasets cache there and run with streaming=False.")
    )


# --------------------------------------------------------------------------- drawing


# --------------------------------------------------------------------------- training corpora


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


def read_text(path: str | Path) -> list[list[str]]:
    """One sentence per line, whitespace-separated tokens; blank lines are skipped."""
    with open(path, encoding="utf-8") as f:
        return [line.split() for line in f if line.strip()]


def parse_conllu(text: str) -> list[TaggedSentence]:
    """CoNLL-U text (https://universaldependencies.org/format.html), read with ``conllu``.

    FORM, UPOS and XPOS of the syntactic words are kept: multiword-token ranges (``1-2``) and empty
    nodes (``1.1``) are skipped, and an empty field stays ``_``. ``# newdoc`` / ``# newdoc id = X``
    starts a document (id ``X``, or its ordinal among the newdoc lines when no id is given) that
    the following sentences belong to until the next one.
    """
    import conllu

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
    import conllu

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
    if Source(source).on_hub:
        try:
            import datasets

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


def load_hf_text(
    dataset_id: str = "wikitext",
    subset: str | None = "wikitext-2-raw-v1",
    split: str = "train",
    field: str = "text",
) -> list[list[str]]:
    """Whitespace-tokenized non-empty records of a Hugging Face dataset, via ``datasets``.

    Wikitext records are lines of articles (paragraphs and `` = Heading = `` lines), not
    sentences; ``wikitext_articles`` groups them by article for topic tags. Needs network access
    or a populated Hugging Face cache.
    """
    try:
        import datasets
    except ImportError as e:  # pragma: no cover - a declared dependency
        raise RuntimeError("load_hf_text needs the 'datasets' package") from e
    try:
        ds = datasets.load_dataset(dataset_id, subset, split=split)
    except Exception as e:
        raise RuntimeError(
            f"could not load Hugging Face dataset {dataset_id!r} (subset {subset!r}, split "
            f"{split!r}): {type(e).__name__}: {e}. Downloading needs network access to the "
            "Hugging Face Hub; offline, the dataset must already be in the cache (HF_HOME / "
            "HF_DATASETS_CACHE, with HF_DATASETS_OFFLINE=1)."
        ) from e
    if field not in ds.column_names:
        raise KeyError(f"dataset {dataset_id!r} has no field {field!r}; fields: {ds.column_names}")
    return [tokens for text in ds[field] if (tokens := str(text).split())]


def load_hf_documents(dataset_id: str, subset: str | None, split: str, field: str,
                      doc_field: str) -> list[tuple[str, str]]:
    """``(document id, text)`` of a hub dataset with one document per record (e.g.
    ``wikimedia/wikipedia``: ``doc_field = "title"``, ``field = "text"``), via ``datasets``."""
    import datasets

    try:
        ds = datasets.load_dataset(dataset_id, subset, split=split)
    except Exception as e:
        raise RuntimeError(
            f"could not load Hugging Face dataset {dataset_id!r} (subset {subset!r}, split {split!r}): "
            f"{type(e).__name__}: {e}. Downloading needs network access to the Hugging Face Hub; offline, "
            "the dataset must already be in the cache (HF_HOME / HF_DATASETS_CACHE, with HF_DATASETS_OFFLINE=1)."
        ) from e
    missing = [c for c in (field, doc_field) if c not in ds.column_names]
    if missing:
        raise KeyError(f"dataset {dataset_id!r} has no fields {missing}; fields: {ds.column_names}")
    return [(str(d), str(t)) for d, t in zip(ds[doc_field], ds[field])]


def wikitext_articles(records: Sequence[Sequence[str]]) -> list[tuple[str, list[list[str]]]]:
    """Group tokenized wikitext records into ``(title, records)`` articles.

    A record ``= Title =`` (single equals signs) starts an article; section headings
    (``= = Section = =``) are dropped. Records before the first title are skipped.
    """
    articles: list[tuple[str, list[list[str]]]] = []
    for rec in records:
        if len(rec) >= 3 and rec[0] == "=" and rec[-1] == "=" and "=" not in rec[1:-1]:
            articles.append((" ".join(rec[1:-1]), []))
        elif rec and rec[0] == "=" and rec[-1] == "=":
            continue  # section heading
        elif articles:
            articles[-1][1].append(list(rec))
    return articles


# --------------------------------------------------------------------------- GMB-style tagged files

#: The coarse category of every fine semantic tag (SEM), the 13 categories and UNK of the universal
#: semantic tag set. Sources: Bjerva, Plank & Bos (2016), "Semantic Tagging with Deep Residual
#: Networks", COLING, Table 1 (the 66 tags of the silver GMB tags the thesis used, Ch. 4 Sec. 3.1:
#: "the 66 fine-grained SEM tag classes fall under 13 coarse-grained tags, and an 'unknown' tag"), and
#: the later Parallel Meaning Bank list (Abzianidze & Bos 2017, "Towards Universal Semantic
#: Tagging", IWCS, Table 1; https://pmb.let.rug.nl/semtags), whose renamed or added tags (EQU, XCL,
#: QUC, QUV, COL, DEG, GPO, GEO, CTC, LIT, NTH) are listed too. Where the two lists disagree
#: (UOM: ATT in 2016, NAM in 2017) the 2016 GMB assignment is kept.
SEM_CATEGORIES: dict[str, tuple[str, ...]] = {
    "ANA": ("PRO", "DEF", "HAS", "REF", "EMP"),                                       # anaphoric
    "ACT": ("GRE", "ITJ", "HES", "QUE"),                                              # speech act
    "ATT": ("QUA", "UOM", "IST", "REL", "RLI", "SST", "PRI", "INT", "SCO",
            "QUC", "QUV", "COL", "DEG"),                                              # attribute
    "COM": ("EQA", "EQU", "MOR", "LES", "TOP", "BOT", "ORD"),                         # comparative
    "DEM": ("PRX", "MED", "DST"),                                                     # demonstrative
    "DIS": ("SUB", "COO", "APP", "BUT"),                                              # discourse
    "ENT": ("CON", "ROL"),                                                            # entity
    "EVE": ("EXS", "ENS", "EPS", "EXG", "EXT"),                                       # event
    "LOG": ("ALT", "EXC", "XCL", "NIL", "DIS", "IMP", "AND"),                         # logical
    "MOD": ("NOT", "NEC", "POS"),                                                     # modality
    "NAM": ("GPE", "PER", "LOC", "ORG", "ART", "NAT", "HAP", "URL",
            "GPO", "GEO", "CTC", "LIT", "NTH"),                                       # named entity
    "TNS": ("NOW", "PST", "FUT", "PRG", "PFT"),                                       # tense and aspect
    "TIM": ("DAT", "DOM", "YOC", "DOW", "MOY", "DEC", "CLO"),                         # temporal
    "UNK": ("UNK",),                                                                  # unknown
}
SEM_COARSE: dict[str, str] = {fine: coarse for coarse, fines in SEM_CATEGORIES.items() for fine in fines}


def sem_coarse(tag: str) -> str:
    """The coarse category of a fine SEM tag (``PRX`` -> ``DEM``); raises ``ValueError`` for a tag
    outside :data:`SEM_CATEGORIES`."""
    try:
        return SEM_COARSE[tag]
    except KeyError:
        raise ValueError(f"unknown semantic tag {tag!r}; known: {sorted(SEM_COARSE)}") from None


@dataclass(frozen=True)
class GmbSentence:
    """A sentence of a GMB-style tagged file: words, PTB POS tags and fine SEM tags."""

    words: tuple[str, ...]
    pos: tuple[str, ...]
    sem: tuple[str, ...]

    def __post_init__(self) -> None:
        if not len(self.words) == len(self.pos) == len(self.sem):
            raise ValueError("words, pos and sem must have the same length")

    @property
    def sem_coarse(self) -> tuple[str, ...]:
        return tuple(sem_coarse(t) for t in self.sem)


def parse_gmb(text: str) -> list[GmbSentence]:
    """GMB-style tagged text: one token per line with the whitespace-separated columns word, PTB POS
    and fine SEM tag (the Groningen Meaning Bank's silver tags as Bjerva et al. 2016 distributed
    them); a blank line ends a sentence; lines starting with ``#`` are comments. Raises
    ``ValueError`` naming the line of a row without three columns or with an unknown SEM tag."""
    sentences: list[GmbSentence] = []
    rows: list[tuple[str, str, str]] = []
    for lineno, line in enumerate(text.splitlines() + [""], 1):
        if line.startswith("#"):
            continue
        cols = line.split()
        if not cols:
            if rows:
                sentences.append(GmbSentence(*(tuple(c) for c in zip(*rows))))
                rows = []
            continue
        if len(cols) != 3:
            raise ValueError(f"GMB line {lineno}: expected 3 columns (word, PTB POS, SEM tag), got {len(cols)}")
        if cols[2] not in SEM_COARSE:
            raise ValueError(f"GMB line {lineno}: unknown semantic tag {cols[2]!r}")
        rows.append((cols[0], cols[1], cols[2]))
    return sentences


def read_gmb(path: str | Path) -> list[GmbSentence]:
    """``parse_gmb`` on a UTF-8 file."""
    return parse_gmb(Path(path).read_text(encoding="utf-8"))
