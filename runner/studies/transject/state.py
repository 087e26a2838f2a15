"""What ``prepare`` resolves for a TransJect spec, shared by its plan text, estimate and session."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class TransJectState:
    """A TransJect spec resolved (``Prepared.state``)."""

    nets: list[dict[str, Any]]
    """One entry per network: ``label``, ``model``, ``replicate``, ``seed``, ``entry`` (its ``[[model]]``),
    ``trained``, ``train_id``; the session adds ``variant`` and ``params``."""
    dirs: dict[int, Path] = field(default_factory=dict)
    """The folder of each network loaded from a saved checkpoint."""
    data: Any = None
    """The splits, vocabulary and analysis sentence once read (:class:`runner.studies.transject.session.Data`):
    a distributed executor's workers get them with the plan and never read the source (:meth:`with_data`)."""

    def with_data(self, data: Any) -> TransJectState:
        return dataclasses.replace(self, data=data)
