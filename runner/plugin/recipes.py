"""What a figure is: a recipe a study registers (:func:`recipe`), and why one cannot be drawn.
:mod:`runner.read.figures` draws them, and :mod:`runner.read.fallback` makes one for any variable."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from models.registry_base import Registry, qualified

if TYPE_CHECKING:  # pragma: no cover
    import xarray as xr
    from matplotlib.figure import Figure


class NotDrawable(Exception):
    """The store has the recipe's variables but not what the figure needs; the message says what."""


class NoValues(NotDrawable):
    """The figure's data holds no finite value yet; the reason reads ``"no values: <what>"``."""

    def __init__(self, what: str):
        super().__init__(f"no values: {what}")


def no_values(ds: xr.Dataset, names: Sequence[str]) -> NoValues | None:
    """:class:`NoValues` when the float variables ``names`` of ``ds`` (at least one) hold no finite
    value at all, else None. Integer, boolean and string variables are not judged (they have no NaN)."""
    import numpy as np  # lazy: numpy

    floats = [n for n in names if n in ds.variables and ds[n].dtype.kind in "fc"]
    if not floats or any(bool(np.isfinite(ds[n]).any()) for n in floats):
        return None
    return NoValues(f"{', '.join(floats)} hold{'s' if len(floats) == 1 else ''} no finite value "
                    "(nothing computed yet: apply the spec, or resume it)")


@dataclass(frozen=True)
class Recipe:
    id: str
    study: str
    reproduces: str
    """The paper's figure, e.g. ``"Inoue et al. 2021, Fig. 2A"``."""
    needs: tuple[str, ...]
    draw: Callable[[xr.Dataset], Figure]
    title: str = ""
    sweeps: bool = False
    """It draws a sweep's dimensions itself (e.g. Fig. 2B against N_w); else it is drawn per point."""


#: study or kit -> figure id -> recipe
_RECIPES: dict[str, dict[str, Recipe]] = {}


def recipe(*, study: str, id: str, reproduces: str, needs: Sequence[str], title: str = "", sweeps: bool = False,
           replaces: bool = False):
    """Decorator: register ``draw(ds) -> Figure`` as figure ``id`` of ``study`` (``sweeps``: it
    draws the swept dimensions of a sweep's dataset itself; otherwise it is drawn once per point).
    ``study`` may be a kit: every study that takes it (``runner.plugin.measures.takes``) draws it,
    unless the study registers a recipe of the same id itself (its own drawing of that figure).
    An id the study has already is refused unless ``replaces``."""

    def register(draw: Callable[[xr.Dataset], Figure]) -> Callable[[xr.Dataset], Figure]:
        figure = Recipe(id, study, reproduces, tuple(needs), draw, title or (draw.__doc__ or "").strip(), sweeps)
        _figures(study).add(id, figure, replaces=replaces)
        return draw

    return register


def _figures(study: str) -> Registry[Recipe]:
    return Registry(f"{study} figure", _RECIPES.setdefault(study, {}), switch="pass replaces=True",
                    label=lambda r: qualified(r.draw))


def recipes(study: str) -> dict[str, Recipe]:
    """The recipes a study draws: those of the kits it takes, then its own (plugins included)."""
    from runner.plugin.measures import kits  # lazy: numpy, pydantic
    from runner.plugin.study import figure_modules  # lazy: numpy, pydantic

    for module in figure_modules():
        importlib.import_module(module)
    return {i: r for owner in [*kits(study), study] for i, r in _RECIPES.get(owner, {}).items()}
