"""Measures on checkpoints: each task loads the checkpoints it needs, runs the network over the
analysis tokens (the first ``corpus.analysis_tokens`` validation tokens, dropout off, hidden
state carried across ``bptt`` windows) and writes its (network, checkpoint) cell of the store.

The analyses themselves are the pure functions of :mod:`analyses` (SVCCA/PWCCA/CKA, sparsity
chi with the streaming per-word accumulator, diagnostic classifiers, loss change allocation).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from analyses.cca import linear_cka, pwcca, svcca
from analyses.diagnostic import train_diagnostic_classifier
from analyses.loss_change import group_allocations, loss_change_allocation
from analyses.sparsity import WordSparsityAccumulator, frequency_correlation, sparsity
from models.lstm import capture
from runner.data.tokens import batchify, get_batch
from runner.layout import Layout
from runner.store import Store
from runner.data.corpus import Corpus
from runner.training.plan import Task, TrainingPlan
from runner.training.train import build_model, load_weights

CLASSES = {"open": 0, "closed": 1}


class Context:
    """What measure tasks share: corpus, analysis streams, checkpoint paths and a small cache."""

    def __init__(self, plan: TrainingPlan, corpus: Corpus, layout: Layout, store: Store, device: torch.device,
                 paths: dict[tuple[int, int], Path]):
        self.plan, self.corpus, self.layout, self.store, self.device = plan, corpus, layout, store, device
        self.paths = paths
        tr = plan.study.training
        self.bptt = tr.bptt
        n = min(plan.study.corpus.analysis_tokens, corpus.valid.numel())
        self.columns = max(1, min(tr.eval_batch_size, n // (2 * tr.bptt) or 1))
        self.words = batchify(corpus.valid[:n], self.columns).to(device)
        self.tags = {t: batchify(s.valid[:n], self.columns).to(device) for t, s in corpus.tags.items()}
        self._cache: OrderedDict = OrderedDict()

    def windows(self) -> Iterator[int]:
        return iter(range(0, self.words.shape[0] - 1, self.bptt))

    def model(self, network: int, checkpoint: int):
        key = ("model", network, checkpoint)
        if key not in self._cache:
            study = self.plan.study
            m = build_model(study.network[network], study.training, self.corpus, 0).to(self.device)
            load_weights(m, self.paths[(network, checkpoint)], self.device)
            m.eval()
            self._put(key, m)
        return self._cache[key]

    def activations(self, network: int, checkpoint: int) -> dict[str, Tensor]:
        """Every layer's output on the analysis tokens, ``(n_tokens, dim)`` each."""
        key = ("acts", network, checkpoint)
        if key not in self._cache:
            model = self.model(network, checkpoint)
            parts: dict[str, list[Tensor]] = {}
            hidden = model.init_hidden(self.columns)
            with torch.no_grad(), capture(model, model.layer_names() + ("logits",)) as cap:
                for i in self.windows():
                    x, _ = get_batch(self.words, i, self.bptt)
                    _, hidden = model(x, hidden)
                    for name, a in cap.activations.items():
                        parts.setdefault(name, []).append(a.reshape(-1, a.shape[-1]))
            self._put(key, {k: torch.cat(v) for k, v in parts.items()})
        return self._cache[key]

    def _put(self, key, value) -> None:
        self._cache[key] = value
        self._cache.move_to_end(key)
        while len(self._cache) > 6:
            self._cache.popitem(last=False)

    def write(self, name: str, task: Task, values) -> None:
        values = np.asarray(values)
        region = (task.network, task.checkpoint) + (slice(None),) * values.ndim
        self.store.write(name, region, values)

    def layer_index(self) -> dict[str, int]:
        return {str(v): i for i, v in enumerate(self.layout.coords["layer"].values)}


def run_measure(ctx: Context, task: Task) -> None:
    MEASURES[task.kind](ctx, task)


# --------------------------------------------------------------------------- SVCCA / PWCCA / CKA


def _similarities(x: Tensor, y: Tensor, keep: float) -> tuple[float, float, float]:
    return (float(svcca(x, y, keep).mean), float(pwcca(x, y)), float(linear_cka(x, y)))


def measure_svcca(ctx: Context, task: Task) -> None:
    p = task.params
    n, c = task.network, task.checkpoint
    li = ctx.layer_index()
    acts = ctx.activations(n, c)
    names = [k.name for k in ctx.plan.study.network]
    L = len(li)
    if p["compare"] in ("final", "seed"):
        ref = ctx.activations(n, len(ctx.plan.steps) - 1) if p["compare"] == "final" else \
            ctx.activations(names.index(p["reference"][0]), c)
        out = np.full((3, L), np.nan)
        for layer in p["layers"]:
            out[:, li[layer]] = _similarities(acts[layer], ref[layer], p["keep_variance"])
    elif p["compare"] == "layers":
        out = np.full((3, L, L), np.nan)
        for a in p["layers"]:
            for b in p["layers"]:
                out[:, li[a], li[b]] = _similarities(acts[a], acts[b], p["keep_variance"])
    else:
        out = np.full((3, len(p["reference"]), L), np.nan)
        for k, r in enumerate(p["reference"]):
            tagger = ctx.activations(names.index(r), c)["lstm1"]
            for layer in p["layers"]:
                out[:, k, li[layer]] = _similarities(acts[layer], tagger, p["keep_variance"])
    for s, stat in enumerate(("svcca", "pwcca", "cka")):
        ctx.write(f"{stat}_{p['compare']}", task, out[s])


# --------------------------------------------------------------------------- sparsity


def measure_sparsity(ctx: Context, task: Task) -> None:
    p = task.params
    model = ctx.model(task.network, task.checkpoint)
    layers = [x for x in p["layers"] if x in model.layer_names() + ("logits",)]
    V = len(ctx.corpus.vocab)
    dev = ctx.device
    acc = {(q, x, side): WordSparsityAccumulator(V, dev) for q in ("activation", "gradient") for x in layers
           for side in ("target", "input")}
    classes = ctx.corpus.word_class
    class_of = torch.tensor([CLASSES.get(k, 2) for k in classes] if classes else [2] * V, device=dev)
    by_class = {(q, x): WordSparsityAccumulator(3, dev) for q in ("activation", "gradient") for x in layers}
    hidden = model.init_hidden(ctx.columns)
    with torch.enable_grad(), capture(model, layers, gradients=True) as cap:
        for i in ctx.windows():
            x, y = get_batch(ctx.words, i, ctx.bptt)
            hidden = model.detach_hidden(hidden)
            logits, hidden = model(x, hidden)
            model.zero_grad(set_to_none=True)
            model.loss(logits, y).backward()
            tgt, inp = y.reshape(-1), x.reshape(-1)
            for q, source in (("activation", cap.activations), ("gradient", cap.gradients)):
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
                rho[side][qi, j, 0] = float(frequency_correlation(means, counts, min_count=p["min_count"]))
                if classes:
                    for k, cls in ((1, 0), (2, 1)):
                        masked = torch.where(class_of == cls, means, torch.full_like(means, float("nan")))
                        rho[side][qi, j, k] = float(frequency_correlation(masked, counts, min_count=p["min_count"]))
            bc = by_class[(q, layer)]
            class_mean[qi, j, 0] = chi_mean[qi, j]
            class_mean[qi, j, 1:] = bc.means()[:2].cpu().numpy()
    ctx.write("chi_mean", task, chi_mean)
    ctx.write("rho_target", task, rho["target"])
    ctx.write("rho_input", task, rho["input"])
    ctx.write("chi_class_mean", task, class_mean)
    ctx.write("word_chi", task, word_chi)


# --------------------------------------------------------------------------- diagnostic classifiers


def measure_diagnostic(ctx: Context, task: Task) -> None:
    p = task.params
    acts = ctx.activations(task.network, task.checkpoint)
    li = ctx.layer_index()
    out = np.full((2, len(li), len(p["tagsets"]), 2), np.nan)
    for k, tagset in enumerate(p["tagsets"]):
        cur, nxt = [], []
        for i in ctx.windows():
            t, nt = get_batch(ctx.tags[tagset], i, ctx.bptt)
            cur.append(t.reshape(-1))
            nxt.append(nt.reshape(-1))
        n_classes = len(ctx.corpus.tags[tagset].vocab)
        for target, labels in enumerate((torch.cat(cur), torch.cat(nxt))):
            for layer in p["layers"]:
                r = train_diagnostic_classifier(acts[layer], labels, n_classes, epochs=p["epochs"], lr=p["lr"],
                                                seed=ctx.plan.study.experiment.seed)
                out[0, li[layer], k, target] = float(r.accuracy)
                out[1, li[layer], k, target] = float(r.majority_accuracy)
    ctx.write("probe_accuracy", task, out[0])
    ctx.write("probe_majority", task, out[1])


# --------------------------------------------------------------------------- loss change allocation


def _loss_and_grads(ctx: Context, model) -> tuple[float, dict[str, Tensor]]:
    """L(theta) over all analysis tokens (token-weighted mean) and its exact gradient.

    The hidden state is carried across windows *without* detaching, so the gradient is that of
    the very function whose values are compared (LCA's allocations must add up to its change)."""
    model.zero_grad(set_to_none=True)
    hidden = model.init_hidden(ctx.columns)
    total_tokens = sum(get_batch(ctx.words, i, ctx.bptt)[1].numel() for i in ctx.windows())
    with torch.enable_grad():
        loss = 0.0
        for i in ctx.windows():
            x, y = get_batch(ctx.words, i, ctx.bptt)
            logits, hidden = model(x, hidden)
            loss = loss + model.loss(logits, y) * (y.numel() / total_tokens)
        loss.backward()
    grads = {k: (v.grad.detach().clone() if v.grad is not None else None) for k, v in model.named_parameters()}
    return float(loss.detach()), grads


def _simpson_gradient(ctx: Context, model, theta_a: dict, deltas: dict, g_a: dict, g_b: dict, m: int) -> dict:
    """Composite Simpson average of the gradient along theta_a + s * delta, s in [0, 1] (2m sub-steps),
    so that sum(average * delta) approximates the path integral of Eq. 6.1."""
    n = 2 * m
    total = {k: (g_a[k] + g_b[k]) if g_a[k] is not None else None for k in g_a}
    for j in range(1, n):
        with torch.no_grad():
            for k, v in model.named_parameters():
                v.copy_(theta_a[k] + (j / n) * deltas[k])
        _, g = _loss_and_grads(ctx, model)
        for k, v in g.items():
            if v is not None:
                total[k] = total[k] + (4 if j % 2 else 2) * v
    return {k: (v / (3 * n) if v is not None else None) for k, v in total.items()}


def measure_lca(ctx: Context, task: Task) -> None:
    n, c = task.network, task.checkpoint
    study = ctx.plan.study
    a = build_model(study.network[n], study.training, ctx.corpus, 0).to(ctx.device)
    load_weights(a, ctx.paths[(n, c - 1)], ctx.device)
    b = build_model(study.network[n], study.training, ctx.corpus, 0).to(ctx.device)
    load_weights(b, ctx.paths[(n, c)], ctx.device)
    a.eval()
    b.eval()
    theta_a = {k: v.detach().clone() for k, v in a.named_parameters()}
    theta_b = {k: v.detach().clone() for k, v in b.named_parameters()}
    deltas = {k: theta_b[k] - theta_a[k] for k in theta_a}
    loss_a, g_a = _loss_and_grads(ctx, a)
    loss_b, g_b = _loss_and_grads(ctx, b)
    rule = task.params["rule"]
    if rule == "simpson":
        alloc = loss_change_allocation(_simpson_gradient(ctx, a, theta_a, deltas, g_a, g_b, task.params["intervals"]),
                                       deltas)
    else:
        alloc = loss_change_allocation(g_a, deltas, None if rule == "first_order" else g_b)
    groups = group_allocations(alloc, key=lambda name: name.split(".", 1)[0])
    names = [str(v) for v in ctx.layout.coords["parameter_group"].values]
    ctx.write("lca", task, np.array([float(groups[g]) if g in groups else np.nan for g in names]))
    ctx.store.write("loss_change", (n, c), np.asarray(loss_b - loss_a))


MEASURES = {"svcca": measure_svcca, "sparsity": measure_sparsity, "diagnostic": measure_diagnostic,
            "lca": measure_lca}
