"""The training-time axes of a store and its loss curves, declared once for every checkpointed study.

Dimensions: ``checkpoint`` (with ``step`` and ``epoch``), ``train_step`` (curves per logged optimizer
step), ``training_epoch`` (curves per epoch) and ``layer``; the ``checkpoint_path`` of each
(network, checkpoint) and the training loss per step. Chunks follow the layout builder's unit.
"""

from __future__ import annotations

import numpy as np

from runner.core.layout import LayoutBuilder, counts
from runner.plugin.measures import hints

UNIT = frozenset({"network", "checkpoint"})
"""The layout builder's ``unit`` of every checkpointed study: one chunk per network and checkpoint, so that
each chunk has one writing task (a measure task per checkpoint)."""


def declare_axes(b: LayoutBuilder, steps: list[int], steps_per_epoch: int, epochs: int, layers: list[str], *,
                 log_every: int = 1, checkpoint_meaning: str = "checkpoint index",
                 epoch_meaning: str = "epoch (fractional)",
                 layer_meaning: str = "layer whose output is measured") -> None:
    """Checkpoint k at optimizer step ``steps[k]`` (epoch ``steps[k] / steps_per_epoch``); curves every
    ``log_every`` steps and every epoch; ``layers`` (the names of the measured layers)."""
    step_values = np.asarray(steps, dtype=np.int64)
    b.coord("checkpoint", np.arange(len(step_values)), long_name=checkpoint_meaning)
    b.coord("step", step_values, ("checkpoint",), long_name="optimizer step", **counts("steps"))
    b.coord("epoch", step_values / steps_per_epoch, ("checkpoint",), long_name=epoch_meaning, **counts("epochs"))
    total = steps_per_epoch * epochs
    b.coord("train_step", np.arange(log_every, total + 1, log_every, dtype=np.int64), long_name="optimizer step",
            **counts("steps"))
    b.coord("training_epoch", np.arange(1, epochs + 1), long_name="epoch", **counts("epochs"))
    b.coord("layer", layers, long_name=layer_meaning)


def declare_checkpoint_path(b: LayoutBuilder, description: str) -> None:
    b.var("checkpoint_path", "train", ("network", "checkpoint"), str, "", "checkpoint file", None, description)


def declare_curve(b: LayoutBuilder, name: str, per: str, long_name: str, units: str, description: str,
                  order: int, overlay: str | None = None, **attrs) -> None:
    """A float32 curve of the training task, per logged ``"step"`` or per ``"epoch"``, drawn as a curve."""
    dims = ("network", "train_step" if per == "step" else "training_epoch")
    b.var(name, "train", dims, "float32", np.nan, long_name, units, description, **attrs,
          **hints(plot="curve", order=order, overlay=overlay))


def declare_train_loss(b: LayoutBuilder, per: str, description: str, overlay: str) -> None:
    """The training loss, in nats per ``per`` (``"token"``, ``"example"``): dimensionless, units "1"."""
    declare_curve(b, "train_loss", "step", f"training loss (nats per {per})", "1", description, 0, overlay)


def write_curves(store, network: int, series: dict[str, list[float]]) -> None:
    """Write each non-empty series (variable name -> values from the first) of a network's curves."""
    for name, values in series.items():
        if len(values):
            store.write(name, (network, slice(0, len(values))), np.asarray(values, dtype=np.float32))
