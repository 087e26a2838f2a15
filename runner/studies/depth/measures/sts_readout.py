"""STS-B readout of x_t at each step (Inoue et al. 2021, Fig. 3B, Appendix B).

The samples are sentence pairs with their annotated score (``[input] pair`` and ``score``, e.g.
GLUE STS-B by hub id or a local file), encoded as ``[CLS] a [SEP] b [SEP]`` (the paper: "two
sentences separated by a special token [SEP]"). At each kept step t, a linear readout of the state
of one token (``token``, default 0: ``[CLS]``, the position GLUE heads read; the paper does not say
which vector of x_t it reads) is trained to the scores with Adam for ``epochs`` = 10 at ``lr`` =
1e-3 (Appendix B, "fixed" setting: f unchanged) on the first ``train_fraction`` of the samples,
and Pearson's r between its outputs and the scores of the other samples is kept
(``analyses/sts.py``). The readouts of up to a block of steps are trained together on the device
(one Adam over their stacked weights), when the block fills or the segment ends; the scores and
the minibatch order go to the device once per pass: no host sync per step.

Where this differs from the paper: the held-out pairs are the last ``1 - train_fraction`` of the
spec's draw rather than GLUE's validation split (draw from ``split = "train"``; 0.8 is about
STS-B's train : validation ratio, 5749 : 1500); the minibatch size (32) and zero initial weights
are not given by the paper. The paper's *fine-tuned network* (Fig. 3B dashed, lr 1e-6) trains the
encoder f itself for every t, i.e. back-propagation through t applications of f per step: that is
a training run per step, not a readout of the fixed trajectory, and is not done here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from analyses.sts import minibatch_orders, pearson, readout_predictions, train_linear_readouts
from runner.plugin.measures import MeasureTags, StepTags, hints
from runner.plugin.timings import StepMeasure
from runner.studies.depth.measure import PAPER, STUDY, DepthParams, PassContext
from runner.studies.depth.resolve import derive_seed

if TYPE_CHECKING:
    import torch

#: Bytes of staged states per trained block of steps.
BLOCK_BYTES = 1 << 28


class Params(DepthParams):
    """Pearson r of a linear readout of x_t trained on STS-B scores (Fig. 3B, fixed setting); needs
    sentence pairs ([input] pair, score)."""

    kind: Literal["sts_readout"]
    start: int = Field(0, ge=0)
    """First step read out."""
    stop: int | None = Field(None, ge=0)
    """Last step read out (default: the last step of the run)."""
    every: int = Field(1, ge=1)
    """Steps between read-outs (the paper: every step)."""
    token: int = Field(0, ge=0)
    """Token position read out (0: [CLS])."""
    epochs: int = Field(10, ge=1)
    """Training epochs of each readout (Appendix B: 10)."""
    lr: float = Field(1e-3, gt=0)
    """Adam's learning rate (Appendix B, fixed setting: 1e-3)."""
    batch_size: int = Field(32, ge=1)
    """Minibatch size (not given by the paper)."""
    train_fraction: float = Field(0.8, gt=0, lt=1)
    """The first samples the readout is trained on; it is scored on the rest."""
    seed: int = 0
    """Seed of the minibatch order (with the experiment seed)."""


def pair_problems(kind: str, p, spec) -> list[tuple[str, str]]:
    """What an STS-B measure (``sts_readout``, ``sts_finetune``) needs of the spec: scored sentence pairs,
    a train/held-out split of at least 2 each, and a token inside the sample."""
    out = []
    if spec.input.score is None or not spec.text_models:
        out.append(("kind", f"{kind} reads sentence pairs with a score: set [input] pair and score (e.g. GLUE "
                            "STS-B: pair = [\"sentence1\", \"sentence2\"], score = \"label\") and a text model"))
    n = int(p.train_fraction * spec.input.samples)
    if not 2 <= n <= spec.input.samples - 2:
        out.append(("train_fraction", f"{p.train_fraction} of {spec.input.samples} samples leaves {n} to train "
                                      f"on and {spec.input.samples - n} to score; both must be at least 2"))
    if p.token >= spec.input.tokens:
        out.append(("token", f"{p.token} is beyond the {spec.input.tokens} tokens of a sample"))
    return out


def minibatch_seed(spec, p) -> int:
    """The seed of the readouts' minibatch order (shared by ``sts_readout`` and ``sts_finetune``)."""
    return derive_seed(spec.experiment.seed, "sts_readout", p.seed)


# exit_period 1: it observes x_t only (its readouts are fitted to the stored states, not through f)
class STSReadout(StepMeasure, study=STUDY, reference=PAPER, params=Params,
                 tags=MeasureTags("step", requires=("text",), step=StepTags(strides=("every",), exit_period=1))):
    def window(self, steps: int) -> tuple[int, int]:
        return self.p.start, steps if self.p.stop is None else self.p.stop

    def problems(self, view):
        return super().problems(view) + self._spec_problems(view.spec)

    def _spec_problems(self, spec):
        out = pair_problems("sts_readout", self.p, spec)
        start, stop = self.window(spec.dynamics.steps)
        if not start <= stop <= spec.dynamics.steps:
            out.append(("stop" if self.p.stop is not None else "start",
                        f"need start <= stop <= [dynamics] steps ({spec.dynamics.steps}); got {start}, {stop}"))
        return out

    def variables(self, b, shape) -> None:
        start, stop = self.window(shape.steps)
        dim = b.axis("sts_step", start, stop, self.p.every)
        b.var("sts_pearson", "sts_readout", ("network", dim), "float64", np.nan, "STS-B Pearson r (fixed f)", "1",
              "Pearson r between the held-out sentence pairs' scores and a linear readout [x_t[token], 1] w trained on "
              "the others' (MSE, Adam, `epochs` epochs at `lr`; Fig. 3B, Appendix B); NaN for reference maps, and "
              "where the read state does not vary across pairs (x_0 of [CLS]: the same embedding for every pair)",
              token=self.p.token, epochs=self.p.epochs, lr=self.p.lr, train_fraction=self.p.train_fraction,
              **hints(plot="series", order=42, headline=("mean STS-B Pearson r", "finite_mean")))

    def _kept(self, seg) -> tuple[int, int]:
        start, stop = self.window(seg.steps)

        def below(u: int) -> int:
            return 0 if u <= start else min((u - 1 - start) // self.p.every + 1, (stop - start) // self.p.every + 1)

        return below(seg.start), below(seg.end + (1 if seg.last else 0))

    def buffers(self, ctx: PassContext, seg):
        import torch  # lazy: torch

        lo, hi = self._kept(seg)
        self.block: list[torch.Tensor] = []
        return {"r": self.nan((hi - lo,), torch.float64, ctx.device)}

    def observe(self, ctx: PassContext, t, x, bufs, seg):
        start, stop = self.window(seg.steps)
        if ctx.net.model.is_map or ctx.inputs.scores is None or not start <= t <= stop or (t - start) % self.p.every:
            return
        if not self.block:
            self.first = (t - start) // self.p.every - self._kept(seg)[0]  # the block's kept steps are consecutive
        self.block.append(x[:, self.p.token].clone())
        if len(self.block) * x.shape[0] * x.shape[-1] * 4 >= BLOCK_BYTES:
            self._fit(ctx, bufs)

    def _fit(self, ctx, bufs) -> None:
        """Train the readouts of the staged steps together and keep their held-out Pearson r."""
        import torch  # lazy: torch

        if not self.block:
            return
        x = torch.stack(self.block)
        n = int(self.p.train_fraction * x.shape[1])
        if not hasattr(self, "orders"):  # copied to the device once per pass
            self.y = ctx.inputs.scores.to(ctx.device)
            seed = minibatch_seed(ctx.spec, self.p)
            self.orders = minibatch_orders(n, self.p.epochs, seed).to(ctx.device)
        w = train_linear_readouts(x[:, :n], self.y[:n], lr=self.p.lr, batch_size=self.p.batch_size, orders=self.orders)
        bufs["r"][self.first:self.first + len(self.block)] = pearson(readout_predictions(w, x[:, n:]), self.y[n:])
        self.block = []

    def write(self, ctx: PassContext, bufs, seg):
        self._fit(ctx, bufs)
        lo, hi = self._kept(seg)
        if hi > lo:
            ctx.store.write("sts_pearson", (ctx.index, slice(lo, hi)), bufs["r"].cpu().numpy())
