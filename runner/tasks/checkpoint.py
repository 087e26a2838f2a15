"""Durable points of a pass: the whole iteration state, written atomically after each segment."""

from __future__ import annotations

import io
from pathlib import Path

import torch

from runner.store import atomic_write_bytes


def save_checkpoint(path: Path, state: dict, task_ids: list[str], store_id: str, batch_size: int | None) -> None:
    """Save ``state`` (tensors moved to the CPU) for the pass running ``task_ids``."""
    payload = {"tasks": task_ids, "store_id": store_id, "batch_size": batch_size, "state": _to(state, "cpu")}
    buffer = io.BytesIO()
    torch.save(payload, buffer)  # to memory first: a full disk then fails as an OSError, below
    atomic_write_bytes(path, buffer.getbuffer())


def load_checkpoint(path: Path, task_ids: list[str], store_id: str, device: torch.device) -> dict | None:
    """The saved state if it belongs to this pass and this store, else None (start afresh)."""
    if not path.exists():
        return None
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # a torn or foreign file: recompute rather than trust it
        return None
    if payload.get("tasks") != task_ids or payload.get("store_id") != store_id:
        return None
    state = _to(payload["state"], device)
    state["batch_size"] = payload.get("batch_size")
    return state


def _to(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: _to(v, device) for k, v in obj.items()}
    return obj
