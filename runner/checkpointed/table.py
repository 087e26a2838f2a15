"""The table of run settings every study with checkpoints starts from."""

from __future__ import annotations

from pydantic import Field

from runner.core.device import DeviceName
from runner.spec.specfile import Table


class TrainingTable(Table):
    """Base of a study's table of run settings: how long, in batches of what size, on which device. A
    study redeclares the fields with its paper's defaults and adds its optimiser's settings."""

    epochs: int = Field(1, ge=1)
    """Passes over the training split at most."""
    batch_size: int = Field(1, ge=1)
    """Examples (or parallel streams) per optimizer step."""
    device: DeviceName = "auto"
    """``auto`` (CUDA when present), ``cpu``, ``cuda``..."""
