"""Diagnostic classifier (probe) on a layer's representations.

Thesis (Saphra) Ch. 4, "SVCCA vs. Diagnostic classifiers" (Figs. 6-7): "the same
model as Belinkov et al. (2017), which classifies an arbitrary representation
using a ReLU followed by a softmax layer", trained to predict the tag y_t (or
y_{t+1}) from the hidden state h_t. Belinkov et al. (2017, ACL, "What do Neural
Machine Translation Models Learn about Morphology?") use one hidden ReLU layer
the size of the input representation, dropout 0.5, a softmax output, and Adam;
those are the defaults here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from analyses._arrays import tensor

if TYPE_CHECKING:
    import torch
    from torch import Tensor

__all__ = ["DiagnosticResult", "against_majority", "train_diagnostic_classifier", "wilson_interval"]

#: The standard normal quantile of a two-sided 95% interval.
Z95 = 1.959963984540054


def wilson_interval(successes, n, z: float = Z95):
    r"""Wilson score interval of a binomial proportion (Wilson 1927, JASA 22:209-212).

    .. math:: \frac{\hat p + \frac{z^2}{2n} \pm z \sqrt{\frac{\hat p (1 - \hat p)}{n} + \frac{z^2}{4 n^2}}}
              {1 + z^2 / n}, \quad \hat p = \text{successes} / n

    ``successes`` and ``n`` are numbers or arrays (broadcast); the default z gives 95%. Returns
    ``(low, high)`` as float64 arrays, NaN where ``n`` is 0.
    """
    k, n = np.asarray(successes, dtype=np.float64), np.asarray(n, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = k / n
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def against_majority(low, high, majority) -> np.ndarray:
    """Where an accuracy's interval ``[low, high]`` lies against the majority-class accuracy: 0 above
    it (``low > majority``), 2 below it (``high < majority``), 1 when the interval holds it (the
    probe cannot be told from always answering the most frequent class). int8, broadcast."""
    low, high, majority = (np.asarray(a, dtype=np.float64) for a in (low, high, majority))
    return np.select([low > majority, high < majority], [0, 2], default=1).astype(np.int8)


@dataclass(frozen=True)
class DiagnosticResult:
    """Outcome of one probe.

    Attributes
    ----------
    accuracy : Tensor, shape ()
        Held-out accuracy (the probe's score).
    train_accuracy : Tensor, shape ()
        Accuracy on the training split (dropout off).
    majority_accuracy : Tensor, shape ()
        Held-out accuracy of always predicting the most frequent training label:
        the chance baseline to compare ``accuracy`` with.
    n_train, n_val : int
        Split sizes.
    """

    accuracy: Tensor
    train_accuracy: Tensor
    majority_accuracy: Tensor
    n_train: int
    n_val: int


def _uniform(shape: tuple[int, ...], bound: float, gen: torch.Generator, device: torch.device) -> Tensor:
    import torch  # lazy: torch

    w = (torch.rand(shape, generator=gen, device=device) * 2.0 - 1.0) * bound
    return w.requires_grad_(True)


def train_diagnostic_classifier(
    features: Tensor,
    labels: Tensor,
    n_classes: int,
    *,
    hidden: int | None = None,
    epochs: int = 30,
    lr: float = 1e-3,
    batch_size: int = 256,
    dropout: float = 0.5,
    val_fraction: float = 0.2,
    seed: int = 0,
) -> DiagnosticResult:
    """Train ReLU + softmax probe p(y | h) = softmax(W2 relu(W1 h + b1) + b2).

    Minimises mean cross-entropy with minibatch Adam on a random
    ``1 - val_fraction`` of the rows and reports accuracy on the rest (thesis
    Ch. 4, Figs. 6-7). Initialisation, split, shuffling and dropout all draw
    from one generator seeded with ``seed``, so results are reproducible on a
    given device.

    Parameters
    ----------
    features : Tensor, shape (n, d)
        Representations (e.g. h_t per token); any device, cast to float32.
    labels : Tensor, shape (n,)
        Integer classes in [0, n_classes).
    n_classes : int
    hidden : int, optional
        Hidden ReLU units; default d (Belinkov et al. 2017).
    epochs, lr, batch_size : int, float, int
        Adam schedule.
    dropout : float
        Dropout on the hidden layer during training.
    val_fraction : float
        Held-out share of rows, in (0, 1).
    seed : int

    Returns
    -------
    DiagnosticResult
    """
    import torch  # lazy: torch
    import torch.nn.functional as F  # lazy: torch

    features = tensor(features, "features")
    labels = tensor(labels, "labels", like=features)
    if features.ndim != 2 or labels.shape != (features.shape[0],):
        raise ValueError(f"need features (n, d) and labels (n,); got {tuple(features.shape)}, {tuple(labels.shape)}")
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    device = features.device
    x = features.detach().to(torch.float32)
    y = labels.detach().to(device=device, dtype=torch.int64)
    n, d = x.shape
    n_val = min(max(1, round(n * val_fraction)), n - 1)
    h = d if hidden is None else int(hidden)

    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    perm = torch.randperm(n, generator=gen, device=device)
    val_idx, train_idx = perm[:n_val], perm[n_val:]

    # nn.Linear's default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    b_in, b_hid = 1.0 / math.sqrt(d), 1.0 / math.sqrt(h)
    w1, b1 = _uniform((d, h), b_in, gen, device), _uniform((h,), b_in, gen, device)
    w2, b2 = _uniform((h, n_classes), b_hid, gen, device), _uniform((n_classes,), b_hid, gen, device)
    params = [w1, b1, w2, b2]

    def logits(xb: Tensor, train: bool) -> Tensor:
        z = torch.relu(xb @ w1 + b1)
        if train and dropout > 0.0:
            keep = torch.rand(z.shape, generator=gen, device=device) >= dropout
            z = z * keep / (1.0 - dropout)
        return z @ w2 + b2

    # Adam (Kingma & Ba 2015, default betas), written out: torch.optim's first
    # construction costs seconds of imports, which dominates probes this small.
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    moments = [(torch.zeros_like(p), torch.zeros_like(p)) for p in params]
    step = 0
    with torch.enable_grad():
        for _ in range(epochs):
            order = train_idx[torch.randperm(train_idx.numel(), generator=gen, device=device)]
            for start in range(0, order.numel(), batch_size):
                idx = order[start : start + batch_size]
                loss = F.cross_entropy(logits(x[idx], train=True), y[idx])
                grads = torch.autograd.grad(loss, params)
                step += 1
                with torch.no_grad():
                    c1, c2 = 1.0 - beta1**step, 1.0 - beta2**step
                    for p, g, (m, v) in zip(params, grads, moments):
                        m.mul_(beta1).add_(g, alpha=1.0 - beta1)
                        v.mul_(beta2).addcmul_(g, g, value=1.0 - beta2)
                        p.addcdiv_(m, (v / c2).sqrt_().add_(eps), value=-lr / c1)

    def accuracy(idx: Tensor) -> Tensor:
        correct = torch.zeros((), dtype=torch.int64, device=device)
        with torch.no_grad():
            for start in range(0, idx.numel(), 65536):
                part = idx[start : start + 65536]
                correct += (logits(x[part], train=False).argmax(dim=1) == y[part]).sum()
        return correct.to(torch.float64) / idx.numel()

    majority = torch.bincount(y[train_idx], minlength=n_classes).argmax()
    return DiagnosticResult(
        accuracy=accuracy(val_idx),
        train_accuracy=accuracy(train_idx),
        majority_accuracy=(y[val_idx] == majority).to(torch.float64).mean(),
        n_train=int(train_idx.numel()),
        n_val=int(n_val),
    )
