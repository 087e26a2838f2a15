"""Durable points of a run: named tensors and a little metadata, written atomically as safetensors.

No pickle: a checkpoint is a safetensors file (tensors) whose string metadata says what it belongs
to, so a stale or foreign file is never trusted. It is serialised in memory first and then written
whole or not at all, so a full disk leaves no partial file (:func:`runner.storage.store.atomic_write_bytes`; on
object storage one PUT, beside the store under the same URL).
:func:`write_tensors` and :func:`read_metadata` are the format; :func:`save_checkpoint` and
:func:`load_checkpoint` key a file by task ids and store id (a pass over many steps), and
:mod:`runner.checkpointed.files` by its training task.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load, save

from runner.core.errors import StorageError
from runner.storage import kept
from runner.storage.objects import Remote
from runner.storage.digest import digest
from runner.storage.store import atomic_write_bytes


class KeptStateDamaged(StorageError):
    """A kept file (a checkpoint, a resume or final state) is not what was written: it is never used
    (exit 74)."""


def write_tensors(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> None:
    """Write ``tensors`` (moved to the CPU) with string ``metadata`` and the digest of the tensors'
    bytes (:data:`runner.storage.kept.DIGEST`), whole or not at all."""
    tensors = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    metadata = {k: v for k, v in metadata.items() if k != kept.DIGEST}
    _, data = kept.split(save(tensors, metadata=metadata))  # the tensor bytes do not depend on the header
    atomic_write_bytes(path, save(tensors, metadata={**metadata, kept.DIGEST: digest(data)}))


def read_tensors(path: Path, device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    """The tensors of a file, on ``device``, once its bytes are checked against the digest it
    recorded (:class:`KeptStateDamaged` naming the file otherwise)."""
    raw = path.read_bytes()
    problem = kept.raw_problem(raw)
    if problem:
        raise KeptStateDamaged(f"{path} {problem}; it is not used (remove it, and the run that needs it computes "
                               "it again)")
    return {k: v.to(device) for k, v in load(raw).items()}


def read_metadata(path: Path) -> dict[str, str] | None:
    """A file's metadata (without the digest of its tensors); None when it is missing, torn or not
    safetensors (its header only: :func:`runner.storage.kept.problem` checks its tensors)."""
    meta = _metadata(path)
    return None if meta is None else {k: v for k, v in meta.items() if k != kept.DIGEST}


def _metadata(path: Path) -> dict[str, str] | None:
    if not path.is_file():
        return None
    try:
        if isinstance(path, Remote):  # on object storage: the header, read from the bytes
            raw = path.read_bytes()
            header = json.loads(raw[8 : 8 + int.from_bytes(raw[:8], "little")])
            load(raw)  # a torn file fails here, as safe_open fails on one on disk
            return dict(header.get("__metadata__") or {})
        with safe_open(str(path), "pt") as f:
            return dict(f.metadata() or {})
    except Exception:  # a torn or foreign file
        return None


def save_checkpoint(path: Path, tensors: dict[str, torch.Tensor], task_ids: list[str], store_id: str,
                    **meta: object) -> None:
    """Save ``tensors`` for the tasks ``task_ids`` of store ``store_id``."""
    write_tensors(path, tensors, {"tasks": json.dumps(task_ids), "store_id": store_id, "meta": json.dumps(meta)})


def load_checkpoint(path: Path, task_ids: list[str], store_id: str,
                    device: torch.device) -> tuple[dict[str, torch.Tensor], dict] | None:
    """``(tensors, meta)`` if the file belongs to these tasks and this store, else None (start afresh)."""
    if not path.is_file():
        return None
    try:
        raw = path.read_bytes()
        info = kept.metadata(raw)
        if json.loads(info.get("tasks", "null")) != task_ids or info.get("store_id") != store_id:
            return None
        if kept.raw_problem(raw):  # an edited or torn file: recompute rather than trust it
            return None
        tensors = load(raw)
    except Exception:  # a torn or foreign file: recompute rather than trust it
        return None
    return {k: v.to(device) for k, v in tensors.items()}, json.loads(info.get("meta", "{}"))
