"""A 2-D Isomap of the analysis sentence's token representations at every layer (Fig. 6)."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from analyses.isomap import isomap_2d
from runner.plugin.measures import MeasureParams
from runner.plugin.timings import CheckpointMeasure
from runner.studies.transject.measure import PAPER, STUDY, EpochContext


class Params(MeasureParams):
    """Isomap (Tenenbaum et al. 2000) of the analysis sentence's tokens, one embedding per layer (Fig. 6)."""

    kind: Literal["isomap"]
    n_neighbors: int = Field(5, ge=1)
    """Neighbours of the k-NN graph (scikit-learn's default: 5)."""


class IsomapMeasure(CheckpointMeasure, study=STUDY, reference=PAPER, params=Params):
    def variables(self, b, shape) -> None:
        b.index("token", len(shape.sentence), long_name="position in the analysis sentence")
        b.coord("token_text", list(shape.sentence), ("token",), long_name="token of the analysis sentence")
        b.coord("component", ["x", "y"], long_name="Isomap component")
        b.var("isomap", "isomap", ("network", "checkpoint", "layer", "token", "component"), "float64", np.nan,
              "Isomap coordinate", "1", "2-D Isomap of the sentence's token vectors x_i^(l), each layer on its own "
              "(Fig. 6); unique up to an isometry of the plane", n_neighbors=self.p.n_neighbors)

    def run(self, ctx: EpochContext, task) -> None:
        view = ctx.view(task.network, task.checkpoint)
        L, T = ctx.n_layers, ctx.layout.coords["token"].size
        out = np.full((L, T, 2), np.nan)
        for layer, h in enumerate(view.sentence):
            n = min(T, h.shape[0])
            out[layer, :n] = isomap_2d(h[:n], self.p.n_neighbors)
        ctx.write("isomap", task, out)
