"""A model family added without touching the engine: rotations of the plane, an isometry.

Every Lyapunov exponent of a rotation is 0 and it keeps every norm: known answers for the runner.
"""

from __future__ import annotations

import math

import torch
from pydantic import BaseModel, ConfigDict, Field

from models.base import DynamicalMap, MapInputs
from models.registry import register_map


class RotationParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    angle: float = Field(0.5, allow_inf_nan=False)
    """Rotation per step, in radians."""


class Rotation(DynamicalMap):
    """``(x, y) -> R(angle) (x, y)``; initial states on the unit circle."""

    params_model = RotationParams
    n_hidden = 2

    def __init__(self, params: RotationParams, *, seed: int = 0, dtype=torch.float32, device="cpu"):
        super().__init__()
        c, s = math.cos(params.angle), math.sin(params.angle)
        self.register_buffer("R", torch.tensor([[c, -s], [s, c]], dtype=dtype, device=device).T)

    def initial_state(self, inputs: MapInputs) -> torch.Tensor:
        phase = torch.rand((inputs.samples, 1), generator=inputs.generator, dtype=torch.float64) * 2 * math.pi
        x = torch.stack([phase.cos(), phase.sin()], dim=-1)
        return x.to(dtype=self.R.dtype, device=self.R.device)

    def step(self, x: torch.Tensor, attention_mask=None) -> torch.Tensor:
        return x @ self.R


register_map("rotation", Rotation)
