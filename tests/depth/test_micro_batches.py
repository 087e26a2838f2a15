"""Micro-batching of a map and its recovery from device out-of-memory."""

from __future__ import annotations

import torch

from runner.studies.depth.micro_batches import apply_map


class _OOMAbove(torch.nn.Module):
    """Doubles its input, but fails like a full GPU on batches larger than ``limit``."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit, self.calls = limit, []

    def step(self, x, attention_mask=None):
        self.calls.append(len(x))
        if len(x) > self.limit:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return 2 * x


def test_oom_halves_the_micro_batch_and_redoes_the_step():
    z = torch.arange(24.0).reshape(12, 1, 2)
    model = _OOMAbove(limit=3)
    out, size = apply_map(model, z, None, None)
    torch.testing.assert_close(out, 2 * z)
    assert size == 3 and model.calls[:3] == [12, 6, 3]
    out, size = apply_map(model, z, None, size)  # later steps keep the smaller size
    assert size == 3 and set(model.calls[-4:]) == {3}


def test_micro_batches_match_the_whole_batch():
    from models.maps import build_map

    tanh = build_map("tanh", {"g": 1.5, "n": 16}, seed=1, dtype=torch.float64)
    z = torch.randn(10, 1, 16, dtype=torch.float64)
    whole, _ = apply_map(tanh, z, None, None)
    parts, _ = apply_map(tanh, z, None, 4)
    torch.testing.assert_close(whole, parts)
