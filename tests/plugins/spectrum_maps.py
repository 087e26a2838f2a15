"""Plug-in families with known Lyapunov spectra (issue 54): Arnold's cat map and a constant linear map.

- ``cat``: ``(x, y) -> (2x + y, x + y) mod 1`` on the torus, Jacobian [[2, 1], [1, 1]] everywhere: its
  exponents are +-ln((3 + sqrt 5) / 2) = +-0.9624 (Arnold & Avez, Ergodic Problems of Classical
  Mechanics, 1968; Ott, Chaos in Dynamical Systems, 2nd ed., Sec. 4.1). ``torch.remainder``'s derivative
  is 1, so the map's Jacobian-vector products are the matrix's.
- ``linear``: ``x -> A x`` with A upper triangular (diagonal ``diagonal``, ones above it): its exponents
  are the logs of the diagonal's moduli, the eigenvalues' (Oseledets), and sum to ln|det A| per step.
"""

from __future__ import annotations

import torch
from pydantic import BaseModel, ConfigDict

from models.base import DynamicalMap, MapInputs
from models.registry import register_map


class CatParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CatMap(DynamicalMap):
    """Arnold's cat map on the unit torus; initial states U(0, 1)^2."""

    params_model = CatParams
    n_hidden = 2

    def __init__(self, params: CatParams, *, seed: int = 0, dtype=torch.float32, device="cpu"):
        super().__init__()
        self.dtype, self.device = dtype, device

    def initial_state(self, inputs: MapInputs) -> torch.Tensor:
        u = torch.rand((inputs.samples, 1, 2), generator=inputs.generator, dtype=torch.float64)
        return u.to(dtype=self.dtype, device=self.device)

    def step(self, x: torch.Tensor, attention_mask=None) -> torch.Tensor:
        px, py = x[..., 0], x[..., 1]
        return torch.remainder(torch.stack((2 * px + py, px + py), dim=-1), 1.0)


register_map("cat", CatMap)


class LinearParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    diagonal: tuple[float, float, float] = (1.1, -0.5, 0.25)
    """The eigenvalues of the upper-triangular A (ones above the diagonal: not normal)."""


class LinearMap(DynamicalMap):
    """``x -> A x``; initial states N(0, 1)."""

    params_model = LinearParams
    n_hidden = 3

    def __init__(self, params: LinearParams, *, seed: int = 0, dtype=torch.float32, device="cpu"):
        super().__init__()
        n = self.n_hidden
        a = torch.triu(torch.ones((n, n), dtype=torch.float64), 1) + torch.diag(torch.tensor(params.diagonal))
        self.register_buffer("At", a.T.to(dtype=dtype, device=device))

    def initial_state(self, inputs: MapInputs) -> torch.Tensor:
        x = torch.randn((inputs.samples, 1, self.n_hidden), generator=inputs.generator, dtype=torch.float64)
        return x.to(dtype=self.At.dtype, device=self.At.device)

    def step(self, x: torch.Tensor, attention_mask=None) -> torch.Tensor:
        return x @ self.At


register_map("linear", LinearMap)
