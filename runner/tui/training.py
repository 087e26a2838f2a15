"""What the plots view shows of a training store: curves per step or epoch, measures per checkpoint.

No Textual import. :func:`read_training` turns an open dataset into :class:`Curves` (one per plotted
variable, NaN kept: unfinished checkpoints are NaN and are skipped when drawn); :func:`lines` picks
the lines to draw for a network and a layer selection:

- loss curves (``train_loss`` per step, ``val_loss`` / ``val_perplexity`` per epoch): one line per
  network, or the selected network (``train_loss`` then also shows ``val_loss`` at each epoch's end);
- measures per checkpoint (``svcca_final`` ..., ``chi_mean`` per quantity, ``lca``): one line per
  layer (or parameter group) for one network (the selected one; with "all", the first with values),
  or, with a layer selected, one line per network for that layer. x is the checkpoint's ``step``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Offered in this order when the store has them; other (network, checkpoint, layer-like) variables follow.
ORDER = ("train_loss", "val_loss", "val_perplexity", "svcca_final", "pwcca_final", "cka_final",
         "chi_mean:activation", "chi_mean:gradient", "lca")
GROUP_DIMS = ("layer", "parameter_group")


def is_training(names) -> bool:
    return "train_loss" in names


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
    """Drawn with a single network: validation loss at each epoch's last step, on ``train_loss``."""

    def has_data(self, net: int) -> bool:
        return net < self.y.shape[0] and bool(np.isfinite(self.y[net]).any())


def _label(coord) -> str:
    units = str(coord.attrs.get("units", ""))
    name = str(coord.attrs.get("long_name", coord.name))
    return name if units in ("", "1") else f"{name} [{units}]"


def _thin(var, max_points: int):
    n = var.sizes["train_step"]
    return var.isel(train_step=slice(None, None, -(-n // max_points))) if n > max_points else var


def read_training(ds, labels: list[str], max_points: int = 1000) -> dict[str, Curves]:
    out: dict[str, Curves] = {}
    for name, var in ds.data_vars.items():
        dims = tuple(var.dims)
        if dims[:1] != ("network",) or np.dtype(var.dtype).kind != "f":
            continue
        base = dict(long_name=str(var.attrs.get("long_name", name)), units=str(var.attrs.get("units", "")),
                    networks=labels)
        if dims == ("network", "train_step"):
            var = _thin(var, max_points)
            out[name] = Curves(name, x_label=_label(var["train_step"]), x=_num(var["train_step"]),
                               y=_num(var), **base)
        elif dims == ("network", "training_epoch"):
            out[name] = Curves(name, x_label=_label(var["training_epoch"]), x=_num(var["training_epoch"]),
                               y=_num(var), **base)
        elif len(dims) == 3 and dims[1] == "checkpoint" and dims[2] in GROUP_DIMS:
            out[name] = _per_checkpoint(name, var, var, base)
        elif dims[1:] == ("checkpoint", "quantity", "layer"):
            for q in var["quantity"].values:
                sub = var.sel(quantity=q)
                out[f"{name}:{q}"] = _per_checkpoint(f"{name}:{q}", sub, var, dict(
                    base, long_name=f"{base['long_name']}, {q}"))
    if "train_loss" in out and "val_loss" in out:
        out["train_loss"].overlay = _val_at_steps(ds, out["val_loss"])
    order = {k: i for i, k in enumerate(ORDER)}
    return dict(sorted(out.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


def _per_checkpoint(key: str, var, full, base: dict) -> Curves:
    gdim = var.dims[-1]
    step = var["step"] if "step" in var.coords else var["checkpoint"]
    y = np.moveaxis(_num(var), 1, -1)  # (network, group, checkpoint)
    return Curves(key, x_label=_label(step), x=_num(step), y=y,
                  groups=[str(g) for g in full[gdim].values], group_dim=gdim.replace("_", " "), **base)


def _val_at_steps(ds, val: Curves) -> Curves | None:
    """Validation loss at the optimizer step that ends each epoch (steps per epoch from the checkpoints'
    step and fractional epoch, else train steps over epochs)."""
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
