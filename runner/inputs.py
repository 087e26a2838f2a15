"""Input sentences for depth-dynamics runs: fixed-length token batches drawn from a text corpus.

The paper feeds ALBERT "1,000 32-token sentences randomly sampled from English
Wikipedia articles".  :func:`draw_samples` reproduces that recipe for any corpus and
any tokenizer, deterministically under a seed.

Sources (the ``source`` string)
-------------------------------
``"hf:<dataset id>"``
    A Hugging Face hub dataset, e.g. ``"hf:wikimedia/wikipedia"`` with
    ``subset="20231101.en"``; loaded with
    ``datasets.load_dataset(id, subset, split=split, streaming=streaming)``.  Needs
    network (or, with ``streaming=False``, a copy already in the local ``datasets``
    cache).  The offline switches ``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE`` are read
    when the call is made, so a run with them set fails at once instead of retrying.
``"path:<file>"`` or a plain path
    A local file, read in file order with the ``datasets`` packaged builders:
    ``.txt`` (``"text"`` builder: one document per line, the column is always
    ``text`` and ``field`` is ignored), ``.jsonl`` / ``.json`` (``"json"`` builder,
    JSON lines or a top-level list of records; the document is column ``field``),
    ``.parquet`` (``"parquet"`` builder, column ``field``).
``"builtin:pydoc-topics"``
    Offline corpus for demos and tests: the English prose of the standard library's
    ``pydoc_data.topics.topics`` (one document per topic, topics in sorted order).
    Indented blocks (code, grammar) and heading underlines are dropped and each
    paragraph is re-flowed onto one line (see :func:`builtin_documents`).  Its text
    follows the running Python version, and so do the draws.

Sampling
--------
1. Each document is split into sentences by :func:`split_sentences`: first at line
   breaks, then after ``.``, ``!`` or ``?`` (optionally followed by a closing quote or
   bracket) followed by whitespace; each piece is stripped and empty pieces dropped.
   The splitter is deliberately simple and deterministic (it will, e.g., split after
   "e.g. ").
2. Every sentence is tokenized with ``tokenizer(text, truncation=True,
   max_length=tokens)``, special tokens included (ALBERT: ``[CLS] ... [SEP]``).  Only
   sentences whose encoding has exactly ``tokens`` ids are kept, i.e. sentences long
   enough to fill the window; longer ones are truncated (the tokenizer keeps the final
   special token).  No sample is ever padded and the attention mask is all ones: the
   paper's fixed ``N_w``-token inputs.  ``Samples.texts`` holds the whole sentence that
   was tokenized, not only the part that fits.
3. The draw:

   * local files and builtin corpora: all qualifying sentences of the whole source are
     collected (in source order) and ``random.Random(seed).sample(candidates,
     samples)`` picks them; the samples are in draw order.  Several samples may come
     from the same document.  The whole source is read and tokenized, so this is
     meant for corpora that fit comfortably in memory.
   * hub datasets: the dataset is shuffled with ``dataset.shuffle(seed=seed,
     buffer_size=shuffle_buffer)`` (streaming) or ``dataset.shuffle(seed=seed)``
     (``streaming=False``) and read in that order; from each document at most one
     sentence is taken, chosen among its qualifying sentences with
     ``random.Random(seed)``, until ``samples`` are found.  Samples therefore come from
     different articles.  A streamed shuffle is reproducible for the same dataset
     revision, seed and buffer size.

The same arguments (and the same source content and tokenizer) give the same samples.

Origins
-------
``Samples.origins[i]`` tells where sample ``i`` came from, with 0-based indices:
``"<path>: row 12, sentence 3"`` (for ``.txt`` the row is the line number, empty lines
included), ``"builtin:pydoc-topics: topic 'assert', sentence 2"``, and
``"hf:<id>/<subset>[<split>]: shuffled row 17 (id=..., title=...), sentence 3"``.  The
sentence index refers to ``split_sentences(document)``.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "BUILTIN_SOURCES",
    "InputError",
    "LOCAL_EXTENSIONS",
    "Samples",
    "builtin_documents",
    "check_source",
    "draw_samples",
    "split_sentences",
]

BUILTIN_SOURCES = ("pydoc-topics",)
LOCAL_EXTENSIONS = {".txt": "text", ".jsonl": "json", ".json": "json", ".parquet": "parquet"}

_TOKENIZE_BATCH = 1024
_TRUE = {"1", "ON", "YES", "TRUE"}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[A-Za-z0-9][\w.\-]*)?$")
# After ., ! or ? (optionally closed by a quote or bracket), at the following whitespace.
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"'\u201d\u2019)\]]))\s+")
_UNDERLINE = re.compile(r"^[\s*=\-~^#+_`'\"]+$")


class InputError(Exception):
    """The input source cannot give the requested samples; the message says why and what to do."""


@dataclass(frozen=True)
class Samples:
    """Fixed-length tokenized sentences, one row per sample."""

    texts: list[str]  # the sentence each sample was tokenized from (whole, before truncation)
    input_ids: torch.Tensor  # (samples, tokens) int64, no padding
    attention_mask: torch.Tensor  # (samples, tokens) int64, all ones
    origins: list[str]  # where each sample came from, see the module docstring

    def __len__(self) -> int:
        return len(self.texts)


# --------------------------------------------------------------------------- sentences


def split_sentences(document: str) -> list[str]:
    """Split a document into stripped, non-empty sentences (line breaks, then ``[.!?] + space``)."""
    sentences = []
    for line in document.splitlines():
        for piece in _SENTENCE_END.split(line):
            piece = piece.strip()
            if piece:
                sentences.append(piece)
    return sentences


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


@dataclass(frozen=True)
class _Source:
    kind: str  # "hf" | "path" | "builtin"
    name: str  # hub id, file path as given, or builtin name
    text: str  # the source string as given


def _parse(source: str) -> _Source:
    if not isinstance(source, str) or not source.strip():
        raise InputError(
            f"input source {source!r} is empty; give 'hf:<dataset id>', a local "
            "file path (.txt, .jsonl, .json, .parquet) or 'builtin:pydoc-topics'"
        )
    source = source.strip()
    if source.startswith("hf:"):
        name = source[3:].strip()
        if not _HUB_ID.match(name):
            raise InputError(
                f"input source {source!r}: {name!r} is not a Hugging Face dataset id; "
                "write it as 'hf:<owner>/<name>' (e.g. 'hf:wikimedia/wikipedia')"
            )
        return _Source("hf", name, source)
    if source.startswith("builtin:"):
        name = source[len("builtin:"):].strip()
        if name not in BUILTIN_SOURCES:
            raise InputError(
                f"unknown builtin input source {source!r}; known: "
                + ", ".join(f"'builtin:{n}'" for n in BUILTIN_SOURCES)
            )
        return _Source("builtin", name, source)
    name = source[len("path:"):].strip() if source.startswith("path:") else source
    if not name:
        raise InputError(f"input source {source!r} names no file")
    return _Source("path", name, source)


def _check_local(src: _Source, field: str) -> tuple[Path, str]:
    """Validate a local file source; return its path and ``datasets`` builder name."""
    path = Path(src.name).expanduser()
    if not path.exists():
        hint = ""
        if not src.text.startswith("path:") and _HUB_ID.match(src.name) and "/" in src.name:
            hint = f"; for the Hugging Face dataset write 'hf:{src.name}'"
        raise InputError(f"input file not found: {str(path)!r} (source {src.text!r}){hint}")
    if not path.is_file():
        raise InputError(f"input source {str(path)!r} is not a file; give one .txt, .jsonl, .json or .parquet file")
    suffix = path.suffix.lower()
    if suffix not in LOCAL_EXTENSIONS:
        raise InputError(
            f"input file {str(path)!r} has unsupported extension {suffix or '(none)'!r}; "
            "supported: .txt (one document per line), .jsonl / .json (records with a "
            f"{field!r} field), .parquet (a {field!r} column)"
        )
    builder = LOCAL_EXTENSIONS[suffix]
    if builder == "parquet":
        import pyarrow.parquet as pq

        try:
            names = pq.read_schema(path).names
        except Exception as exc:  # noqa: BLE001 - any unreadable file
            raise InputError(f"cannot read parquet file {str(path)!r}: {exc}") from exc
        _require_field(names, field, path)
    elif builder == "json":
        try:
            first = next(iter(_load_local(path, builder)), None)
        except Exception as exc:  # noqa: BLE001 - malformed JSON and the like
            raise InputError(f"cannot read JSON file {str(path)!r}: {exc}") from exc
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
    source: str, *, subset: str | None = None, split: str = "train", field: str = "text"
) -> None:
    """Cheap validation before any compute; raises :class:`InputError`.

    Local files: exists, supported extension, and (``.jsonl``/``.json``/``.parquet``)
    has ``field``.  Builtin corpora: the name is known.  Hub ids: syntax only, no
    network call.
    """
    src = _parse(source)
    if src.kind == "path":
        _check_local(src, field)


# --------------------------------------------------------------------------- loading


def _load_local(path: Path, builder: str):
    import datasets

    return datasets.load_dataset(builder, data_files=str(path), split="train", streaming=True)


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


def _hub_error(label: str, src: _Source, subset, split, streaming, exc: BaseException, offline: bool) -> InputError:
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


def _tokenize(tokenizer, texts: list[str], tokens: int) -> list[list[int]]:
    enc = tokenizer(texts, truncation=True, max_length=tokens)
    return [list(ids) for ids in enc["input_ids"]]


def _document(row: dict, field: str, where: str) -> str | None:
    if field not in row:
        _require_field(row, field, where)
    value = row[field]
    if value is None or isinstance(value, str):
        return value
    raise InputError(f"input {where!r}: field {field!r} holds {type(value).__name__}, not text; choose a text field")


def _candidates(
    documents: Iterable[tuple[str, str | None]], tokenizer, tokens: int
) -> list[tuple[str, list[int], str]]:
    """All qualifying ``(sentence, ids, origin)`` of ``(origin prefix, document)`` pairs, in order."""
    found: list[tuple[str, list[int], str]] = []
    pending: list[tuple[str, str]] = []

    def flush():
        if pending:
            ids = _tokenize(tokenizer, [t for t, _ in pending], tokens)
            found.extend((t, i, o) for (t, o), i in zip(pending, ids) if len(i) == tokens)
            pending.clear()

    for prefix, doc in documents:
        for j, sentence in enumerate(split_sentences(doc or "")):
            pending.append((sentence, f"{prefix}, sentence {j}"))
            if len(pending) >= _TOKENIZE_BATCH:
                flush()
    flush()
    return found


def _not_enough(label: str, found: int, samples: int, tokens: int, what: str = "sentences") -> InputError:
    return InputError(
        f"input {label} has only {found} {what} that fill {tokens} tokens, but {samples} samples "
        f"were requested; ask for fewer samples or fewer tokens, or use a larger corpus"
    )


def _pack(chosen: list[tuple[str, list[int], str]]) -> Samples:
    ids = torch.tensor([c[1] for c in chosen], dtype=torch.int64)
    return Samples(
        texts=[c[0] for c in chosen],
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        origins=[c[2] for c in chosen],
    )


def draw_samples(
    source: str,
    *,
    tokenizer,
    samples: int,
    tokens: int,
    seed: int,
    subset: str | None = None,
    split: str = "train",
    field: str = "text",
    streaming: bool = True,
    shuffle_buffer: int = 10_000,
) -> Samples:
    """Draw ``samples`` sentences of exactly ``tokens`` tokens from ``source`` (see the module docstring)."""
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 2:
        raise ValueError(f"tokens must be an integer >= 2 (room for the special tokens), got {tokens!r}")
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise ValueError(f"samples must be an integer >= 1, got {samples!r}")
    if isinstance(shuffle_buffer, bool) or not isinstance(shuffle_buffer, int) or shuffle_buffer < 1:
        raise ValueError(f"shuffle_buffer must be an integer >= 1, got {shuffle_buffer!r}")

    src = _parse(source)
    if src.kind == "hf":
        return _draw_hub(src, tokenizer, samples, tokens, seed, subset, split, field, streaming, shuffle_buffer)

    if src.kind == "builtin":
        docs = ((f"{src.text}: topic {label!r}", text) for label, text in builtin_documents(src.name))
        label = src.text
    else:
        path, builder = _check_local(src, field)
        column = "text" if builder == "text" else field
        label = str(path)
        docs = _local_documents(path, builder, column)
    candidates = _candidates(docs, tokenizer, tokens)
    if len(candidates) < samples:
        raise _not_enough(repr(label), len(candidates), samples, tokens)
    return _pack(random.Random(seed).sample(candidates, samples))


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


def _draw_hub(src, tokenizer, samples, tokens, seed, subset, split, field, streaming, shuffle_buffer) -> Samples:
    label = f"hf:{src.name}" + (f"/{subset}" if subset else "") + f"[{split}]"
    rng = random.Random(seed)
    chosen: list[tuple[str, list[int], str]] = []
    scanned = 0
    with _offline_from_env() as offline:
        try:
            import datasets

            ds = datasets.load_dataset(src.name, subset, split=split, streaming=streaming)
            if isinstance(ds, datasets.IterableDataset):
                ds = ds.shuffle(seed=seed, buffer_size=shuffle_buffer)
            else:
                ds = ds.shuffle(seed=seed)
            rows = iter(ds)
        except Exception as exc:  # noqa: BLE001 - network, auth, unknown id, offline ...
            raise _hub_error(label, src, subset, split, streaming, exc, offline) from exc
        while len(chosen) < samples:
            try:
                row = next(rows)
            except StopIteration:
                break
            except Exception as exc:  # noqa: BLE001 - streaming errors surface while iterating
                raise _hub_error(label, src, subset, split, streaming, exc, offline) from exc
            i = scanned
            scanned += 1
            sentences = split_sentences(_document(row, field, label) or "")
            if not sentences:
                continue
            ids = _tokenize(tokenizer, sentences, tokens)
            good = [j for j, x in enumerate(ids) if len(x) == tokens]
            if not good:
                continue
            j = rng.choice(good)
            tags = ", ".join(f"{k}={row[k]!r}" for k in ("id", "title") if k in row and k != field)
            origin = f"{label}: shuffled row {i}" + (f" ({tags})" if tags else "") + f", sentence {j}"
            chosen.append((sentences[j], ids[j], origin))
    if len(chosen) < samples:
        raise _not_enough(label, len(chosen), samples, tokens, what=f"documents (of {scanned}) with sentences")
    return _pack(chosen)
