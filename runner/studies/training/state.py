"""What ``prepare`` resolves for a training spec, shared by its plan text, estimate and session."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from runner.studies.training.data.corpus import Corpus


@dataclass(frozen=True)
class CorpusStats:
    """What a plan needs of the corpus (its sizes and a hash of its streams), cached beside the corpus
    so that a plan or a finished apply reads no corpus (:meth:`read`, :meth:`write`)."""

    corpus_key: str
    """A hash of the corpus' streams and vocabulary (in the task ids; the session checks it)."""
    steps_per_epoch: int
    """The LM's optimizer steps per epoch."""
    train_tokens: int
    valid_tokens: int
    test_tokens: int
    vocab: int
    """The vocabulary's size."""
    tagger_steps_per_epoch: dict[str, int] = field(default_factory=dict)
    """Steps per epoch of taggers trained on another corpus (GMB, the longest documents), by tag set."""

    @property
    def tokens(self) -> tuple[int, int, int]:
        """Tokens of the train, validation and test splits."""
        return self.train_tokens, self.valid_tokens, self.test_tokens

    def split_tokens(self, split: Literal["valid", "test"]) -> int:
        """Tokens of the analysis split (``[corpus] analysis_split``)."""
        return self.valid_tokens if split == "valid" else self.test_tokens

    @classmethod
    def read(cls, path: Path) -> CorpusStats | None:
        """The statistics cached in ``path``, or None when it is missing or not this version's."""
        try:
            return cls(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):  # none, unreadable, or another version's fields
            return None

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(dataclasses.asdict(self)))


@dataclass(frozen=True)
class TrainingState:
    """A training spec resolved (``Prepared.state``)."""

    stats: CorpusStats | None
    """The corpus' statistics, cached beside the corpus; None while the corpus cannot be read here
    (a requirement is unmet)."""
    steps: list[int] | None
    """The checkpoints' training steps (a suite's: its checkpoints')."""
    corpus: Corpus | None = None
    """The corpus, once read: a distributed executor's workers get it with the plan and never read the
    source (:meth:`with_corpus`)."""
    stats_file: Path | None = None
    tagsets: tuple[str, ...] = ()
    suites: Any = None
    """Checkpoint suites (:class:`runner.studies.training.suite.Suites`), or None for trained networks."""

    @property
    def steps_per_epoch(self) -> int:
        return self.stats.steps_per_epoch

    def with_corpus(self, corpus: Corpus) -> TrainingState:
        return dataclasses.replace(self, corpus=corpus)
