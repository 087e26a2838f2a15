"""Reference maps with known dynamics, to calibrate every measure.

All are :class:`DynamicalMap` s on states of shape ``(batch, 1, n)`` (one "token"; the coupled maps:
``(batch, units, 1)``):

- ``logistic``: ``x -> r x (1 - x)`` (n = 1); chaotic at r = 4 with Lyapunov exponent ln 2.
- ``henon``: ``(x, y) -> (1 - a x^2 + y, b x)`` (n = 2); chaotic at a = 1.4, b = 0.3
  (largest Lyapunov exponent about 0.42).
- ``tanh``: ``x -> tanh(g W x)`` with ``W_ij ~ N(0, 1/N)`` (n = N); the random-network
  transition to chaos is at g = 1 for large N.
- ``coupled_logistic``: ``units`` logistic maps coupled through their mean (Kaneko 1990), the
  state's tokens: the synchronised set is invariant, transversally stable at r = 4 for eps > 1/2.
- ``lorenz96``: one fourth-order Runge-Kutta step of ``dt`` of Lorenz-96,
  ``dx_i/dt = (x_{i+1} - x_{i-2}) x_{i-1} - x_i + F`` (n = N, cyclic); at N = 40, F = 8 its largest
  Lyapunov exponent is about 1.7 per model time unit (Lorenz & Emanuel 1998: errors double in about
  0.42 units; Karimi & Paul 2010 report 1.68), so about 1.7 dt per step.

Each map has a frozen pydantic params model (``params_model(name)``), so a spec's
``params = {...}`` can be validated before any compute. Initial states are drawn in float64 on
the CPU with ``MapInputs.generator`` and then cast to the map's dtype and device, so a seed gives
the same states everywhere.
"""

from __future__ import annotations

import torch
from pydantic import BaseModel
from torch import Tensor

from .base import DynamicalMap, MapInputs
from .map_params import (DECLARED, CoupledLogisticParams, HenonParams, LogisticParams, Lorenz96Params,
                         TanhParams, _Params)


def _generator(inputs: MapInputs) -> torch.Generator:
    if inputs.generator is not None:
        if inputs.generator.device.type != "cpu":
            raise ValueError("reference maps draw initial states with a CPU generator")
        return inputs.generator
    return torch.Generator(device="cpu").manual_seed(0)


class _ReferenceMap(DynamicalMap):
    needs_tokens = False
    params_model: type[_Params]
    n_hidden: int

    def __init_subclass__(cls, declared: str | None = None, **kwargs):
        """``class M(_ReferenceMap, declared="name")``: M takes what :data:`models.map_params.DECLARED` says."""
        super().__init_subclass__(**kwargs)
        if declared is not None:
            d = DECLARED[declared]
            cls.params_model, cls.domain, cls.token_equivariant = d.params_model, d.domain, d.token_equivariant
            if d.n_hidden is not None:
                cls.n_hidden = d.n_hidden
            if d.weights_nbytes is not None:
                cls.weights_nbytes = staticmethod(d.weights_nbytes)

    def __init__(self, params: _Params, *, seed: int = 0, dtype: torch.dtype = torch.float32,
                 device: str | torch.device = "cpu"):
        super().__init__()
        self.params = params
        self.seed = int(seed)
        # an empty buffer that follows ``.to()``, so dtype and device are always the module's own
        self.register_buffer("_anchor", torch.empty(0, dtype=dtype, device=device), persistent=False)

    @property
    def dtype(self) -> torch.dtype:
        return self._anchor.dtype

    @property
    def device(self) -> torch.device:
        return self._anchor.device

    def _cast(self, x: Tensor) -> Tensor:
        return x.to(dtype=self.dtype, device=self.device)

    def extra_repr(self) -> str:
        return f"{self.params!r}, seed={self.seed}, dtype={self.dtype}"

    @classmethod
    def weights_nbytes(cls, n_hidden: int, itemsize: int) -> int:
        """Memory its weights take for a state of ``n_hidden`` elements (none: a formula of the state)."""
        return 0


class LogisticMap(_ReferenceMap, declared="logistic"):
    """``x -> r x (1 - x)``; initial states ``x ~ U(0.05, 0.95)``. Its domain is [0, 1] (invariant
    for r <= 4); a point outside runs off to -inf."""

    def __init__(self, params: LogisticParams | None = None, **kw):
        super().__init__(params or LogisticParams(), **kw)
        self.r = float(self.params.r)

    def initial_state(self, inputs: MapInputs) -> Tensor:
        u = torch.rand((inputs.samples, 1, 1), generator=_generator(inputs), dtype=torch.float64)
        return self._cast(0.05 + 0.9 * u)

    def step(self, x: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        return self.r * x * (1 - x)


class HenonMap(_ReferenceMap, declared="henon"):
    """``(x, y) -> (1 - a x^2 + y, b x)``, state ``[..., 0] = x``, ``[..., 1] = y``.

    Initial states lie on the attractor: draw ``(x, y) ~ U(-0.1, 0.1)^2`` and iterate 100 steps
    (in float64) before casting, so transients from the draw are gone. (For parameters without a
    bounded attractor, the states may diverge; that is the map's behaviour, not an error here.)
    """

    burn_in = 100

    def __init__(self, params: HenonParams | None = None, **kw):
        super().__init__(params or HenonParams(), **kw)
        self.a = float(self.params.a)
        self.b = float(self.params.b)

    def initial_state(self, inputs: MapInputs) -> Tensor:
        u = torch.rand((inputs.samples, 1, 2), generator=_generator(inputs), dtype=torch.float64)
        x = 0.2 * u - 0.1
        for _ in range(self.burn_in):
            x = self.step(x)
        return self._cast(x)

    def step(self, x: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        px, py = x[..., 0], x[..., 1]
        return torch.stack((1 - self.a * px * px + py, self.b * px), dim=-1)


class TanhReservoir(_ReferenceMap, declared="tanh"):
    """``x -> tanh(g W x)``, ``W_ij ~ N(0, 1/N)`` drawn from a generator seeded by ``seed``
    (float64 on the CPU, then cast); a replicate with a new seed is a new network. Initial states
    ``x ~ N(0, 1)``."""

    def __init__(self, params: TanhParams | None = None, **kw):
        super().__init__(params or TanhParams(), **kw)
        self.g = float(self.params.g)
        self.n_hidden = n = int(self.params.n)
        gen = torch.Generator(device="cpu").manual_seed(self.seed)
        w = torch.randn((n, n), generator=gen, dtype=torch.float64) / n**0.5
        self.register_buffer("W", self._cast(w))
        # x W_eff^T = g (W x) for row-vector states
        self.register_buffer("_gWt", self._cast(self.g * w.T), persistent=False)

    def initial_state(self, inputs: MapInputs) -> Tensor:
        x = torch.randn((inputs.samples, 1, self.n_hidden), generator=_generator(inputs), dtype=torch.float64)
        return self._cast(x)

    def step(self, x: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        return torch.tanh(x @ self._gWt)


class Lorenz96Map(_ReferenceMap, declared="lorenz96"):
    """One RK4 step of ``dt`` of Lorenz-96 (Lorenz 1996), batched over samples: a continuous-time
    reference system whose exponent per step is the flow's per time unit times ``dt``.

    Initial states lie on the attractor: ``x_i = F`` plus ``U(-0.01, 0.01)`` noise, then
    ``burn_in`` model time units of the flow (in float64) before casting."""

    burn_in = 20.0

    def __init__(self, params: Lorenz96Params | None = None, **kw):
        super().__init__(params or Lorenz96Params(), **kw)
        self.n_hidden = int(self.params.n)
        self.forcing, self.dt = float(self.params.forcing), float(self.params.dt)

    def _flow(self, x: Tensor) -> Tensor:
        return (torch.roll(x, -1, -1) - torch.roll(x, 2, -1)) * torch.roll(x, 1, -1) - x + self.forcing

    def initial_state(self, inputs: MapInputs) -> Tensor:
        u = torch.rand((inputs.samples, 1, self.n_hidden), generator=_generator(inputs), dtype=torch.float64)
        x = self.forcing + 0.02 * u - 0.01
        for _ in range(round(self.burn_in / self.dt)):
            x = self.step(x)
        return self._cast(x)

    def step(self, x: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        h = self.dt
        k1 = self._flow(x)
        k2 = self._flow(x + 0.5 * h * k1)
        k3 = self._flow(x + 0.5 * h * k2)
        k4 = self._flow(x + h * k3)
        return x + (h / 6) * (k1 + 2 * k2 + 2 * k3 + k4)


class CoupledLogisticMap(_ReferenceMap, declared="coupled_logistic"):
    """Globally coupled logistic maps (Kaneko, Physica D 41, 137 (1990)): ``units`` logistic maps, the
    state's tokens, each pulled towards their mean, ``x_i -> (1 - eps) f(x_i) + (eps / N) sum_j f(x_j)``
    with ``f(x) = r x (1 - x)``. Permuting the units permutes the image, so the synchronised set (all
    units equal) is invariant, and on it the map is ``f``: the Lyapunov exponent there is f's (ln 2 at
    r = 4). A perturbation that sums to zero over the units is multiplied by ``(1 - eps) f'(x)``, so
    the transverse exponent is ``ln(1 - eps) + lambda_f`` (Pikovsky, Rosenblum & Kurths,
    *Synchronization*, 2001, Sec. 15.4): at r = 4 synchrony is stable for eps > 1/2 and unstable below.
    Initial states: a common point ``c ~ U(0.05, 0.95)`` and each unit ``c + spread U(-1, 1)``,
    kept inside [0.01, 0.99]."""

    def __init__(self, params: CoupledLogisticParams | None = None, **kw):
        super().__init__(params or CoupledLogisticParams(), **kw)
        self.r, self.eps, self.units = float(self.params.r), float(self.params.eps), int(self.params.units)

    def initial_state(self, inputs: MapInputs) -> Tensor:
        gen = _generator(inputs)
        c = 0.05 + 0.9 * torch.rand((inputs.samples, 1, 1), generator=gen, dtype=torch.float64)
        u = 2 * torch.rand((inputs.samples, self.units, 1), generator=gen, dtype=torch.float64) - 1
        return self._cast((c + self.params.spread * u).clamp(0.01, 0.99))

    def step(self, x: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        fx = self.r * x * (1 - x)
        return (1 - self.eps) * fx + self.eps * fx.mean(1, keepdim=True)


MAPS: dict[str, type[_ReferenceMap]] = {
    "coupled_logistic": CoupledLogisticMap,
    "logistic": LogisticMap,
    "henon": HenonMap,
    "tanh": TanhReservoir,
    "lorenz96": Lorenz96Map,
}


def params_model(name: str) -> type[BaseModel]:
    """The pydantic params class of reference map ``name``."""
    try:
        return MAPS[name].params_model
    except KeyError:
        raise ValueError(f"unknown reference map {name!r}; known: {sorted(MAPS)}") from None


def build_map(name: str, params: dict | None = None, *, seed: int = 0, dtype: torch.dtype = torch.float32,
              device: str | torch.device = "cpu") -> DynamicalMap:
    """Validate ``params`` against the map's params model and build the map.

    Raises ``ValueError`` for an unknown name and ``pydantic.ValidationError`` (a ``ValueError``)
    for bad params.
    """
    cls = MAPS.get(name)
    if cls is None:
        raise ValueError(f"unknown reference map {name!r}; known: {sorted(MAPS)}")
    p = cls.params_model.model_validate(params or {})
    return cls(p, seed=seed, dtype=dtype, device=device)


__all__ = [
    "CoupledLogisticMap", "CoupledLogisticParams", "HenonMap", "HenonParams", "LogisticMap", "LogisticParams", "Lorenz96Map", "Lorenz96Params", "MAPS", "TanhParams", "TanhReservoir",
    "build_map", "params_model",
]
