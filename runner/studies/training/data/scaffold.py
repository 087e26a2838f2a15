"""Seeded synthetic scaffold corpora (Saphra 2021, Ch. 5 paper "LSTMs compose and learn bottom-up",
Sec. 4.2-4.3, Fig. 6).

Sec. 4.2: "we generate data uniformly at random from a vocabulary Sigma. We insert n instances of
the long-distance rule alpha Sigma^k omega, with scaffold Sigma^k of length k, open symbol alpha,
and close symbol omega, with alpha, omega not in Sigma [...] We use a corpus of 1m tokens with
|Sigma| = 1k types". Sec. 4.3: "The scaffolds are sampled from a randomly generated vocabulary of
100 phrases of length k, so each unique scaffold q appears in the training set 10 times in the
context alpha q omega. [...] In the familiar-scaffold setting, we randomly distribute 1000
occurrences of each scaffold throughout the corpus outside of the rule patterns. [...] In the
original unfamiliar-scaffold setting, q appears only as a scaffold". Test sets: "in-domain [...]
uses the same set of scaffolds as the train set"; out-domain: "the test set scaffolds are sampled
uniformly at random" (Fig. 6c).

Every number is a parameter of :class:`ScaffoldConfig` with the paper's value as default. Choices
the paper leaves open, made here:

* The stream has exactly ``tokens`` tokens: the background is ``tokens`` minus the inserted
  tokens, and segments (rules, familiar scaffolds) go at distinct positions of the background, so
  two segments are always separated by at least one background token.
* "q appears only as a scaffold" is made exact: after insertion, any k-gram of the stream equal to
  a scaffold that was not placed there (by chance, or across a segment boundary) has one of its
  background tokens redrawn until none is left. So in the unfamiliar setting every scaffold
  occurs exactly ``n / phrases`` times, all inside rules, and in the familiar setting exactly
  ``familiar_repeats`` more times, all outside.
* The familiar and unfamiliar corpora of one k share the phrase set Q_k and the test sets, so the
  in-domain test is the same for both models.
* A test case is ``context`` random tokens, then alpha q omega; the context gives the network a
  few steps from its zero initial state. Out-domain scaffolds are drawn uniformly from Sigma^k,
  none equal to a phrase of Q_k.
* The validation stream is made by the same rules with ``valid_tokens`` tokens and n and the
  familiar repeats scaled by ``valid_tokens / tokens`` (at least one rule per phrase).

Token ids: 0 = alpha, 1 = omega, 2 .. |Sigma| + 1 = Sigma.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from models.source import Source
from runner.data.registry import DataSource, data_source_for, register_data_source

ALPHA, OMEGA = 0, 1
ALPHA_TOKEN, OMEGA_TOKEN = "<alpha>", "<omega>"
SETTINGS = ("unfamiliar", "familiar")
#: Bump when the generator changes what it draws (planned corpora are cached under it).
VERSION = 1
#: Rounds of redrawing without fewer stray occurrences after which the generator gives up.
STALLED_ROUNDS = 100
#: The form a scaffold source gives: the generated corpora, one per setting and scaffold length.
FORM = "scaffold corpora"
PAPER = "Saphra 2021, Ch. 5 (Saphra & Lopez 2020, LSTMs compose and learn bottom-up), Sec. 4.2-4.3"


@dataclass(frozen=True)
class ScaffoldConfig:
    """The corpus of Sec. 4; defaults are the paper's values."""

    vocab_size: int = 1000
    """|Sigma| (Sec. 4.2: 1k types)."""
    tokens: int = 1_000_000
    """Training stream length (Sec. 4.2: 1m tokens)."""
    rules: int = 1000
    """n, insertions of alpha q omega (Sec. 4.3: 1000 occurrences of the rule)."""
    phrases: int = 100
    """|Q_k|, scaffold phrases of length k (Sec. 4.3: 100)."""
    familiar_repeats: int = 1000
    """Occurrences of each scaffold outside the rule in the familiar setting (Sec. 4.3: 1000)."""
    valid_tokens: int = 100_000
    """Validation stream length (not in the paper)."""
    test_cases: int = 1000
    """Rule instances in each test set (not in the paper)."""
    context: int = 4
    """Random tokens before alpha in a test case (not in the paper)."""

    def __post_init__(self) -> None:
        if min(self.vocab_size, self.tokens, self.rules, self.phrases, self.test_cases) < 1:
            raise ValueError("vocab_size, tokens, rules, phrases and test_cases must be positive")
        if self.familiar_repeats < 0 or self.context < 0 or self.valid_tokens < 1:
            raise ValueError("familiar_repeats and context must be >= 0, valid_tokens >= 1")


@dataclass(frozen=True)
class ScaffoldStream:
    """One generated stream and where its segments were placed."""

    tokens: np.ndarray
    """int64 ids (0 alpha, 1 omega, 2.. Sigma)."""
    rule_starts: np.ndarray
    """Position of alpha of each rule."""
    rule_phrases: np.ndarray
    """Index into the phrase set of each rule's scaffold."""
    free_starts: np.ndarray
    """Position of each scaffold placed outside a rule (familiar setting; empty otherwise)."""
    free_phrases: np.ndarray


@dataclass(frozen=True)
class ScaffoldTests:
    """Test cases ``context`` tokens + alpha + scaffold + omega, shape (cases, context + k + 2)."""

    inputs: np.ndarray
    alpha: int
    """Position of alpha in every case."""
    k: int

    @property
    def scaffold(self) -> slice:
        return slice(self.alpha + 1, self.alpha + 1 + self.k)

    @property
    def omega(self) -> int:
        return self.alpha + self.k + 1


@dataclass(frozen=True)
class ScaffoldCorpus:
    """The familiar and unfamiliar corpora of one scaffold length k, with their shared tests."""

    k: int
    phrases: np.ndarray
    """(phrases, k) Sigma ids of Q_k."""
    train: dict[str, ScaffoldStream] = field(default_factory=dict)
    valid: dict[str, ScaffoldStream] = field(default_factory=dict)
    tests: dict[str, ScaffoldTests] = field(default_factory=dict)
    """``in_domain`` and ``out_domain``."""


def scaffold_count(vocab_size: int, k: int, limit: int) -> int:
    """|Sigma|^k, the distinct scaffolds of length k, or ``limit`` when there are more (k may be large)."""
    n = 1
    for _ in range(k):
        n *= vocab_size
        if n >= limit:
            return limit
    return n


def fill_problem(tokens: int, rules: int, phrases: int, repeats: int, k: int) -> str | None:
    """Why a stream of ``tokens`` cannot hold ``rules`` alpha q omega and ``repeats`` free copies of each
    of ``phrases`` scaffolds, each segment between background tokens; None when it can."""
    segments = rules + phrases * repeats
    inserted = rules * (k + 2) + phrases * repeats * k
    if tokens - inserted < segments + 1:
        return (f"{tokens} tokens cannot hold {segments} segments of length {k} ({inserted} tokens) separated by "
                "background tokens")
    return None


def valid_counts(cfg: ScaffoldConfig, repeats: int) -> tuple[int, int]:
    """Rules and free repeats of the validation stream: the training stream's, scaled by
    ``valid_tokens / tokens`` (at least one rule per phrase)."""
    scale = cfg.valid_tokens / cfg.tokens
    return max(cfg.phrases, round(cfg.rules * scale)), round(repeats * scale)


def vocabulary(vocab_size: int) -> list[str]:
    """Token strings by id: alpha, omega, then ``w0 .. w{|Sigma|-1}``."""
    return [ALPHA_TOKEN, OMEGA_TOKEN] + [f"w{i}" for i in range(vocab_size)]


def _phrases(rng: np.random.Generator, n: int, k: int, vocab_size: int) -> np.ndarray:
    if scaffold_count(vocab_size, k, n + 1) <= n:  # the out-domain tests need a scaffold that is no phrase
        raise ValueError(f"cannot draw {n} distinct phrases of length {k} from {vocab_size} types and leave one "
                         "for the out-domain test")
    out: list[tuple[int, ...]] = []
    seen: set[tuple[int, ...]] = set()
    while len(out) < n:
        q = tuple(int(x) for x in rng.integers(2, vocab_size + 2, k))
        if q not in seen:
            seen.add(q)
            out.append(q)
    return np.asarray(out, dtype=np.int64).reshape(n, k)


def _hash(windows: np.ndarray, mult: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return (windows.astype(np.uint64) * mult).sum(axis=-1, dtype=np.uint64)


def occurrences(stream: np.ndarray, phrases: np.ndarray) -> np.ndarray:
    """Start positions where some phrase of ``phrases`` (p, k) occurs in ``stream``, and which: (m, 2)."""
    k = phrases.shape[1]
    if stream.size < k:
        return np.zeros((0, 2), dtype=np.int64)
    mult = np.random.default_rng(12345).integers(1, 2**63, k, dtype=np.uint64) | np.uint64(1)
    windows = np.lib.stride_tricks.sliding_window_view(stream, k)
    h = _hash(windows, mult)
    ph = _hash(phrases, mult)
    order = np.argsort(ph)
    cand = np.flatnonzero(np.isin(h, ph))
    idx = order[np.searchsorted(ph[order], h[cand])]
    exact = (windows[cand] == phrases[idx]).all(axis=1)
    return np.stack([cand[exact], idx[exact]], axis=1).astype(np.int64)


def make_stream(rng: np.random.Generator, phrases: np.ndarray, cfg: ScaffoldConfig, tokens: int, rules: int,
                repeats: int) -> ScaffoldStream:
    """A stream of ``tokens`` ids: uniform Sigma with ``rules`` alpha q omega and ``repeats`` free
    copies of each phrase at random positions; no phrase occurs anywhere else."""
    p, k = phrases.shape
    rule_phrases = rng.permutation(np.arange(rules) % p)
    free_phrases = rng.permutation(np.repeat(np.arange(p), repeats))
    segments = [np.concatenate([[ALPHA], phrases[i], [OMEGA]]) for i in rule_phrases]
    segments += [phrases[i] for i in free_phrases]
    kinds = np.concatenate([np.zeros(len(rule_phrases), bool), np.ones(len(free_phrases), bool)])
    problem = fill_problem(tokens, rules, p, repeats, k)
    if problem:
        raise ValueError(f"{problem}; raise tokens or lower rules / familiar_repeats")
    inserted = sum(len(s) for s in segments)
    background = tokens - inserted
    order = rng.permutation(len(segments))
    gaps = np.sort(rng.choice(np.arange(1, background), size=len(segments), replace=False))
    bg = rng.integers(2, cfg.vocab_size + 2, background)
    # segment order[j] starts after the first gaps[j] background tokens and the j segments before it
    lengths = np.where(kinds, k, k + 2)[order]
    starts = np.empty(len(segments), dtype=np.int64)
    starts[order] = gaps + np.cumsum(lengths) - lengths
    placed = np.zeros(tokens, dtype=bool)
    placed[np.repeat(gaps, lengths) + np.arange(inserted)] = True
    stream = np.empty(tokens, dtype=np.int64)
    stream[placed] = np.concatenate([segments[s] for s in order]) if len(order) else []
    stream[~placed] = bg
    rule_starts, free_starts = starts[~kinds], starts[kinds]
    legit = set((rule_starts + 1).tolist()) | set(free_starts.tolist())
    fewest, stalled = None, 0
    while True:  # redraw a background token of every unplaced occurrence
        occ = occurrences(stream, phrases)
        bad = [int(s) for s in occ[:, 0] if int(s) not in legit]
        if not bad:
            break
        fewest, stalled = (len(bad), 0) if fewest is None or len(bad) < fewest else (fewest, stalled + 1)
        if stalled >= STALLED_ROUNDS:  # the phrases leave the background no way out (e.g. ab and ba over {a, b})
            raise ValueError(f"the background cannot avoid the {p} phrases of length {k}: after {STALLED_ROUNDS} "
                             f"rounds of redrawing, {len(bad)} stray occurrences are left (of {tokens} tokens over "
                             f"{cfg.vocab_size} types); use fewer phrases or more types")
        for s in bad:
            free = np.flatnonzero(~placed[s:s + k]) + s
            stream[rng.choice(free)] = rng.integers(2, cfg.vocab_size + 2)
    return ScaffoldStream(stream, rule_starts, rule_phrases, free_starts, free_phrases)


def make_tests(rng: np.random.Generator, phrases: np.ndarray, cfg: ScaffoldConfig, in_domain: bool) -> ScaffoldTests:
    p, k = phrases.shape
    n = cfg.test_cases
    if in_domain:
        scaffolds = phrases[rng.permutation(np.arange(n) % p)]
    else:
        known = {tuple(q) for q in phrases.tolist()}
        rows = []
        while len(rows) < n:
            q = rng.integers(2, cfg.vocab_size + 2, k)
            if tuple(q.tolist()) not in known:
                rows.append(q)
        scaffolds = np.asarray(rows, dtype=np.int64).reshape(n, k)
    context = rng.integers(2, cfg.vocab_size + 2, (n, cfg.context))
    inputs = np.concatenate([context, np.full((n, 1), ALPHA), scaffolds, np.full((n, 1), OMEGA)], axis=1)
    return ScaffoldTests(inputs.astype(np.int64), cfg.context, k)


def generate(cfg: ScaffoldConfig, k: int, seed: int, settings: tuple[str, ...] = SETTINGS) -> ScaffoldCorpus:
    """The corpora of scaffold length ``k`` in each setting, from ``seed`` (same seed, same corpus)."""
    if k < 1:
        raise ValueError(f"scaffold length must be >= 1, got {k}")
    unknown = set(settings) - set(SETTINGS)
    if unknown:
        raise ValueError(f"unknown settings {sorted(unknown)}; known: {SETTINGS}")
    root = np.random.SeedSequence([seed, k])
    phrase_seq, test_seq, *stream_seqs = root.spawn(2 + 2 * len(SETTINGS))
    phrases = _phrases(np.random.default_rng(phrase_seq), cfg.phrases, k, cfg.vocab_size)
    out = ScaffoldCorpus(k, phrases)
    for i, setting in enumerate(SETTINGS):
        if setting not in settings:
            continue
        repeats = cfg.familiar_repeats if setting == "familiar" else 0
        out.train[setting] = make_stream(np.random.default_rng(stream_seqs[2 * i]), phrases, cfg, cfg.tokens,
                                         cfg.rules, repeats)
        out.valid[setting] = make_stream(np.random.default_rng(stream_seqs[2 * i + 1]), phrases, cfg,
                                         cfg.valid_tokens, *valid_counts(cfg, repeats))
    trng = np.random.default_rng(test_seq)
    out.tests["in_domain"] = make_tests(trng, phrases, cfg, True)
    out.tests["out_domain"] = make_tests(trng, phrases, cfg, False)
    return out


def generates(source: object) -> bool:
    """Whether ``source`` names a source of scaffold corpora (``scaffold:``), not sentences to read."""
    found = data_source_for(source) if isinstance(source, str) else None
    return found is not None and FORM in found.gives


class ScaffoldSource(DataSource):
    """``scaffold:``: the corpora this module generates, drawn from the spec's ``[corpus.scaffold]``."""

    name = "scaffold generator"
    scheme = "scaffold"
    written = "'scaffold:'"
    gives = frozenset({FORM})

    def matches(self, source: Source) -> bool:
        return source.scheme == self.scheme and not source.name

    def identity(self, source: Source, base: Path, form: str = "", **options) -> str:
        return f"{source} v{VERSION}"  # generated: the generator's code is the identity


register_data_source(ScaffoldSource())
