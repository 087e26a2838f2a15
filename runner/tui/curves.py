"""What the plots view shows of a store's *curves*: variables whose plot hint is ``curve``.

No Textual import, no study's names: :func:`read_curves` turns the curve variables of an open
dataset into :class:`Curves` (in their ``plot_order``; NaN kept: unwritten values are
skipped when drawn), by their dims:

- ``(network, t)``: one line per network, or the selected network (with its ``plot_overlay``
  variable drawn over it, mapped onto ``t`` through the store's ``step`` and ``epoch`` coordinates);
- ``(network, t, group)`` (a layer, a parameter group): one line per group for one network (the
  selected one; with "all", the first with values), or, with a group selected, one line per
  network; x is ``t``'s ``step`` coordinate when it has one;
- ``(network, t, split, group)``: one such plot per value of ``split``, keyed ``name:value``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from runner.core.layout import counted, internal


def is_curve(attrs) -> bool:
    return internal(attrs).get("plot") == "curve"


@dataclass
class Curves:
    key: str
    """What ``v`` cycles through: the variable name, ``name:quantity`` for a variable split by quantity."""
    long_name: str
    units: str
    x_label: str
    networks: list[str]
    x: np.ndarray
    y: np.ndarray
    """(network, x) or, with groups, (network, group, x)."""
    groups: list[str] = field(default_factory=list)
    group_dim: str = ""
    overlay: Curves | None = None
    """Drawn with a single network: the ``plot_overlay`` variable (e.g. a loss per epoch, at each epoch's last step)."""

    def has_data(self, net: int) -> bool:
        return net < self.y.shape[0] and bool(np.isfinite(self.y[net]).any())


def with_units(name: str, units: str) -> str:
    """``name [units]``; no brackets for a pure number (units "1" or none) or where the name says
    them already ("step t", "epoch")."""
    said = units.lower().rstrip("s") in name.lower().split()
    return name if units in ("", "1") or said else f"{name} [{units}]"


def axis_label(coord) -> str:
    """The x label of a plot against ``coord``: its ``long_name``, and for a count of steps or epochs
    what it counts, ``step t (steps)`` (a name that only says "step" names the axis, not its unit),
    unless the name has it already; other coordinates ``long_name [units]``."""
    name = str(coord.attrs.get("long_name", coord.name))
    what = counted(coord.attrs)
    if what:
        return name if f"({what})" in name else f"{name} ({what})"
    return with_units(name, str(coord.attrs.get("units", "")))


def _thin(var, dim: str, max_points: int):
    n = var.sizes[dim]
    return var.isel({dim: slice(None, None, -(-n // max_points))}) if n > max_points else var


def read_curves(ds, labels: list[str], max_points: int = 1000) -> dict[str, Curves]:
    """The curve variables of ``ds`` (plot hint ``curve``) by their dims, keyed as ``v`` cycles through them."""
    out: dict[str, Curves] = {}
    names = sorted((n for n, v in ds.data_vars.items() if is_curve(v.attrs)),
                   key=lambda n: (int(internal(ds[n].attrs).get("plot_order", 100)), n))
    for name in names:
        var = ds[name]
        dims = tuple(var.dims)
        base = dict(long_name=str(var.attrs.get("long_name", name)), units=str(var.attrs.get("units", "")),
                    networks=labels)
        if len(dims) == 2:
            var = _thin(var, dims[1], max_points)
            out[name] = Curves(name, x_label=axis_label(var[dims[1]]), x=_num(var[dims[1]]), y=_num(var), **base)
        elif len(dims) == 3:
            out[name] = _per_checkpoint(name, var, var, base)
        elif len(dims) == 4:
            for q in var[dims[2]].values:
                sub = var.sel({dims[2]: q})
                out[f"{name}:{q}"] = _per_checkpoint(f"{name}:{q}", sub, var, dict(
                    base, long_name=f"{base['long_name']}, {q}"))
    for name, curves in out.items():
        overlay = internal(ds[name].attrs).get("plot_overlay") if name in ds.data_vars else None
        if overlay in out:
            curves.overlay = _at_epoch_ends(ds, out[overlay])
    return out


def _per_checkpoint(key: str, var, full, base: dict) -> Curves:
    gdim = var.dims[-1]
    step = var["step"] if "step" in var.coords else var["checkpoint"]
    y = np.moveaxis(_num(var), 1, -1)  # (network, group, checkpoint)
    return Curves(key, x_label=axis_label(step), x=_num(step), y=y,
                  groups=[str(g) for g in full[gdim].values], group_dim=gdim.replace("_", " "), **base)


def _at_epoch_ends(ds, val: Curves) -> Curves | None:
    """An overlay over epochs (a validation loss) placed at the step that ends each epoch: steps per
    epoch from the ``step`` and fractional ``epoch`` coordinates of the checkpoints, else the
    ``train_step`` length over the ``training_epoch`` length (the training-time axes of
    :mod:`runner.checkpointed.axes`)."""
    spe = None
    if "step" in ds.coords and "epoch" in ds.coords:
        step, epoch = _num(ds["step"]), _num(ds["epoch"])
        ok = epoch > 0
        if ok.any():
            spe = float(np.median(step[ok] / epoch[ok]))
    if spe is None and ds.sizes.get("training_epoch"):
        spe = ds.sizes.get("train_step", 0) / ds.sizes["training_epoch"]
    if not spe:
        return None
    return Curves(val.key, val.long_name, val.units, val.x_label, val.networks, x=val.x * spe, y=val.y)


def _num(a) -> np.ndarray:
    return np.asarray(a.values, dtype=np.float64)


@dataclass
class Line:
    label: str
    color: int
    x: np.ndarray
    y: np.ndarray
    marker: str = "braille"


def lines(c: Curves, network: int | None, group: str | None) -> tuple[str, list[Line]]:
    """The lines to draw and what they are (for the title)."""
    nets = range(len(c.networks))
    if not c.groups:
        chosen = list(nets) if network is None else [network]
        out = [_line(c.networks[i], i, c.x, c.y[i]) for i in chosen if c.has_data(i)]
        if network is not None and c.overlay is not None and c.overlay.has_data(network):
            out.append(_line(f"{c.networks[network]} {c.overlay.long_name}", network + 1,
                             c.overlay.x, c.overlay.y[network], "dot"))
        return ("per network" if network is None else c.networks[network]), out
    g = c.groups.index(group) if group in c.groups else None
    if g is not None and network is None:
        return f"{group}, per network", [_line(c.networks[i], i, c.x, c.y[i, g]) for i in nets]
    if network is None:
        network = next((i for i in nets if c.has_data(i)), 0)
    if g is not None:
        return f"{c.networks[network]}, {group}", [_line(group, g, c.x, c.y[network, g])]
    return (f"{c.networks[network]}, per {c.group_dim}",
            [_line(name, k, c.x, c.y[network, k]) for k, name in enumerate(c.groups)])


def _line(label: str, color: int, x: np.ndarray, y: np.ndarray, marker: str = "braille") -> Line:
    ok = np.isfinite(x) & np.isfinite(y)
    return Line(label, color, x[ok], y[ok], marker)
