"""Masked-language-model readout of x_t at each step (Inoue et al. 2021, Fig. 3A, Appendix A).

The masked tokens are part of the input: with this measure in a spec, the study replaces the
chosen tokens (``fraction`` of each sentence's non-special tokens, seeded, never a special token)
by the tokenizer's mask token in x_0 of every text model, for every measure of the spec (they all
see the same masked sentences; the masking is part of the text networks' trajectory key, so a
spec without this measure keeps its task ids and stores). ``input_masked`` records the positions.

Fixed setting: ALBERT's pre-trained MLM head (transformers' ``AlbertMLMHead`` of
``AlbertForMaskedLM``, loaded from the network's checkpoint, for initial networks too: the paper's
public decoder; with ``head = "own"`` an initial network's head is drawn with its init scheme and
tied to its redrawn word embeddings) is applied to x_t at the masked positions, on the device, in
the pass that computes x_t; the accuracy of its arg-max is kept.

Fine-tuned setting (``refit``): a linear decoder with a bias, fitted afresh at each step on the
masked positions of the first ``train_fraction`` of the samples (closed-form ridge regression on
one-hot targets, on the device; the paper re-trains a softmax regression) and scored on the
others. The fixed head is scored on every sample's masked tokens.

Networks without an MLM head (reference maps) are skipped: their values are NaN (a spec whose
models are all maps is refused, there would be nothing to measure).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from analyses.readout import (
    choose_masked,
    masked_token_accuracy,
    ridge_readout_accuracy,
)
from models.registry import AlbertFamily
from runner.plugin.measures import MeasureTags, StepTags, hints
from runner.plugin.timings import StepMeasure
from runner.studies.depth.measure import PAPER, STUDY, DepthParams, PassContext
from runner.studies.depth.resolve import derive_seed


class Params(DepthParams):
    """Masked-token accuracy of readouts of x_t (Fig. 3A): ALBERT's own pre-trained MLM head (fixed)
    and a linear decoder re-fitted at each step (refit). The spec's sentences are masked for every
    measure of the spec (input_masked); reference maps are NaN."""

    kind: Literal["mlm_readout"]
    start: int = Field(0, ge=0)
    """First step read out."""
    stop: int | None = Field(None, ge=0)
    """Last step read out (default: the last step of the run)."""
    every: int = Field(1, ge=1)
    """Steps between read-outs (the paper: every step)."""
    fraction: float = Field(0.15, gt=0, lt=1)
    """Share of each sentence's non-special tokens replaced by [MASK] (BERT/ALBERT: 15%)."""
    seed: int = 0
    """Seed of the masking (with the experiment seed)."""
    head: Literal["checkpoint", "own"] = "checkpoint"
    """The fixed head: ``checkpoint``, the checkpoint's pre-trained head for every network, initial
    ones included (the paper's publicly available decoder); ``own``, an initial network's head drawn
    with its init scheme and tied to its redrawn word embeddings (pre-trained networks: the same)."""
    refit: bool = True
    """Also the "fine-tuned" setting (Fig. 3A, dashed): a linear decoder re-fitted at each step."""
    train_fraction: float = Field(0.95, gt=0, lt=1)
    """Samples the re-fitted decoder is fitted on (the first ones); it is scored on the rest (the
    paper: 9,500 of 10,000 sentences)."""
    ridge: float = Field(1e-3, gt=0)
    """Ridge penalty of the re-fitted decoder, relative to the mean diagonal of X^T X."""


# exit_period 1: it reads x_t out with its own head, not through f
class MLMReadout(StepMeasure, study=STUDY, reference=PAPER, params=Params,
                 tags=MeasureTags("step", requires=("mlm_head",), step=StepTags(
                     strides=("every",), exit_period=1, input_masking=("fraction", "seed")))):
    def masked_positions(self, input_ids, special_ids, seed):
        import torch  # lazy: torch

        gen = torch.Generator().manual_seed(derive_seed(seed, "mlm_readout", self.p.seed))
        return choose_masked(input_ids, special_ids, self.p.fraction, gen)

    def window(self, steps: int) -> tuple[int, int]:
        return self.p.start, steps if self.p.stop is None else self.p.stop

    def n_train(self, samples: int) -> int:
        return int(self.p.train_fraction * samples)

    def problems(self, view):
        return super().problems(view) + self._spec_problems(view.spec)

    def _spec_problems(self, spec):
        if not spec.text_models:
            return [("kind", "mlm_readout reads text models out with their MLM head; this spec has reference maps only")]
        out = []
        stacks = [m.name for m in spec.text_models if m.family.name == "layers"]
        if stacks:
            out.append(("kind", f"mlm_readout applies ALBERT's MLM head; {', '.join(stacks)} are layers: stacks"))
        samples, steps = spec.input.samples, spec.dynamics.steps
        n = self.n_train(samples)
        if self.p.refit and not 1 <= n < samples:
            out.append(("train_fraction", (f"{self.p.train_fraction} of {samples} samples leaves {n} to fit the "
                                           f"re-fitted decoder on and {samples - n} to score it on; both must be at "
                                           "least 1 (more samples, another train_fraction, or refit = false)")))
        start, stop = self.window(steps)
        if not start <= stop <= steps:
            out.append(("stop" if self.p.stop is not None else "start",
                        f"need start <= stop <= [dynamics] steps ({steps}); got start = {start}, stop = {stop}"))
        return out

    def variables(self, b, shape) -> None:
        start, stop = self.window(shape.steps)
        dim = b.axis("mlm_step", start, stop, self.p.every)
        b.var("mlm_accuracy", "mlm_readout", ("network", dim), "float64", np.nan, "MLM accuracy (fixed head)", "1",
              "share of the masked tokens (input_masked) whose arg-max prediction by ALBERT's MLM head (AlbertMLMHead: "
              "dense, activation, LayerNorm, decoder tied to the word embeddings; `head`: the checkpoint's pre-trained "
              "one, or an initial network's own), applied to x_t at "
              "their positions, is the original token (Fig. 3A, solid lines: the fixed decoder); positions with a "
              "non-finite state are left out; NaN for networks without an MLM head (reference maps)",
              fraction=self.p.fraction, head=self.p.head, **hints(plot="series", order=40, headline=("mean MLM accuracy", "finite_mean")))
        if self.p.refit:
            b.var("mlm_accuracy_refit", "mlm_readout", ("network", dim), "float64", np.nan,
                  "MLM accuracy (re-fitted decoder)", "1",
                  "held-out accuracy on the masked tokens of the last (1 - train_fraction) of the samples of a linear "
                  "decoder [x_t, 1] W fitted at each step t on those of the others (ridge regression on one-hot "
                  "targets, closed form; Fig. 3A, dashed lines: the fine-tuned decoder); NaN for networks without "
                  "a vocabulary (reference maps)", train_fraction=self.p.train_fraction, ridge=self.p.ridge,
                  **hints(plot="series", order=41, headline=("mean re-fitted MLM accuracy", "finite_mean")))

    # ------------------------------------------------------------------ the pass
    def _setup(self, ctx, x) -> None:
        """The head and the masked positions, on the device (once per pass; also after a resume)."""
        from models.albert import load_mlm_head  # lazy: torch
        from models.init import TruncatedNormalInit  # lazy: torch

        self.head = None
        net = ctx.net
        if net.model.is_map or not isinstance(net.model.family, AlbertFamily) or ctx.inputs.masked is None:
            return

        init = net.model.init if self.p.head == "own" else None
        self.head = load_mlm_head(
            net.model.family.location(net.model.source, build=True), revision=net.model.revision,
            init=TruncatedNormalInit(std=init.std, clip=init.clip) if init else None, seed=net.seed("mlm_head"),
            word_embeddings=ctx.model.embeddings.word_embeddings.weight, dtype=x.dtype, device=ctx.device)
        masked = ctx.inputs.masked.to(ctx.device)
        self.flat = masked.flatten().nonzero().flatten()
        self.labels = ctx.inputs.input_ids.to(ctx.device).flatten()[self.flat]
        train = self.flat // masked.shape[1] < self.n_train(masked.shape[0])
        # index tensors made once: a boolean mask would cost a host sync at every step
        self.train_rows, self.test_rows = train.nonzero().flatten(), (~train).nonzero().flatten()
        self.vocab = int(ctx.model.config.vocab_size)

    def _kept(self, seg) -> tuple[int, int]:
        """Indices [lo, hi) along mlm_step of the steps read out in ``seg``."""
        start, stop = self.window(seg.steps)
        every = self.p.every

        def below(u: int) -> int:  # read-outs at steps < u
            return 0 if u <= start else min((u - 1 - start) // every + 1, (stop - start) // every + 1)

        return below(seg.start), below(seg.end + (1 if seg.last else 0))

    def buffers(self, ctx: PassContext, seg):
        import torch  # lazy: torch

        lo, hi = self._kept(seg)
        return {name: self.nan((hi - lo,), torch.float64, ctx.device)
                for name in ("accuracy", "refit")[: 2 if self.p.refit else 1]}

    def observe(self, ctx: PassContext, t, x, bufs, seg):
        start, stop = self.window(seg.steps)
        if not start <= t <= stop or (t - start) % self.p.every:
            return
        if not hasattr(self, "head"):
            self._setup(ctx, x)
        if self.head is None:
            return
        i = (t - start) // self.p.every - self._kept(seg)[0]
        states = x.reshape(-1, x.shape[-1])[self.flat]
        bufs["accuracy"][i] = masked_token_accuracy(self.head, states, self.labels)
        if self.p.refit:
            tr, te = self.train_rows, self.test_rows
            bufs["refit"][i] = ridge_readout_accuracy(states[tr], self.labels[tr], states[te], self.labels[te],
                                                      self.vocab, self.p.ridge)
        return

    def write(self, ctx: PassContext, bufs, seg):
        lo, hi = self._kept(seg)
        if hi > lo:
            ctx.store.write("mlm_accuracy", (ctx.index, slice(lo, hi)), bufs["accuracy"].cpu().numpy())
            if self.p.refit:
                ctx.store.write("mlm_accuracy_refit", (ctx.index, slice(lo, hi)), bufs["refit"].cpu().numpy())
