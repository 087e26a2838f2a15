"""One application of a depth map to the whole batch, in micro-batches that halve on device
out-of-memory (the depth study's only device policy)."""

from __future__ import annotations

import torch


def apply_map(model, z: torch.Tensor, mask: torch.Tensor | None, batch_size: int | None) -> tuple[torch.Tensor, int | None]:
    """One application of the map to the whole batch, in micro-batches of ``batch_size``.

    On device out-of-memory the micro-batch is halved and the step redone (f is a pure function
    of its input); the new size is returned so later steps keep it. The partial results of the
    failed attempt are dropped and the allocator's cache emptied before the retry.
    """
    while True:
        try:
            return _apply_in_parts(model, z, mask, batch_size), batch_size
        except torch.OutOfMemoryError:
            current = batch_size or len(z)
            if current <= 1:
                raise
            batch_size = current // 2
        if z.device.type == "cuda":  # outside the except block: the failed attempt's tensors are free now
            torch.cuda.empty_cache()


def _apply_in_parts(model, z: torch.Tensor, mask: torch.Tensor | None, batch_size: int | None) -> torch.Tensor:
    if batch_size is None or batch_size >= len(z):
        return model.step(z, mask)
    return torch.cat([model.step(z[i : i + batch_size], None if mask is None else mask[i : i + batch_size])
                      for i in range(0, len(z), batch_size)])
