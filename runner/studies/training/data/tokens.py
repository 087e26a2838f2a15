"""Corpora for the LSTM training studies of Saphra's thesis (Chapters 4 and 6): vocabulary,
preprocessing, splits and batching. Readers of text, CoNLL-U and hub corpora are in
:mod:`runner.data`, the tag sets (spaCy, topic, shuffled) in :mod:`runner.studies.training.data.tagsets`.

* Preprocessing (Ch. 4 Sec. 3, Ch. 6 Sec. 2): "a corpus of tokenized, lowercased English
  Wikipedia (70/10/20 train/dev/test split). To reduce the number of unique words (mostly names)
  in the corpus, we excluded any sentence with a word which appears fewer than 100 times. Those
  words which still appear fewer than 100 times after this filter are replaced with <UNK>."
  -> ``preprocess``, ``split_corpus``, ``build_vocabulary``.
* Batching (Ch. 6 Sec. 2): "The batch size is set to forty, the maximum sequence length to 35"
  -> ``batchify`` / ``get_batch`` as in pytorch/examples ``word_language_model``.

Only plain arguments come in; nothing here imports the rest of ``runner`` but its data sources.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from runner.data.forms import TaggedSentence

if TYPE_CHECKING:
    from torch import Tensor

T = TypeVar("T")

UNK = "<unk>"
EOS = "<eos>"

# --------------------------------------------------------------------------------------------
# vocabulary


@dataclass(frozen=True)
class Vocabulary:
    """Index <-> token maps with the training-set frequency of every entry.

    ``itos[i]`` is the token with id ``i``; ``stoi`` inverts it; ``counts[token]`` is its frequency
    in the sentences the vocabulary was built from (``counts[unk]`` sums the words folded into it;
    ``eos`` counts one per sentence). Tokens missing from ``stoi`` encode to ``unk`` (an error when
    ``unk`` is None, as for tag sets).
    """

    itos: tuple[str, ...]
    stoi: Mapping[str, int]
    counts: Mapping[str, int]
    unk: str | None = UNK
    eos: str | None = EOS

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: object) -> bool:
        return token in self.stoi

    @property
    def unk_id(self) -> int | None:
        return None if self.unk is None else self.stoi[self.unk]

    @property
    def eos_id(self) -> int | None:
        return None if self.eos is None else self.stoi[self.eos]

    def encode(self, tokens: Iterable[str]) -> list[int]:
        unk_id = self.unk_id
        ids = []
        for tok in tokens:
            i = self.stoi.get(tok, unk_id)
            if i is None:
                raise KeyError(f"{tok!r} is not in the vocabulary and it has no unk token")
            ids.append(i)
        return ids

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[int(i)] for i in ids]


def build_vocabulary(
    sentences: Iterable[Sequence[str]],
    min_count: int = 1,
    unk: str | None = UNK,
    *,
    eos: str | None = EOS,
    max_size: int | None = None,
) -> Vocabulary:
    """Vocabulary of the words seen at least ``min_count`` times; the rest fold into ``unk``.

    ``max_size`` caps the vocabulary (specials included) at the most frequent types, ties
    alphabetical; the others fold into ``unk`` too (thesis Ch. 4: "20K types").

    Order: ``unk``, ``eos`` (those not None), then words by decreasing count, ties alphabetical,
    so ids are deterministic. Build it from the *training* split (Ch. 6: words "appearing fewer
    than 100 times in the resulting training set are replaced"). For tag sets use
    ``min_count=1, unk=None`` and the same ``eos`` as the word vocabulary so that streams align.
    """
    if min_count < 1:
        raise ValueError(f"min_count must be >= 1, got {min_count}")
    if unk is None and min_count > 1:
        raise ValueError("min_count > 1 drops words, which needs an unk token")
    if max_size is not None and (unk is None or max_size < 3):
        raise ValueError("max_size needs an unk token and room for a word besides the specials")
    word_counts: Counter[str] = Counter()
    n_sentences = 0
    for sentence in sentences:
        word_counts.update(sentence)
        n_sentences += 1
    specials = [s for s in (unk, eos) if s is not None]
    if len(set(specials)) != len(specials):
        raise ValueError("unk and eos must differ")
    counts: dict[str, int] = {s: 0 for s in specials}
    kept = []
    for word, c in sorted(word_counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if word in counts:  # a special token written in the text, e.g. wikitext's "<unk>"
            counts[word] += c
        elif c >= min_count and (max_size is None or len(specials) + len(kept) < max_size):
            kept.append(word)
            counts[word] = c
        else:
            counts[unk] += c  # type: ignore[index]
    if eos is not None:
        counts[eos] += n_sentences
    itos = tuple(specials + kept)
    stoi = {w: i for i, w in enumerate(itos)}
    return Vocabulary(itos=itos, stoi=stoi, counts=counts, unk=unk, eos=eos)


def encode_corpus(sentences: Iterable[Sequence[str]], vocab: Vocabulary) -> Tensor:
    """One flat int64 stream, ``(n_tokens,)``: each sentence's ids then ``vocab.eos`` if any
    (pytorch/examples ``Corpus.tokenize``). Use it for words and tags alike."""
    import torch  # lazy: torch

    ids: list[int] = []
    eos_id = vocab.eos_id
    for sentence in sentences:
        ids.extend(vocab.encode(sentence))
        if eos_id is not None:
            ids.append(eos_id)
    return torch.tensor(ids, dtype=torch.long)


# --------------------------------------------------------------------------------------------
# preprocessing and splits


def _preprocess(
    sentences: Sequence[Sequence[str]],
    *,
    lowercase: bool,
    min_count: int | None,
    drop_rare_sentences: bool,
    drop_below: int | None,
    counts: Mapping[str, int] | None,
    unk: str,
) -> tuple[list[list[str]], list[int]]:
    sents = [[w.lower() for w in s] if lowercase else list(s) for s in sentences]
    kept = list(range(len(sents)))
    if drop_rare_sentences:
        threshold = drop_below if drop_below is not None else min_count
        if threshold is None:
            raise ValueError("drop_rare_sentences needs min_count or drop_below")
        before: Counter[str] = Counter(w for s in sents for w in s)
        kept = [i for i in kept if all(before[w] >= threshold for w in sents[i])]
        sents = [sents[i] for i in kept]
    if min_count is not None:
        after = counts if counts is not None else Counter(w for s in sents for w in s)
        sents = [[w if after.get(w, 0) >= min_count else unk for w in s] for s in sents]
    return sents, kept


def preprocess(
    sentences: Sequence[Sequence[str]],
    *,
    lowercase: bool = True,
    min_count: int | None = None,
    drop_rare_sentences: bool = False,
    drop_below: int | None = None,
    counts: Mapping[str, int] | None = None,
    unk: str = UNK,
) -> list[list[str]]:
    """The thesis' preprocessing, in its order (thesis setting: ``min_count=100,
    drop_rare_sentences=True``):

    1. ``lowercase`` every token;
    2. ``drop_rare_sentences``: drop every sentence containing a word seen fewer than
       ``drop_below`` (default ``min_count``) times in ``sentences``;
    3. ``min_count``: replace words seen fewer than ``min_count`` times *after* the filter by
       ``unk``. Counts come from the surviving sentences, or from ``counts`` when given -- pass
       the training split's lowercased counts (``Counter`` of its words) to replace by
       training-set frequency in dev and test, as the thesis does.

    ``min_count=None`` and ``drop_rare_sentences=False`` leave the words as they are.
    """
    return _preprocess(
        sentences, lowercase=lowercase, min_count=min_count,
        drop_rare_sentences=drop_rare_sentences, drop_below=drop_below, counts=counts, unk=unk,
    )[0]


def split_corpus(
    items: Sequence[T],
    fractions: Sequence[float] = (0.7, 0.1, 0.2),
    seed: int = 0,
    *,
    shuffle: bool = True,
) -> tuple[list[T], ...]:
    """Split ``items`` into ``len(fractions)`` parts (thesis: 70/10/20 train/dev/test).

    Deterministic: a ``random.Random(seed)`` permutation (or the original order with
    ``shuffle=False``), cut at ``round(n * cumulative fraction)``, so the parts partition the items
    exactly. Split sentences, not documents, when topic tags must see every document in training.
    """
    if not fractions or any(f < 0 for f in fractions) or abs(sum(fractions) - 1.0) > 1e-6:
        raise ValueError(f"fractions must be non-negative and sum to 1, got {tuple(fractions)}")
    order = list(range(len(items)))
    if shuffle:
        random.Random(seed).shuffle(order)
    n, parts, start, cum = len(items), [], 0, 0.0
    for k, f in enumerate(fractions):
        cum += f
        end = n if k == len(fractions) - 1 else round(n * cum)
        parts.append([items[i] for i in order[start:end]])
        start = end
    return tuple(parts)


# --------------------------------------------------------------------------------------------
# batching


def batchify(token_ids: Tensor, batch_size: int) -> Tensor:
    """``(n_tokens,)`` -> ``(n_steps, batch_size)``: column b is the b-th contiguous slice of the
    stream, the remainder is dropped (pytorch/examples; thesis batch size 40)."""
    if token_ids.dim() != 1:
        raise ValueError(f"token_ids must be 1-D, got shape {tuple(token_ids.shape)}")
    n_steps = token_ids.numel() // batch_size
    if n_steps < 1:
        raise ValueError(f"{token_ids.numel()} tokens cannot fill one step of {batch_size} columns")
    return token_ids[: n_steps * batch_size].view(batch_size, n_steps).t().contiguous()


def get_batch(
    source: Tensor, i: int, bptt: int = 35, *, batch_first: bool = True
) -> tuple[Tensor, Tensor]:
    """Rows ``i .. i+seq`` of a batchified stream and the same rows shifted by one
    (thesis: sequence length 35). ``seq = min(bptt, n_steps - 1 - i)``.

    Returns ``(inputs, targets)``, each ``(batch, seq)`` by default -- the layout
    ``models.lstm`` expects -- or ``(seq, batch)`` with ``batch_first=False``. Unlike
    pytorch/examples the targets are not flattened; ``targets.reshape(-1)`` does that. On a tag
    stream the pair is (tags y_t, next tags y_{t+1}) for ``LSTMTagger.targets``.
    """
    seq = min(bptt, source.shape[0] - 1 - i)
    if seq < 1:
        raise IndexError(f"no batch at step {i} of a stream with {source.shape[0]} steps")
    data, target = source[i : i + seq], source[i + 1 : i + 1 + seq]
    if batch_first:
        return data.t().contiguous(), target.t().contiguous()
    return data, target


def preprocess_tagged(
    sentences: Sequence[TaggedSentence],
    *,
    lowercase: bool = True,
    min_count: int | None = None,
    drop_rare_sentences: bool = False,
    drop_below: int | None = None,
    counts: Mapping[str, int] | None = None,
    unk: str = UNK,
) -> list[TaggedSentence]:
    """``preprocess`` on the words of tagged sentences; tags and doc ids follow their words."""
    words, kept = _preprocess(
        [s.words for s in sentences], lowercase=lowercase, min_count=min_count,
        drop_rare_sentences=drop_rare_sentences, drop_below=drop_below, counts=counts, unk=unk,
    )
    return [
        TaggedSentence(tuple(w), sentences[i].upos, sentences[i].xpos, sentences[i].doc_id)
        for w, i in zip(words, kept)
    ]
