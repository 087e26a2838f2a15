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


class ChebyshevParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Chebyshev(DynamicalMap):
    """``x -> 4 x^3 - 3 x`` (the Chebyshev polynomial T_3) on [-1, 1], conjugate to tripling an angle
    (cos 3 theta = T_3(cos theta)): its Lyapunov exponent is ln 3 (Ott, Chaos in Dynamical Systems,
    2nd ed., Sec. 2.2, the same argument as for the logistic map at r = 4). It declares no domain, as a
    plug-in family need not: its twins' regime is checked on the run."""

    params_model = ChebyshevParams
    n_hidden = 1

    def __init__(self, params: ChebyshevParams, *, seed: int = 0, dtype=torch.float32, device="cpu"):
        super().__init__()
        self.dtype, self.device = dtype, device

    def initial_state(self, inputs: MapInputs) -> torch.Tensor:
        u = torch.rand((inputs.samples, 1, 1), generator=inputs.generator, dtype=torch.float64)
        return torch.cos(2 * math.pi * u).to(dtype=self.dtype, device=self.device)

    def step(self, x: torch.Tensor, attention_mask=None) -> torch.Tensor:
        return 4 * x ** 3 - 3 * x


register_map("chebyshev", Chebyshev)
