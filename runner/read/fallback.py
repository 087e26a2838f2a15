"""A fallback plot per variable, for stores no figure recipe covers.

``runner figures STORE --only var:NAME`` draws variable NAME of any store; ``runner figures`` on a
store to which no recipe applies draws one per numeric variable. The plot: the variable against
its leading dimension other than ``network`` (the first whose coordinate has units, a step or time
axis, else the first), one line per network, each the mean over the other dimensions with a +-1
standard-error band and its n; axis labels carry the CF ``long_name`` and
``units`` of the variable and of the dimension's coordinate. Categorical variables (CF flags),
booleans and strings are not plotted.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from runner.plugin.recipes import NoValues, Recipe
from runner.plugin.plotting import axis_label, mean_band, mean_legend, new_figure

PREFIX = "var:"
#: Networks drawn as lines at most; a store of more draws their mean (over networks too).
MAX_LINES = 12


def plottable(da: xr.DataArray) -> bool:
    """A number (integer or float, not boolean) that is no CF flag and has at least one dimension."""
    return da.dtype.kind in "iuf" and "flag_values" not in da.attrs and da.ndim > 0


def numeric(ds: xr.Dataset) -> list[str]:
    """The data variables of ``ds`` that :func:`plot` draws, in the store's order."""
    return [str(n) for n, da in ds.data_vars.items() if plottable(da)]


def check(ds: xr.Dataset, names: list[str]) -> None:
    """KeyError naming each variable the fallback cannot draw (absent, or not a number), and the ones it can."""
    bad = [n for n in names if n not in ds.data_vars or not plottable(ds[n])]
    if bad:
        raise KeyError(f"no numeric variable {', '.join(bad)}; this store's: {', '.join(numeric(ds)) or 'none'}")


def recipe(ds: xr.Dataset, name: str) -> Recipe:
    """The fallback plot of ``name`` as a recipe (id ``var:NAME``), for :func:`runner.read.figures.figures`."""
    return Recipe(f"{PREFIX}{name}", "", "fallback, no paper figure", (name,), partial(plot, name=name),
                  title=str(ds[name].attrs.get("long_name") or name))


def leading_dim(da: xr.DataArray) -> str | None:
    """The dimension to plot ``da`` against: the first but ``network`` whose coordinate has units
    (``lyapunov_step`` of ``(network, sample, lyapunov_step)``), else the first but ``network``."""
    dims = [str(d) for d in da.dims if d != "network"]
    return next((d for d in dims if d in da.coords and da[d].attrs.get("units")), dims[0] if dims else None)


def plot(ds: xr.Dataset, name: str) -> Figure:
    """``name`` against its leading non-network dimension, one mean line (+-1 s.e., n) per network."""
    da = ds[name]
    if not np.isfinite(da).any():
        raise NoValues(f"{name} holds no finite value")
    x = leading_dim(da)
    fig = new_figure()
    ax = fig.subplots()
    if x is None:  # one value per network: a point each
        nets = [str(n) for n in da["network"].values]
        ax.plot(np.arange(len(nets)), da.values.astype(np.float64), "o", label=name)
        ax.set_xticks(np.arange(len(nets)), nets, rotation=30, ha="right", fontsize="small")
        ax.set(xlabel="network", ylabel=axis_label(da))
        return fig
    coord = da[x]
    if coord.dtype.kind not in "iuf":  # categories (layer names): positions, labelled
        da = da.assign_coords({x: np.arange(da.sizes[x])})
        ax.set_xticks(np.arange(da.sizes[x]), [str(v) for v in coord.values], rotation=30, ha="right",
                      fontsize="small")
    other = tuple(d for d in da.dims if d not in ("network", x))
    lines = [str(n) for n in da["network"].values] if "network" in da.dims else []
    if len(lines) > MAX_LINES:
        lines, other = [], ("network", *other)
    for k, net in enumerate(lines or [name]):
        cell = da.sel(network=net) if lines else da
        if other:
            mean_band(ax, cell, other, x, label=net, band="se", color=f"C{k % 10}")
        else:
            ax.plot(cell[x].values, cell.values, color=f"C{k % 10}", label=net)
    ax.set(xlabel=axis_label(coord), ylabel=axis_label(ds[name]))
    if other:
        mean_legend(ax, " x ".join(other), band="se")
    elif lines:
        ax.legend(fontsize="small")
    return fig
