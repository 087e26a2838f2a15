"""The reference maps as a spec declares them, before any is built: each map's params model, state
size, domain and weight memory (:data:`DECLARED`), what ``plan`` needs of ``map:<name>``. Light: no
torch; the maps themselves are :mod:`models.maps`, built by :func:`models.maps.build_map`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class LogisticParams(_Params):
    r: float = Field(4.0, gt=0, allow_inf_nan=False)
    """Growth rate; x stays in [0, 1] for 0 < r <= 4 (chaotic at r = 4)."""


class HenonParams(_Params):
    a: float = Field(1.4, allow_inf_nan=False)
    """Quadratic coefficient (1.4: the classic chaotic attractor)."""
    b: float = Field(0.3, allow_inf_nan=False)
    """Contraction, y_{t+1} = b x_t; the Jacobian determinant is -b."""


class TanhParams(_Params):
    g: float = Field(1.5, gt=0, allow_inf_nan=False)
    """Gain; W has spectral radius about 1, so g > 1 is the chaotic side for large n."""
    n: int = Field(100, ge=1)
    """Number of units N; W_ij ~ N(0, 1/N)."""


class Lorenz96Params(_Params):
    n: int = Field(40, ge=4)
    """Number of variables N on the circle (Lorenz 1996; Lorenz & Emanuel 1998: 40)."""
    forcing: float = Field(8.0, allow_inf_nan=False)
    """F (8: the chaotic regime of the literature)."""
    dt: float = Field(0.05, gt=0, allow_inf_nan=False)
    """Model time of one step (one RK4 step; Lorenz & Emanuel 1998: 0.05, "6 hours")."""


class CoupledLogisticParams(_Params):
    r: float = Field(4.0, gt=0, le=4, allow_inf_nan=False)
    """Growth rate of each unit's logistic map (chaotic at 4)."""
    eps: float = Field(0.6, ge=0, le=1, allow_inf_nan=False)
    """Coupling towards the units' mean; at r = 4 synchrony is transversally stable for eps > 1/2."""
    units: int = Field(8, ge=2)
    """Number of coupled maps N, the state's tokens."""
    spread: float = Field(0.1, ge=0, le=0.5, allow_inf_nan=False)
    """Half-width of the units' initial spread around their common point."""


def _tanh_weights_nbytes(n_hidden: int, itemsize: int) -> int:
    return n_hidden ** 2 * (8 + 2 * itemsize)  # W drawn in fp64, then W and g W^T in the working precision


@dataclass(frozen=True)
class MapDeclaration:
    """A built-in reference map as ``plan`` sees it (the class in :mod:`models.maps` takes these)."""

    implementation: str
    """The class that computes it, ``module.Class``."""
    params_model: type[_Params]
    n_hidden: int | None = None
    """Elements of a state; None: its params say (``n``)."""
    domain: tuple[float, float] | None = None
    """See :attr:`models.base.DynamicalMap.domain`."""
    token_equivariant: bool = False
    """See :attr:`models.base.DynamicalMap.token_equivariant`."""
    weights_nbytes: Callable[[int, int], int] | None = None
    """Memory its weights take for a state of ``n_hidden`` elements at ``itemsize`` bytes (None: none)."""


DECLARED: dict[str, MapDeclaration] = {
    "coupled_logistic": MapDeclaration("models.maps.CoupledLogisticMap", CoupledLogisticParams, n_hidden=1,
                                       domain=(0.0, 1.0), token_equivariant=True),
    "logistic": MapDeclaration("models.maps.LogisticMap", LogisticParams, n_hidden=1, domain=(0.0, 1.0)),
    "henon": MapDeclaration("models.maps.HenonMap", HenonParams, n_hidden=2),
    "tanh": MapDeclaration("models.maps.TanhReservoir", TanhParams, weights_nbytes=_tanh_weights_nbytes),
    "lorenz96": MapDeclaration("models.maps.Lorenz96Map", Lorenz96Params),
}
