"""Device choice, precision flags, and applying a map in micro-batches that shrink on OOM."""

from __future__ import annotations

import torch


def pick_device(requested: str = "auto") -> torch.device:
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(requested)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {requested!r} requested but CUDA is not available")
    return device


def describe(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return f"cpu ({torch.get_num_threads()} threads)"


def set_precision(precision: str) -> None:
    """fp32/fp64 use exact IEEE matmuls; tf32 lets CUDA matmuls use TensorFloat-32."""
    tf32 = precision == "tf32"
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):  # torch >= 2.9 API
        torch.backends.cuda.matmul.fp32_precision = "tf32" if tf32 else "ieee"
        torch.backends.cudnn.conv.fp32_precision = "tf32" if tf32 else "ieee"
    else:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32


def apply_map(model, z: torch.Tensor, mask: torch.Tensor | None, batch_size: int | None) -> tuple[torch.Tensor, int | None]:
    """One application of the map to the whole batch, in micro-batches of ``batch_size``.

    On device out-of-memory the micro-batch is halved and the step redone (f is a pure function
    of its input); the new size is returned so later steps keep it.
    """
    while True:
        try:
            if batch_size is None or batch_size >= len(z):
                return model.step(z, mask), batch_size
            parts = [model.step(z[i : i + batch_size], None if mask is None else mask[i : i + batch_size])
                     for i in range(0, len(z), batch_size)]
            return torch.cat(parts), batch_size
        except torch.OutOfMemoryError:
            current = batch_size or len(z)
            if current <= 1:
                raise
            batch_size = current // 2
            torch.cuda.empty_cache()
