"""Effective dimension N_eff(t) of the state cloud across samples (Inoue et al. 2021, Eq. 6, Fig. 2C);
with ``by_score``, also of each class of sentence pairs by annotated score (Fig. A1 right: STS-B
pairs in 5 classes; here [0, 1), [1, 2), [2, 3), [3, 4), [4, 5], the paper does not give the bounds)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from analyses.effective_dimension import cloud_statistics, effective_dimension, effective_dimension_from_statistics
from runner.plugin.measures import MeasureTags, StepTags, hints
from runner.plugin.timings import StepMeasure
from runner.studies.depth.measure import PAPER, STUDY, DepthParams, PassContext

if TYPE_CHECKING:
    import torch


class Params(DepthParams):
    """Effective dimension N_eff(t) of the state cloud across samples (Eq. 6, Fig. 2C)."""

    kind: Literal["effective_dimension"]
    every: int = Field(1, ge=1)
    by_score: bool = False
    """Also N_eff of each score class of sentence pairs ([input] score; Fig. A1 right)."""

    def params(self):
        out = super().params()
        if not self.by_score:  # older task ids stand
            out.pop("by_score")
        return out


#: Score classes of Fig. A1 (lower bounds; the last class includes 5).
SCORE_CLASSES = (0, 1, 2, 3, 4)


def score_class(scores: torch.Tensor) -> torch.Tensor:
    """The class index 0..4 of each score (floor, 5 in the last class)."""
    return scores.floor().clamp(0, len(SCORE_CLASSES) - 1).long()


# shard "combine": a shard keeps (n, sum, sum of outer products) per kept step: exact, F^2 each;
# exit_period 1, extends: N_eff(t) reads x_t alone
class EffectiveDimension(StepMeasure, study=STUDY, reference=PAPER, params=Params,
                         tags=MeasureTags("step", step=StepTags(strides=("every",), shard="combine", exit_period=1,
                                                                extends=True))):
    precision_checked = {"tf32": True, "bf16": False}
    STATS = ("n", "sum", "scatter")
    MAX_STATISTIC = 2**28
    """Bytes of one F x F statistic above which shards are refused (256 MiB: F above ~5,800)."""

    def variables(self, b, shape) -> None:
        dim = b.axis("neff_step", 0, shape.steps, self.p.every)
        b.var("effective_dimension", "effective_dimension", ("network", dim), "float64", np.nan,
              "effective dimension N_eff(t)", "1",
              "N_eff = (sum_i s_i)^2 / sum_i s_i^2, s_i eigenvalues of the state covariance across samples (Eq. 6)",
              **hints(plot="series", order=1, headline=("N_eff at the end", "last")))
        if self.p.by_score:
            b.coord("score_class", [f"{c}-{c + 1}" for c in SCORE_CLASSES], long_name="annotated score class")
            b.var("effective_dimension_class", "effective_dimension", ("network", "score_class", dim), "float64", np.nan,
                  "effective dimension N_eff(t) per score class", "1",
                  "N_eff (Eq. 6) of the samples whose score lies in the class (floor of the score; 5 in 4-5), Fig. A1; "
                  "NaN for reference maps")

    def problems(self, view):
        out = super().problems(view) + self._spec_problems(view.spec)
        if view.shards > 1:  # apply --shards asks before it splits a pass
            out += [("every", f"{net.label}: {why}") for net in view.networks if (why := self._shard_problem(net))]
        return out

    def _spec_problems(self, spec):
        if self.p.by_score and spec.input.score is None:
            return [("by_score", "needs sentence pairs with a score ([input] pair and score)")]
        return []

    def _shard_problem(self, net):
        """Why a pass of ``net`` cannot be split into sample shards, or None."""
        n_tokens, n_hidden = net.n_tokens, net.n_hidden
        if not n_hidden:
            return None
        if self.p.by_score:
            return "by_score needs every sample's score class in one pass; run it unsharded"
        features = n_tokens * n_hidden
        if features * features * 8 > self.MAX_STATISTIC:
            return (f"its per-shard statistic is a {features} x {features} matrix per kept step ({n_tokens} tokens x "
                    f"{n_hidden}); too large to combine, run it unsharded")
        return None

    def buffers(self, ctx: PassContext, seg):
        import torch  # lazy: torch

        if ctx.sharded:
            return {k: [] for k in self.STATS}
        out = {"neff": self.nan((seg.kept(self.p.every),), torch.float64, ctx.device)}
        if self.p.by_score:
            out["class"] = self.nan((len(SCORE_CLASSES), seg.kept(self.p.every)), torch.float64, ctx.device)
            if not hasattr(self, "classes"):  # index tensors made once (host side, once per pass)
                text = ctx.inputs.scores is not None and not ctx.net.model.is_map  # a map's samples have no score
                cls = score_class(ctx.inputs.scores) if text else None
                self.classes = [] if cls is None else [(cls == c).nonzero().flatten().to(ctx.device)
                                                       for c in range(len(SCORE_CLASSES))]
        return out

    def observe(self, ctx: PassContext, t, x, bufs, seg):
        every = self.p.every
        if t % every == 0 and ctx.sharded:
            for k, v in zip(self.STATS, cloud_statistics(x)):
                bufs[k].append(v)
        elif t % every == 0:
            i = t // every - seg.start // every
            bufs["neff"][i] = effective_dimension(x)
            for c, rows in enumerate(getattr(self, "classes", []) if self.p.by_score else []):
                bufs["class"][c, i] = effective_dimension(x[rows])

    def write(self, ctx: PassContext, bufs, seg):
        import torch  # lazy: torch

        if ctx.sharded:
            kept = len(bufs["n"])
            for k in self.STATS:
                ctx.store.write(f"effective_dimension/{k}", (ctx.index, seg.span(self.p.every, kept)),
                                torch.stack(bufs[k]).cpu().numpy())
            return
        n = bufs["neff"].cpu().numpy()
        ctx.store.write("effective_dimension", (ctx.index, seg.span(self.p.every, len(n))), n)
        if self.p.by_score:
            ctx.store.write("effective_dimension_class", (ctx.index, slice(None), seg.span(self.p.every, len(n))),
                            bufs["class"].cpu().numpy())

    @classmethod
    def combine(cls, stats):
        import torch  # lazy: torch

        summed = [torch.from_numpy(np.sum(stats[k], axis=0)) for k in cls.STATS]
        return {"effective_dimension": effective_dimension_from_statistics(*summed).numpy()}
