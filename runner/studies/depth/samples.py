"""Fixed-length token samples for depth-dynamics runs (Inoue et al. 2021: "1,000 32-token
sentences randomly sampled from English Wikipedia articles").

:func:`draw_samples` reproduces that recipe for any data source that gives documents
(:mod:`runner.data.registry`) and any tokenizer, deterministically under a seed.

1. Each document is split into sentences by :func:`runner.data.text.split_sentences`: first at
   line breaks, then after ``.``, ``!`` or ``?`` (optionally followed by a closing quote or
   bracket) followed by whitespace; each piece is stripped and empty pieces dropped. The splitter
   is deliberately simple and deterministic (it will, e.g., split after "e.g. ").
2. Every sentence is tokenized with ``tokenizer(text, truncation=True, max_length=tokens)``,
   special tokens included (ALBERT: ``[CLS] ... [SEP]``). Only sentences whose encoding has
   exactly ``tokens`` ids are kept; longer ones are truncated (the tokenizer keeps the final
   special token). No sample is padded and the attention mask is all ones: the paper's fixed
   ``N_w``-token inputs. ``Samples.texts`` holds the whole sentence that was tokenized.
3. The draw: sources read whole (local files, builtin corpora): all qualifying sentences of the whole source are
   collected in source order and ``random.Random(seed).sample(candidates, samples)`` picks them
   (several may come from one document; the whole source is read, so this is meant for corpora
   that fit in memory). Hub datasets: the dataset is shuffled with ``dataset.shuffle(seed=seed,
   buffer_size=shuffle_buffer)`` (streaming) or ``dataset.shuffle(seed=seed)`` and read in that
   order (a ``shuffled`` source); from each document at most one sentence is taken, chosen among its qualifying
   sentences with ``random.Random(seed)``, until ``samples`` are found. A streamed shuffle is
   reproducible for the same dataset revision, seed and buffer size.

``Samples.origins[i]`` tells where sample ``i`` came from, with 0-based indices:
``"<path>: row 12, sentence 3"`` (for ``.txt`` the row is the line number, empty lines
included), ``"builtin:pydoc-topics: topic 'assert', sentence 2"``, and
``"hf:<id>/<subset>[<split>]: shuffled row 17 (id=..., title=...), sentence 3"``; the sentence
index refers to ``split_sentences(document)``.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import torch

from models.source import Source
from runner.data.registry import DOCUMENTS, ROWS, InputError, data_source, read
from runner.data.text import document_text, require_field, split_sentences

__all__ = ["InputError", "Samples", "draw_pairs", "draw_samples", "split_sentences"]

_TOKENIZE_BATCH = 1024


@dataclass(frozen=True)
class Samples:
    """Fixed-length tokenized sentences, one row per sample."""

    texts: list[str]  # the sentence each sample was tokenized from (whole, before truncation)
    input_ids: torch.Tensor  # (samples, tokens) int64, no padding
    attention_mask: torch.Tensor  # (samples, tokens) int64, all ones
    origins: list[str]  # where each sample came from, see the module docstring
    scores: list[float] | None = None  # a sentence pair's annotated score (draw_pairs), else None

    def __len__(self) -> int:
        return len(self.texts)


def _tokenize(tokenizer, texts: list[str], tokens: int) -> list[list[int]]:
    enc = tokenizer(texts, truncation=True, max_length=tokens)
    return [list(ids) for ids in enc["input_ids"]]


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
    base: Path = Path("."),
) -> Samples:
    """Draw ``samples`` sentences of exactly ``tokens`` tokens from ``source`` (see the module docstring)."""
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 2:
        raise ValueError(f"tokens must be an integer >= 2 (room for the special tokens), got {tokens!r}")
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise ValueError(f"samples must be an integer >= 1, got {samples!r}")
    if isinstance(shuffle_buffer, bool) or not isinstance(shuffle_buffer, int) or shuffle_buffer < 1:
        raise ValueError(f"shuffle_buffer must be an integer >= 1, got {shuffle_buffer!r}")

    src = Source(source.strip()) if isinstance(source, str) else source
    reader = data_source(src, DOCUMENTS)
    docs = read(reader, DOCUMENTS, src, base, field=field, subset=subset, split=split, seed=seed, streaming=streaming,
                shuffle_buffer=shuffle_buffer)
    if docs.shuffled:
        return _draw_shuffled(docs, tokenizer, samples, tokens, seed)
    candidates = _candidates(docs, tokenizer, tokens)
    if len(candidates) < samples:
        raise _not_enough(repr(docs.label), len(candidates), samples, tokens)
    return _pack(random.Random(seed).sample(candidates, samples))


def _draw_shuffled(docs, tokenizer, samples: int, tokens: int, seed: int) -> Samples:
    """From documents in a shuffled order: one sentence of each until ``samples`` are found."""
    rng = random.Random(seed)
    chosen: list[tuple[str, list[int], str]] = []
    scanned = 0
    with closing(iter(docs)) as items:
        for origin, text in items:
            scanned += 1
            sentences = split_sentences(text or "")
            if not sentences:
                continue
            ids = _tokenize(tokenizer, sentences, tokens)
            good = [j for j, x in enumerate(ids) if len(x) == tokens]
            if not good:
                continue
            j = rng.choice(good)
            chosen.append((sentences[j], ids[j], f"{origin}, sentence {j}"))
            if len(chosen) == samples:
                break
    if len(chosen) < samples:
        raise _not_enough(docs.label, len(chosen), samples, tokens, what=f"documents (of {scanned}) with sentences")
    return _pack(chosen)


# --------------------------------------------------------------------------- sentence pairs


def _pair_rows(row: dict, fields: Sequence[str], score: str, where: str) -> tuple[str, str, float] | None:
    a, b = (document_text(row, f, where) for f in fields)
    if score not in row:
        require_field(row, score, where)
    value = row[score]
    if not a or not b or value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise InputError(f"input {where!r}: field {score!r} holds {value!r}, not a number") from None
    return (a, b, value) if value >= 0 else None  # GLUE's unlabelled test rows have label -1


def draw_pairs(
    source: str,
    *,
    tokenizer,
    samples: int,
    tokens: int,
    seed: int,
    fields: Sequence[str] = ("sentence1", "sentence2"),
    score: str = "label",
    subset: str | None = None,
    split: str = "train",
    streaming: bool = True,
    shuffle_buffer: int = 10_000,
    base: Path = Path("."),
) -> Samples:
    """Draw ``samples`` sentence pairs with a score (GLUE STS-B: 0-5), each encoded as the model's
    pair input (ALBERT: ``[CLS] a [SEP] b [SEP]``, the encoding GLUE tasks are fine-tuned on;
    Inoue et al. 2021: "two sentences separated by a special token [SEP]").

    Like :func:`draw_samples`, every sample has exactly ``tokens`` ids and no padding: a pair is
    encoded with ``tokenizer(a, b, truncation=True, max_length=tokens)`` (longest sentence trimmed
    first) and kept only when that fills ``tokens``; shorter pairs are skipped (so short pairs are
    under-represented at a large ``tokens``). Rows with a missing or negative score (GLUE's
    unlabelled test split) are skipped. Local files and the hub are drawn as in
    :func:`draw_samples` (all candidates then ``random.Random(seed).sample``; a shuffled hub
    dataset read in order). ``texts`` are ``"a [SEP] b"``; ``scores`` the annotated scores.
    """
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 3:
        raise ValueError(f"tokens must be an integer >= 3 (room for the special tokens), got {tokens!r}")
    if len(fields) != 2:
        raise ValueError(f"fields must name the two sentences of a pair, got {list(fields)!r}")
    src = Source(source.strip()) if isinstance(source, str) else source
    reader = data_source(src, ROWS)

    def encode(rows: list[tuple[tuple[str, str, float], str]]) -> list[tuple[str, list[int], str, float]]:
        if not rows:
            return []
        enc = tokenizer([r[0][0] for r in rows], [r[0][1] for r in rows], truncation=True, max_length=tokens)
        return [(f"{a} [SEP] {b}", list(ids), origin, s)
                for ((a, b, s), origin), ids in zip(rows, enc["input_ids"]) if len(ids) == tokens]

    rows = read(reader, ROWS, src, base, fields=(*fields, score), subset=subset, split=split, seed=seed,
                streaming=streaming, shuffle_buffer=shuffle_buffer)
    if rows.shuffled:
        chosen: list[tuple[str, list[int], str, float]] = []
        scanned = 0
        with closing(iter(rows)) as items:
            for origin, row in items:
                pair = _pair_rows(row, fields, score, rows.label)
                if pair is not None:
                    chosen += encode([(pair, origin)])
                scanned += 1
                if len(chosen) == samples:
                    break
        if len(chosen) < samples:
            raise _not_enough(rows.label, len(chosen), samples, tokens, what=f"pairs (of {scanned} rows)")
    else:
        pairs = [(pair, origin) for origin, row in rows if (pair := _pair_rows(row, fields, score, rows.label)) is not None]
        candidates = [c for i in range(0, len(pairs), _TOKENIZE_BATCH) for c in encode(pairs[i:i + _TOKENIZE_BATCH])]
        if len(candidates) < samples:
            raise _not_enough(repr(rows.label), len(candidates), samples, tokens, what="pairs")
        chosen = random.Random(seed).sample(candidates, samples)
    ids = torch.tensor([c[1] for c in chosen], dtype=torch.int64)
    return Samples([c[0] for c in chosen], ids, torch.ones_like(ids), [c[2] for c in chosen], [c[3] for c in chosen])
