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
from safetensors.torch import load, load_file, save

from runner.storage.location import Remote
from runner.storage.store import atomic_write_bytes


def write_tensors(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> None:
    """Write ``tensors`` (moved to the CPU) with string ``metadata``, whole or not at all."""
    atomic_write_bytes(path, save({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, metadata=metadata))


def read_tensors(path: Path, device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    """The tensors of a file (on disk, memory-mapped; on object storage, read whole), on ``device``."""
    if isinstance(path, Remote):
        return {k: v.to(device) for k, v in load(path.read_bytes()).items()}
    return load_file(str(path), device=str(device))


def read_metadata(path: Path) -> dict[str, str] | None:
    """A file's metadata; None when it is missing, torn or not safetensors."""
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
        header_len = int.from_bytes(raw[:8], "little")
        header = json.loads(raw[8 : 8 + header_len])
        info = header.get("__metadata__", {})
        if json.loads(info.get("tasks", "null")) != task_ids or info.get("store_id") != store_id:
            return None
        tensors = load(raw)
    except Exception:  # a torn or foreign file: recompute rather than trust it
        return None
    return {k: v.to(device) for k, v in tensors.items()}, json.loads(info.get("meta", "{}"))
