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

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch
    from torch import Tensor


__all__ = ["finetune_readout", "minibatch_orders", "pearson", "readout_predictions", "train_linear_readouts"]


def _features(x: Tensor) -> tuple[Tensor, Tensor]:
    """``[x, 1]`` in float32 (float64 for float64 states), non-finite rows zeroed; and the finite mask."""
    import torch  # lazy: torch

    dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    finite = torch.isfinite(x).all(dim=-1)
    xb = torch.cat([x.to(dtype), torch.ones(*x.shape[:-1], 1, dtype=dtype, device=x.device)], dim=-1)
    return torch.where(finite[..., None], xb, torch.zeros((), dtype=dtype, device=x.device)), finite


def minibatch_orders(n: int, epochs: int = 10, seed: int = 0) -> Tensor:
    """``(epochs, n)``: the order of the training rows in each epoch (``torch.randperm`` from ``seed``, on the CPU)."""
    import torch  # lazy: torch

    gen = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randperm(n, generator=gen) for _ in range(epochs)])


def train_linear_readouts(x: Tensor, y: Tensor, *, epochs: int = 10, lr: float = 1e-3, batch_size: int = 32,
                          seed: int = 0, orders: Tensor | None = None) -> Tensor:
    """``(K, H + 1)`` weights (last column: bias) of K linear readouts of ``x`` ``(K, N, H)`` (K steps,
    N training rows) fitted to ``y`` ``(N,)`` (see the module docstring). Each epoch visits the rows
    in the order of ``orders`` (``minibatch_orders(N, epochs, seed)`` when not given; pass them
    already on the device to spare a copy, and a host synchronisation, per call)."""
    import torch  # lazy: torch

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
    import torch  # lazy: torch

    xb, finite = _features(x)
    out = torch.einsum("knh,kh->kn", xb, w.to(xb.dtype))
    return torch.where(finite, out, torch.full((), float("nan"), dtype=out.dtype, device=out.device))


def pearson(pred: Tensor, target: Tensor) -> Tensor:
    """Pearson's r (float64) of ``pred`` ``(..., N)`` against ``target`` ``(N,)`` along the last axis,
    over the rows where ``pred`` is finite (NaN with fewer than two, or without spread)."""
    import torch  # lazy: torch

    p = pred.to(torch.float64)
    t = target.to(device=p.device, dtype=torch.float64).expand_as(p)
    ok = torch.isfinite(p)
    n = ok.sum(-1, keepdim=True).clamp_min(1)
    zero = torch.zeros((), dtype=torch.float64, device=p.device)
    pc = torch.where(ok, p - torch.where(ok, p, zero).sum(-1, keepdim=True) / n, zero)
    tc = torch.where(ok, t - torch.where(ok, t, zero).sum(-1, keepdim=True) / n, zero)
    r = (pc * tc).sum(-1) / ((pc * pc).sum(-1) * (tc * tc).sum(-1)).sqrt()
    return torch.where(ok.sum(-1) >= 2, r, torch.full((), float("nan"), dtype=torch.float64, device=p.device))


def finetune_readout(f: torch.nn.Module, x0: Tensor, y: Tensor, t: int, *, n_train: int, token: int = 0,
                     epochs: int = 10, lr: float = 1e-6, readout_lr: float | None = None, batch_size: int = 32,
                     orders: Tensor | None = None, seed: int = 0) -> Tensor:
    """Pearson r (float64 scalar) of the *fine-tuned network* at step ``t`` (Fig. 3B dashed, Appendix
    B): the map ``f`` (a module ``x -> f(x)``, changed in place: pass a copy) and a linear readout
    ``[x_t[token], 1] w`` are trained together on the first ``n_train`` rows of ``x0`` ``(N, n, H)``,
    where ``x_t = f^t(x0)`` is recomputed from ``x0`` for every minibatch and the squared error to
    ``y`` back-propagates through all t applications; then scored on the other rows. Adam at ``lr``
    (the paper: 1e-6) for f and ``readout_lr`` (default ``lr``) for w, ``epochs`` epochs (the paper:
    10) in the minibatch ``orders`` of :func:`minibatch_orders`; w starts at zero, as in
    :func:`train_linear_readouts` (with ``lr = 0`` the two give the same readout)."""
    import torch  # lazy: torch

    dtype = torch.float64 if x0.dtype == torch.float64 else torch.float32

    def state(rows: Tensor) -> Tensor:
        x = x0[rows]
        for _ in range(t):
            x = f(x)
        return x[:, token]

    w = torch.zeros(x0.shape[-1] + 1, dtype=dtype, device=x0.device, requires_grad=True)
    params = [p for p in f.parameters() if p.requires_grad]
    opt = torch.optim.Adam([{"params": params, "lr": lr}, {"params": [w], "lr": lr if readout_lr is None else readout_lr}])
    target = y.to(device=x0.device, dtype=dtype)
    if orders is None:
        orders = minibatch_orders(n_train, epochs, seed).to(x0.device)
    with torch.enable_grad():
        for order in orders:
            for i in range(0, n_train, batch_size):
                rows = order[i:i + batch_size]
                xb, finite = _features(state(rows))
                keep = finite.to(xb.dtype)
                err = (xb @ w - target[rows]) ** 2
                loss = (err * keep).sum() / keep.sum().clamp_min(1)
                opt.zero_grad(set_to_none=False)
                loss.backward()
                opt.step()
    with torch.no_grad():
        held = torch.arange(n_train, x0.shape[0], device=x0.device)
        pred = readout_predictions(w.detach()[None], state(held)[None])
        return pearson(pred, target[n_train:])[0]
