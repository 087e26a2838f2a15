"""Effective dimension N_eff(t) of the state cloud across samples (Inoue et al. 2021, Eq. 6, Fig. 2C)."""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from pydantic import Field

from analyses.effective_dimension import cloud_statistics, effective_dimension, effective_dimension_from_statistics
from runner.measures import hints, register
from runner.studies.depth.measure import DepthParams, TrajectoryMeasure


class Params(DepthParams):
    """Effective dimension N_eff(t) of the state cloud across samples (Eq. 6, Fig. 2C)."""

    kind: Literal["effective_dimension"]
    every: int = Field(1, ge=1)


@register
class EffectiveDimension(TrajectoryMeasure):
    Params = Params
    shard = "combine"  # a shard keeps (n, sum, sum of outer products) per kept step: exact, F^2 each
    STATS = ("n", "sum", "scatter")
    MAX_STATISTIC = 2**28
    """Bytes of one F x F statistic above which shards are refused (256 MiB: F above ~5,800)."""

    def variables(self, b, shape) -> None:
        dim = b.axis("neff_step", 0, shape.steps, self.p.every)
        b.var("effective_dimension", "effective_dimension", ("network", dim), "float64", np.nan,
              "effective dimension N_eff(t)", "1",
              "N_eff = (sum_i s_i)^2 / sum_i s_i^2, s_i eigenvalues of the state covariance across samples (Eq. 6)",
              **hints(plot="series", order=1, headline=("N_eff at the end", "last")))

    def shard_problem(self, n_tokens, n_hidden):
        features = n_tokens * n_hidden
        if features * features * 8 > self.MAX_STATISTIC:
            return (f"its per-shard statistic is a {features} x {features} matrix per kept step ({n_tokens} tokens x "
                    f"{n_hidden}); too large to combine, run it unsharded")
        return None

    def buffers(self, ctx, seg):
        if ctx.sharded:
            return {k: [] for k in self.STATS}
        return {"neff": self.nan((seg.kept(self.p.every),), torch.float64, ctx.device)}

    def observe(self, ctx, t, x, bufs, seg):
        every = self.p.every
        if t % every == 0 and ctx.sharded:
            for k, v in zip(self.STATS, cloud_statistics(x)):
                bufs[k].append(v)
        elif t % every == 0:
            bufs["neff"][t // every - seg.start // every] = effective_dimension(x)

    def write(self, ctx, bufs, seg):
        if ctx.sharded:
            kept = len(bufs["n"])
            for k in self.STATS:
                ctx.store.write(f"effective_dimension/{k}", (ctx.index, seg.span(self.p.every, kept)),
                                torch.stack(bufs[k]).cpu().numpy())
            return
        n = bufs["neff"].cpu().numpy()
        ctx.store.write("effective_dimension", (ctx.index, seg.span(self.p.every, len(n))), n)

    @classmethod
    def combine(cls, stats):
        summed = [torch.from_numpy(np.sum(stats[k], axis=0)) for k in cls.STATS]
        return {"effective_dimension": effective_dimension_from_statistics(*summed).numpy()}
