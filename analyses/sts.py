r"""STS-B readout of a state (Inoue et al. 2021, Fig. 3B and Appendix B).

STS-B (GLUE) scores the semantic similarity of two sentences on 0-5. The paper trains a linear
readout on x_t at each step t (the encoder f fixed) "for 10 epochs" at learning rate 1e-3
(Appendix B) and reports the Pearson correlation between its outputs and the human scores on
held-out pairs.

:func:`train_linear_readouts` trains K independent readouts ``y = x_k w_k + b_k`` at once, one per
step k, by minimising the mean squared error to the scores (the regression loss of GLUE's STS-B
heads) with ``torch.optim.Adam`` over shuffled minibatches. Adam's update is elementwise, so one
optimizer over the stacked ``(K, H + 1)`` weights is K independent optimizers; every step sees
the same minibatch order. The weights start at zero (the paper does not say; zero makes the
result independent of how steps are grouped). Rows whose state is not finite are left out of the
loss of their step.

:func:`pearson` is Pearson's r between predictions and targets over the finite rows.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["minibatch_orders", "pearson", "readout_predictions", "train_linear_readouts"]


def _features(x: Tensor) -> tuple[Tensor, Tensor]:
    """``[x, 1]`` in float32 (float64 for float64 states), non-finite rows zeroed; and the finite mask."""
    dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    finite = torch.isfinite(x).all(dim=-1)
    xb = torch.cat([x.to(dtype), torch.ones(*x.shape[:-1], 1, dtype=dtype, device=x.device)], dim=-1)
    return torch.where(finite[..., None], xb, torch.zeros((), dtype=dtype, device=x.device)), finite


def minibatch_orders(n: int, epochs: int = 10, seed: int = 0) -> Tensor:
    """``(epochs, n)``: the order of the training rows in each epoch (``torch.randperm`` from ``seed``, on the CPU)."""
    gen = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randperm(n, generator=gen) for _ in range(epochs)])


def train_linear_readouts(x: Tensor, y: Tensor, *, epochs: int = 10, lr: float = 1e-3, batch_size: int = 32,
                          seed: int = 0, orders: Tensor | None = None) -> Tensor:
    """``(K, H + 1)`` weights (last column: bias) of K linear readouts of ``x`` ``(K, N, H)`` (K steps,
    N training rows) fitted to ``y`` ``(N,)`` (see the module docstring). Each epoch visits the rows
    in the order of ``orders`` (``minibatch_orders(N, epochs, seed)`` when not given; pass them
    already on the device to spare a copy, and a host synchronisation, per call)."""
    xb, finite = _features(x)
    target = y.to(device=x.device, dtype=xb.dtype)
    w = torch.zeros(xb.shape[0], xb.shape[-1], dtype=xb.dtype, device=x.device, requires_grad=True)
    opt = torch.optim.Adam([w], lr=lr)
    n = xb.shape[1]
    if orders is None:
        orders = minibatch_orders(n, epochs, seed).to(x.device)
    with torch.enable_grad():
        for order in orders:
            for i in range(0, n, batch_size):
                rows = order[i:i + batch_size]
                keep = finite[:, rows].to(xb.dtype)
                err = (torch.einsum("knh,kh->kn", xb[:, rows], w) - target[rows]) ** 2
                loss = ((err * keep).sum(1) / keep.sum(1).clamp_min(1)).sum()  # each step's own mean
                opt.zero_grad(set_to_none=False)
                loss.backward()
                opt.step()
    return w.detach()


def readout_predictions(w: Tensor, x: Tensor) -> Tensor:
    """``(K, N)`` outputs of the readouts ``w`` on ``x`` ``(K, N, H)`` (NaN where the state is not finite)."""
    xb, finite = _features(x)
    out = torch.einsum("knh,kh->kn", xb, w.to(xb.dtype))
    return torch.where(finite, out, torch.full((), float("nan"), dtype=out.dtype, device=out.device))


def pearson(pred: Tensor, target: Tensor) -> Tensor:
    """Pearson's r (float64) of ``pred`` ``(..., N)`` against ``target`` ``(N,)`` along the last axis,
    over the rows where ``pred`` is finite (NaN with fewer than two, or without spread)."""
    p = pred.to(torch.float64)
    t = target.to(device=p.device, dtype=torch.float64).expand_as(p)
    ok = torch.isfinite(p)
    n = ok.sum(-1, keepdim=True).clamp_min(1)
    zero = torch.zeros((), dtype=torch.float64, device=p.device)
    pc = torch.where(ok, p - torch.where(ok, p, zero).sum(-1, keepdim=True) / n, zero)
    tc = torch.where(ok, t - torch.where(ok, t, zero).sum(-1, keepdim=True) / n, zero)
    r = (pc * tc).sum(-1) / ((pc * pc).sum(-1) * (tc * tc).sum(-1)).sqrt()
    return torch.where(ok.sum(-1) >= 2, r, torch.full((), float("nan"), dtype=torch.float64, device=p.device))
