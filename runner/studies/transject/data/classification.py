"""Labelled texts for sequence classification (the TransJect study): tokenisation, vocabulary,
encoding, and the generated ListOps source.

Sources (``source`` in a spec's ``[data]`` table) are data sources giving the ``labelled`` form
(:mod:`runner.data.registry`): ``listops:`` (:class:`ListOpsSource`), ``hf:<dataset id>``
(:mod:`runner.data.hub`) and local ``.parquet``, ``.csv``, ``.jsonl`` or ``.json`` files
(:mod:`runner.data.files`).

Tokenisation: ``word`` (lowercased words and punctuation, ``\\w+|[^\\w\\s]``; ListOps: its
tokens), ``char`` (characters: CharIMDb of the Long Range Arena), or a hub tokenizer's
``tokenize`` (then its vocabulary is used). Otherwise the vocabulary is built on the training
split: ``<pad>`` (id 0), ``<unk>`` (id 1), then tokens by decreasing frequency (ties by the token),
at most ``vocab_size`` entries. Sequences are cut to ``max_length`` and padded with 0;
the attention mask is 1 on tokens.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from models.source import Source
from runner.data.forms import Labelled
from runner.data.registry import LABELLED, DataSource, InputError, data_source, read, register_data_source
from runner.studies.transject.data.listops import END, OPERATORS, VALUES, generate

if TYPE_CHECKING:
    from torch import Tensor

PAD, UNK = "<pad>", "<unk>"
_WORD = re.compile(r"\w+|[^\w\s]")
#: ListOps' classes: the values 0..9 of a tree.
LISTOPS_CLASSES = len(VALUES)
#: ListOps' vocabulary: <pad>, <unk>, four operators, "]" and the digits.
LISTOPS_VOCAB = 2 + len(OPERATORS) + 1 + len(VALUES)


@dataclass
class Split:
    tokens: list[list[str]]
    labels: list[int]


@dataclass
class Encoded:
    ids: Tensor  # (n, max_length) int64
    mask: Tensor  # (n, max_length) int64, 1 on tokens
    labels: Tensor  # (n,) int64


def tokenize(text: str, how: str | Callable[[str], list[str]] = "word", lowercase: bool = True) -> list[str]:
    """``word``: words and punctuation marks; ``char``: characters (spaces included); a callable:
    a tokenizer's own ``tokenize`` (a hub tokenizer, which does its own lowercasing)."""
    if callable(how):
        return list(how(text))
    text = text.lower() if lowercase else text
    if how == "char":
        return list(text)
    if how == "word":
        return _WORD.findall(text)
    raise ValueError(f"tokenize must be 'word' or 'char', not {how!r}")


def build_vocab(texts: Sequence[Sequence[str]], size: int) -> list[str]:
    """``<pad>``, ``<unk>``, then the most frequent tokens (ties by token), ``size`` entries at most."""
    counts = Counter(t for text in texts for t in text)
    ranked = sorted(counts, key=lambda t: (-counts[t], t))
    return [PAD, UNK] + [t for t in ranked if t not in (PAD, UNK)][: max(0, size - 2)]


def encode(texts: Sequence[Sequence[str]], labels: Sequence[int], vocab: Sequence[str], max_length: int,
           unk_token: str = UNK) -> Encoded:
    """Ids (unknown tokens: ``unk_token``, else ``<unk>``, else id 1), cut to ``max_length`` and
    padded with id 0; the mask is 1 on tokens."""
    import torch  # lazy: torch

    stoi = {t: i for i, t in enumerate(vocab)}
    unk = stoi.get(unk_token, stoi.get(UNK, 1))
    n = len(texts)
    ids = torch.zeros(n, max_length, dtype=torch.int64)
    mask = torch.zeros(n, max_length, dtype=torch.int64)
    for r, text in enumerate(texts):
        row = [stoi.get(t, unk) for t in text[:max_length]] or [unk]  # an empty text is one <unk>
        ids[r, : len(row)] = torch.tensor(row, dtype=torch.int64)
        mask[r, : len(row)] = 1
    return Encoded(ids, mask, torch.as_tensor(list(labels), dtype=torch.int64))


def tokenized(split: Labelled, how, lowercase: bool, pretokenized: bool = False) -> Split:
    """A split's texts as tokens: split at blanks for a pretokenized source (ListOps), else
    :func:`tokenize`."""
    if pretokenized:
        return Split([t.split() for t in split.texts], list(split.labels))
    return Split([tokenize(t, how, lowercase) for t in split.texts], list(split.labels))


def labelled_splits(source: str, base: Path = Path("."), *, splits: tuple[str, str] = ("train", "test"),
                    text: str = "text", label: str = "label", how: str | Callable[[str], list[str]] = "word",
                    lowercase: bool = True, test_fraction: float = 0.2, seed: int = 0, subset: str | None = None,
                    options: Mapping[str, Any] | None = None) -> tuple[Split, Split]:
    """The train and test split of any source giving labelled texts, tokenized (``options``: the
    source's own settings, e.g. ListOps' ``[data.listops]``)."""
    reader = data_source(source, LABELLED, "[data] source")
    got = read(reader, LABELLED, Source(source), base, splits=splits, text=text, label=label, subset=subset,
               test_fraction=test_fraction, seed=seed, options=options or {})
    train, test = (tokenized(s, how, lowercase, reader.pretokenized) for s in got)
    return train, test


class ListOpsSource(DataSource):
    """``listops:``: ListOps generated by the Long Range Arena's rules (:mod:`.listops`), seeded; the
    train and test sets are one draw of distinct trees split in two, as ``[data.listops]`` sets."""

    name = "ListOps"
    scheme = "listops"
    written = "'listops:' (the generator set in [data.listops])"
    gives = frozenset({LABELLED})
    pretokenized = True
    defaults = {"n_classes": LISTOPS_CLASSES, "vocab_size": LISTOPS_VOCAB, "pooling": "max",
                "tokens": (*OPERATORS, END, *map(str, VALUES))}

    def check(self, source: Source, base: Path, form: str, **options: Any) -> str | None:
        return "write 'listops:' and set the generator in [data.listops]" if source.name else None

    def identity(self, source: Source, base: Path, form: str = LABELLED, **options) -> str:
        return f"listops seed {options['seed']}"

    def labelled(self, source, base, *, splits, text, label, subset, test_fraction, seed,
                 options: Mapping[str, Any]) -> tuple[Labelled, Labelled]:
        generator = {k: v for k, v in options.items() if k not in ("train", "test")}
        try:
            examples = generate(options["train"] + options["test"], seed, **generator)
        except (RuntimeError, ValueError) as err:
            raise InputError(f"ListOps: {err}") from None
        as_split = lambda xs: Labelled([" ".join(e.tokens) for e in xs], [e.label for e in xs])  # noqa: E731
        return as_split(examples[:options["train"]]), as_split(examples[options["train"]:])


register_data_source(ListOpsSource())
