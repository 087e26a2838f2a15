"""What ``prepare`` resolves for a training spec, shared by its plan text, estimate and session."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.studies.training.data.corpus import Corpus


@dataclass(frozen=True)
class TrainingState:
    """A training spec resolved (``Prepared.state``)."""

    stats: dict[str, Any] | None
    """The corpus' statistics (tokens per split, steps per epoch, its key), cached beside the corpus;
    None while the corpus cannot be read here (a requirement is unmet)."""
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
        return self.stats["steps_per_epoch"]

    def with_corpus(self, corpus: Corpus) -> TrainingState:
        return dataclasses.replace(self, corpus=corpus)
