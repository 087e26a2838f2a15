"""Sparsity chi = ||v||_2 / ||v||_1 of activations and gradients, per word (Saphra 2021, Ch. 6 Figs. 2-4)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from analyses.sparsity import WordSparsityAccumulator, frequency_correlation, sparsity
from runner.studies.training.data.tokens import get_batch
from runner.plugin.measures import CheckpointTags, MeasureTags, Suites, hints
from runner.plugin.timings import CheckpointMeasure
from runner.studies.training.measure import PAPER, STUDY, TrainingParams
from runner.studies.training.spec import LAYERS, Layer

if TYPE_CHECKING:  # pragma: no cover
    from runner.studies.training.context import Context

CLASSES = {"open": 0, "closed": 1}


class Params(TrainingParams):
    """Sparsity chi = ||v||_2/||v||_1 of activations and gradients, per word (Ch. 6 Figs. 2-4)."""

    kind: Literal["sparsity"]
    layers: list[Layer] = Field(default_factory=lambda: [*LAYERS, "logits"])
    frequent_words: int = Field(50, ge=1)
    """Words (most frequent in training) kept in the word x checkpoint matrix (Fig. 2)."""
    min_count: int = Field(100, ge=1)
    """Words seen fewer times in training do not enter the frequency correlations."""


def frequent_words(corpus, n: int) -> np.ndarray:
    """Ids of the ``n`` most frequent training words (specials excluded)."""
    freq = np.asarray(corpus.frequencies())
    order = [i for i in np.argsort(-freq, kind="stable") if corpus.vocab.itos[i] not in ("<unk>", "<eos>")]
    return np.asarray(order[:n], dtype=np.int64)


# a suite's gradients need its language-modelling head and a next-token loss
class Sparsity(CheckpointMeasure, study=STUDY, reference=PAPER, params=Params,
               tags=MeasureTags("checkpoint", checkpoint=CheckpointTags(suites=Suites(head=True, causal=True),
                                                                networks="networks", layers="layers"))):
    def variables(self, b, shape) -> None:
        p, corpus = self.p, shape.corpus
        b.coord("quantity", ["activation", "gradient"], long_name="activation h or gradient dL/dh")
        b.coord("word_class_split", ["all", "open", "closed"], long_name="words entering the correlation")
        top = frequent_words(corpus, p.frequent_words)
        b.coord("word", [corpus.vocab.itos[i] for i in top], long_name="frequent word")
        b.coord("word_id", top, ("word",), long_name="word id of the frequent word")
        b.coord("word_count", np.asarray(corpus.frequencies())[top], ("word",), long_name="training frequency")
        cell = ("network", "checkpoint", "quantity", "layer")
        b.var("chi_mean", "sparsity", cell, "float64", np.nan, "mean sparsity chi", "1",
              "mean over analysis tokens of chi(v) = ||v||_2 / ||v||_1 (Ch. 6 Sec. 2)", **hints(plot="curve", order=6))
        for side, word in (("target", "x_t, the word predicted"), ("input", "x_{t-1}, the word read")):
            b.var(f"rho_{side}", "sparsity", cell + ("word_class_split",), "float64", np.nan, f"rho ({side} word)", "1",
                  f"Pearson r over words of mu_(t: {word} = w) chi and the word's training frequency (Fig. 3-4)",
                  min_count=p.min_count)
        b.var("chi_class_mean", "sparsity", cell + ("word_class_split",), "float64", np.nan, "mean chi by POS class",
              "1", "mean chi over tokens whose target word is in the class")
        b.var("word_chi", "sparsity", cell + ("word",), "float64", np.nan, "mean chi by target word", "1",
              "mu_(t: x_t = w) chi(v_t) for frequent words: the word x checkpoint matrix (Fig. 2)")

    def run(self, ctx: Context, task) -> None:
        import torch  # lazy: torch

        p = self.p
        suite = hasattr(ctx, "suites")
        layers = list(p.layers) if suite else \
            [x for x in p.layers if x in ctx.model(task.network, task.checkpoint).layer_names() + ("logits",)]
        V = len(ctx.corpus.vocab)
        dev = ctx.device
        acc = {(q, x, side): WordSparsityAccumulator(V, dev) for q in ("activation", "gradient") for x in layers
               for side in ("target", "input")}
        classes = ctx.corpus.word_class
        class_of = torch.tensor([CLASSES.get(k, 2) for k in classes] if classes else [2] * V, device=dev)
        by_class = {(q, x): WordSparsityAccumulator(3, dev) for q in ("activation", "gradient") for x in layers}
        for tgt, inp, sources in (_suite_states(ctx, task, layers) if suite else _lstm_states(ctx, task, layers)):
            for q, source in zip(("activation", "gradient"), sources):
                for layer in layers:
                    chi = sparsity(source[layer].reshape(-1, source[layer].shape[-1]))
                    acc[(q, layer, "target")].update(tgt, chi)
                    acc[(q, layer, "input")].update(inp, chi)
                    by_class[(q, layer)].update(class_of[tgt], chi)
        li = ctx.layer_index()
        L, Q = len(li), 2
        counts = torch.tensor(ctx.corpus.frequencies(), device=dev)
        top = torch.as_tensor(ctx.layout.coords["word_id"].values, device=dev)
        chi_mean = np.full((Q, L), np.nan)
        rho = {s: np.full((Q, L, 3), np.nan) for s in ("target", "input")}
        class_mean = np.full((Q, L, 3), np.nan)
        word_chi = np.full((Q, L, len(top)), np.nan)
        for qi, q in enumerate(("activation", "gradient")):
            for layer in layers:
                j = li[layer]
                t = acc[(q, layer, "target")]
                chi_mean[qi, j] = float(t.sums.sum() / t.counts.sum())
                word_chi[qi, j] = t.means()[top].cpu().numpy()
                for side in ("target", "input"):
                    means = acc[(q, layer, side)].means()
                    rho[side][qi, j, 0] = float(frequency_correlation(means, counts, min_count=p.min_count))
                    if classes:
                        for k, cls in ((1, 0), (2, 1)):
                            masked = torch.where(class_of == cls, means, torch.full_like(means, float("nan")))
                            rho[side][qi, j, k] = float(frequency_correlation(masked, counts, min_count=p.min_count))
                bc = by_class[(q, layer)]
                class_mean[qi, j, 0] = chi_mean[qi, j]
                class_mean[qi, j, 1:] = bc.means()[:2].cpu().numpy()
        ctx.write("chi_mean", task, chi_mean)
        ctx.write("rho_target", task, rho["target"])
        ctx.write("rho_input", task, rho["input"])
        ctx.write("chi_class_mean", task, class_mean)
        ctx.write("word_chi", task, word_chi)


def _lstm_states(ctx, task, layers):
    """Per bptt window: (target words, input words, (activations, gradients) of each layer), the gradients of
    the window's mean next-word loss (through the LSTM's adapter, the stream carried across windows)."""
    for i, states in zip(ctx.windows(), ctx.gradients(task.network, task.checkpoint, layers), strict=True):
        x, y = get_batch(ctx.words, i, ctx.bptt)
        yield y.reshape(-1), x.reshape(-1), states


def _suite_states(ctx, task, layers):
    """A causal suite's word activations and the gradients of its next-token loss, pooled per word; word t's
    target is word t + 1 (the last analysis word has none)."""
    acts, grads = ctx.word_states(task.network, task.checkpoint)
    cut = lambda d: {k: d[k][:-1] for k in layers}  # noqa: E731
    yield ctx.word_ids[1:], ctx.word_ids[:-1], (cut(acts), cut(grads))
