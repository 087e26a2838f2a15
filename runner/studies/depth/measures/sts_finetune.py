"""STS-B with the fine-tuned network (Inoue et al. 2021, Fig. 3B dashed lines, Appendix B).

"In addition to the initial and pre-trained networks with *fixed* parameters of the Transformer's
encoder f, we examined the performance of the *fine-tuned* network where the parameters of f were
also fine-tuned for the task", with learning rate 1e-6 for 10 epochs (Appendix B). For each step t
in ``steps``, a fresh copy of the network's shared layer f and a linear readout of x_t[token] are
trained together, back-propagating through the t applications of f from the fixed embeddings x_0
(``analyses.sts.finetune_readout``), on the same pairs, split and minibatch order as ``sts_readout``;
the held-out Pearson r is kept. Each t is a training run, so it is one task per network, not part
of the trajectory's pass; a stopped task keeps the t already done and computes only the others.

Not given by the paper: the steps it fine-tuned at (the default is a log-like grid to 96), whether
the embeddings were tuned too (here only f, as the text says), and the readout's learning rate
(``readout_lr``, default the same 1e-6).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from analyses.sts import finetune_readout, minibatch_orders
from runner.plugin.measures import MeasureTags, hints
from runner.plugin.timings import NetworkMeasure
from runner.studies.depth.measure import PAPER, STUDY, DepthParams
from runner.studies.depth.measures.sts_readout import minibatch_seed, pair_problems
from runner.plugin.measure_protocol import NetworkContext

DEFAULT_STEPS = [1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96]


class Params(DepthParams):
    """Pearson r of STS-B after fine-tuning f and a linear readout of x_t (Fig. 3B dashed); needs
    sentence pairs ([input] pair, score)."""

    kind: Literal["sts_finetune"]
    steps: list[int] = Field(default_factory=lambda: list(DEFAULT_STEPS), min_length=1)
    """Steps t at which f is fine-tuned (each is a training run through t applications of f)."""
    token: int = Field(0, ge=0)
    """Token position read out (0: [CLS])."""
    epochs: int = Field(10, ge=1)
    """Training epochs (Appendix B: 10)."""
    lr: float = Field(1e-6, ge=0)
    """Adam's learning rate for f (Appendix B, fine-tuned setting: 1e-6)."""
    readout_lr: float | None = Field(None, ge=0)
    """Adam's learning rate for the readout (default: ``lr``)."""
    batch_size: int = Field(32, ge=1)
    """Minibatch size (not given by the paper; as sts_readout)."""
    train_fraction: float = Field(0.8, gt=0, lt=1)
    """The first samples it is trained on; it is scored on the rest (as sts_readout)."""
    seed: int = 0
    """Seed of the minibatch order (with the experiment seed; the same order as sts_readout's)."""


class STSFinetune(NetworkMeasure, study=STUDY, reference=PAPER, params=Params,
                  tags=MeasureTags("network", requires=("text",))):
    def problems(self, view):
        return super().problems(view) + self._spec_problems(view.spec)

    def _spec_problems(self, spec):
        out = pair_problems("sts_finetune", self.p, spec)
        if sorted(set(self.p.steps)) != self.p.steps or self.p.steps[0] < 1:
            out.append(("steps", "give distinct steps >= 1 in increasing order"))
        elif self.p.steps[-1] > spec.dynamics.steps:
            out.append(("steps", f"step {self.p.steps[-1]} is beyond [dynamics] steps = {spec.dynamics.steps}; "
                                 "the network is iterated only that far"))
        return out

    def variables(self, b, shape) -> None:
        b.coord("sts_finetune_step", np.asarray(self.p.steps, dtype=np.int64), long_name="step t fine-tuned at")
        b.var("sts_finetuned_pearson", "sts_finetune", ("network", "sts_finetune_step"), "float64", np.nan,
              "STS-B Pearson r (fine-tuned f)", "1",
              "Pearson r on the held-out pairs after f and a linear readout of x_t[token] were trained together "
              "(Adam, `epochs` epochs at `lr`; Fig. 3B dashed, Appendix B); NaN for reference maps",
              token=self.p.token, epochs=self.p.epochs, lr=self.p.lr,
              readout_lr=self.p.lr if self.p.readout_lr is None else self.p.readout_lr,
              **hints(plot="series", order=43))

    def run(self, ctx: NetworkContext) -> None:
        import torch  # lazy: torch
        from models.base import MapStep  # lazy: torch

        if ctx.net.model.is_map or ctx.inputs.scores is None:
            return
        p = self.p
        done = ctx.store.read("sts_finetuned_pearson", (ctx.index,))
        ids = ctx.inputs.input_ids.to(ctx.device)
        n = int(p.train_fraction * ids.shape[0])
        orders = minibatch_orders(n, p.epochs, minibatch_seed(ctx.spec, p)).to(ctx.device)  # sts_readout's order
        mask = ctx.inputs.attention_mask
        if mask is not None and not bool(mask.all()):
            raise ValueError("sts_finetune needs sentence pairs that fill every token (as [input] pair draws them)")
        for k, t in enumerate(p.steps):
            if np.isfinite(done[k]):  # a stopped run's finished steps
                continue
            amap = ctx.build()
            with torch.no_grad():
                x0 = amap.embed(ids)
            amap.layer.requires_grad_(True)  # f only: the embeddings stay as they are
            r = finetune_readout(MapStep(amap), x0, ctx.inputs.scores, t, n_train=n, token=p.token, epochs=p.epochs,
                                 lr=p.lr, readout_lr=p.readout_lr, batch_size=p.batch_size, orders=orders)
            ctx.store.write("sts_finetuned_pearson", (ctx.index, slice(k, k + 1)), np.asarray([float(r)]))
