"""The one checkpoint format of training as time: safetensors with flat string metadata, written atomically.

Files, in ``<store>.runner/checkpoints/<network>/<train task id>/``: a kept checkpoint per scheduled
step (``model.<name>`` tensors: the weights) and ``resume.safetensors`` (the weights and everything
the loop and the study need to continue exactly). Every file's metadata names the ``train_id`` it
belongs to, so a stale or foreign file is never trusted; a resume file is read through
:func:`read_resume` alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from runner.storage.checkpoint import read_metadata, read_tensors, write_tensors

RESUME = "resume.safetensors"
WEIGHTS = "model."


@dataclass(frozen=True)
class Resume:
    """Where a training run stood when its resume file was last written."""

    epoch: int
    """Epochs done."""
    step: int | None
    """Optimizer steps done (None in a file of a kit that did not write them: ``epoch`` whole epochs)."""
    batch: int
    """The next batch of epoch ``epoch`` (> 0: stopped mid-epoch)."""
    done: bool
    """The run ended there (its last epoch, or an early stop)."""
    meta: dict[str, str]
    """All its metadata, the study's own entries (:meth:`runner.checkpointed.loop.Trainable.state`) included."""


def read_resume(path: Path, train_id: str) -> Resume | None:
    """The resume file at ``path`` of the training task ``train_id``; None when there is none, or it is
    torn, of another run, or says no epoch."""
    meta = read_metadata(path)
    if meta is None or meta.get("train_id") != train_id:
        return None
    try:
        step = int(meta["step"]) if "step" in meta else None
        return Resume(int(meta["epoch"]), step, int(meta.get("batch", 0)), meta.get("done") == "1", meta)
    except (KeyError, ValueError):
        return None


def checkpoint_dir(state_dir: Path, network: str, train_id: str) -> Path:
    return state_dir / "checkpoints" / network / train_id


def belongs(path: Path, train_id: str) -> bool:
    """The file is whole and was written by the training task ``train_id``."""
    meta = read_metadata(path)
    return meta is not None and meta.get("train_id") == train_id


def weights(model: torch.nn.Module) -> dict[str, Tensor]:
    return {f"{WEIGHTS}{k}": v for k, v in model.state_dict().items()}


def load_weights(model: torch.nn.Module, path: Path, device) -> None:
    """Load the weights of a checkpoint (or resume) file into ``model``."""
    state = {k.removeprefix(WEIGHTS): v for k, v in read_tensors(path, device).items()
             if k.startswith(WEIGHTS)}
    model.load_state_dict(state)


def save(path: Path, tensors: dict[str, Tensor], meta: dict[str, str]) -> None:
    write_tensors(path, tensors, meta)


def adopt(old: Path, new: Path, train_id: str) -> None:
    """A longer run of ``train_id`` takes the files of the finished run in ``old`` as its own (in
    ``new``, metadata naming it): the checkpoints it kept, and its resume file, no longer done, from
    which the loop trains the epochs added. A file already in ``new`` (written by this longer run
    before a kill) is kept; the resume file is taken last."""
    files = sorted(old.glob("*.safetensors"), key=lambda f: f.name == RESUME) if old.is_dir() else []
    for path in files:
        target, meta = new / path.name, read_metadata(path)
        if target.exists() or meta is None:
            continue
        meta = {**meta, "train_id": train_id, **({"done": "0"} if path.name == RESUME else {})}
        save(target, read_tensors(path), meta)


__all__ = ["RESUME", "Resume", "adopt", "belongs", "checkpoint_dir", "load_weights", "read_metadata", "read_resume",
           "save", "weights"]
