"""What ``prepare`` resolves for a TransJect spec, shared by its plan text, estimate and session."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Net:
    """One network of a TransJect spec: a ``[[model]]`` entry with one seed."""

    label: str
    model: str
    """Its ``[[model]]`` name."""
    replicate: int
    seed: int
    entry: Any
    """Its ``[[model]]`` table."""
    trained: bool
    """Trained here (False: loaded from a saved checkpoint)."""
    train_id: str
    """The id of its ``train`` (or ``load``) task."""
    variant: str | None = None
    """The architecture (Table 1 row or baseline), once the session knows it (a checkpoint's is read there)."""
    params: dict[str, Any] | None = None
    """The model's configuration, once the session knows it."""


@dataclass(frozen=True)
class TransJectState:
    """A TransJect spec resolved (``Prepared.state``)."""

    nets: tuple[Net, ...]
    """One per network (task ``network`` index)."""
    dirs: dict[int, Path] = field(default_factory=dict)
    """The folder of each network loaded from a saved checkpoint."""
    data: Any = None
    """The splits, vocabulary and analysis sentence once read (:class:`runner.studies.transject.session.Data`):
    a distributed executor's workers get them with the plan and never read the source (:meth:`with_data`)."""

    def with_data(self, data: Any) -> TransJectState:
        return dataclasses.replace(self, data=data)
