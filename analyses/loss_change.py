"""Loss change allocation (LCA; Lan et al. 2019, arXiv 1909.01440).

Thesis (Saphra) Sec. 6.1.1.1, Eqs. 6.1-6.3: the loss change of one step is the
path integral of the gradient along the straight line from theta_t to
theta_{t+1},

    L(theta_{t+1}) - L(theta_t) = int <grad L(theta), d theta>
                                ~= sum_i g~_i (theta_{t+1,i} - theta_{t,i}),

and A_{t,i} = g~_i * Delta theta_i is the share allocated to parameter i
(negative = that parameter helped). The gradient average g~ is chosen by what
the caller supplies:

* ``g_t`` only: first order, thesis Eq. 6.2/6.3; error -0.5 Delta^T H Delta.
* ``g_t`` and ``g_{t+1}``: trapezoid rule (g_t + g_{t+1}) / 2; exact when the
  loss is quadratic along the step.
* plus ``g_mid`` at (theta_t + theta_{t+1}) / 2: Simpson's rule
  (g_t + 4 g_mid + g_{t+1}) / 6, the fourth-order Runge-Kutta integration that
  Lan et al. use; exact for cubic losses.

All gradients must be of the *same* loss (e.g. the full training set or a fixed
batch), evaluated at the stated parameters.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from analyses._arrays import tensor

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["loss_change_allocation", "LossChangeAllocator", "group_allocations"]


def _as64(t: Tensor | None, like: Tensor, name: str = "gradient") -> Tensor:
    import torch  # lazy: torch

    if t is None:  # a parameter without gradient contributes nothing
        return torch.zeros_like(like, dtype=torch.float64)
    t = tensor(t, name, like=like)
    if t.shape != like.shape:
        raise ValueError(f"{name} has shape {tuple(t.shape)}, its parameter's delta {tuple(like.shape)}")
    return t.detach().to(device=like.device, dtype=torch.float64)


def loss_change_allocation(
    grads: Mapping[str, Tensor | None],
    deltas: Mapping[str, Tensor],
    next_grads: Mapping[str, Tensor | None] | None = None,
    mid_grads: Mapping[str, Tensor | None] | None = None,
) -> dict[str, Tensor]:
    """Per-element allocation A_{t,i} = g~_i * (theta_{t+1,i} - theta_{t,i}) of one step.

    Parameters
    ----------
    grads : mapping name -> Tensor, shape of the parameter
        Gradient at theta_t (``None`` counts as zero).
    deltas : mapping name -> Tensor, same shapes
        theta_{t+1} - theta_t.
    next_grads : mapping, optional
        Gradient at theta_{t+1}: enables the trapezoid rule.
    mid_grads : mapping, optional
        Gradient at the midpoint; needs ``next_grads``; enables Simpson's rule.

    Returns
    -------
    dict name -> Tensor (float64, parameter's shape)
        Summing every element of every entry approximates L(theta_{t+1}) - L(theta_t).
    """
    import torch  # lazy: torch

    if set(grads) != set(deltas):
        raise ValueError(f"grads and deltas name different parameters: {sorted(set(grads) ^ set(deltas))}")
    if mid_grads is not None and next_grads is None:
        raise ValueError("mid_grads (Simpson's rule) also needs next_grads")
    out: dict[str, Tensor] = {}
    for name, delta in deltas.items():
        d = tensor(delta, f"deltas[{name!r}]").detach().to(torch.float64)
        g = _as64(grads[name], d, f"grads[{name!r}]")
        if next_grads is not None and mid_grads is not None:
            g = (g + 4.0 * _as64(mid_grads[name], d, f"mid_grads[{name!r}]")
                 + _as64(next_grads[name], d, f"next_grads[{name!r}]")) / 6.0
        elif next_grads is not None:
            g = 0.5 * (g + _as64(next_grads[name], d, f"next_grads[{name!r}]"))
        out[name] = g * d
    return out


class LossChangeAllocator:
    """Running sum over steps of the LCA of :func:`loss_change_allocation`.

    Accumulates, per parameter tensor, sum_t A_{t,i} (``elementwise=True``) or
    only its total sum_t sum_i A_{t,i}, in float64 on the gradients' device
    without host synchronisation.

    Parameters
    ----------
    elementwise : bool
        Keep per-element sums (memory = one float64 copy of the parameters).
    """

    def __init__(self, elementwise: bool = True) -> None:
        self.elementwise = elementwise
        self.steps = 0
        self._sums: dict[str, Tensor] = {}

    def update(
        self,
        named_grads: Mapping[str, Tensor | None],
        named_param_deltas: Mapping[str, Tensor],
        named_grads_next: Mapping[str, Tensor | None] | None = None,
        named_grads_mid: Mapping[str, Tensor | None] | None = None,
    ) -> dict[str, Tensor]:
        """Add one step; return this step's total per parameter tensor (shape ())."""
        step = loss_change_allocation(named_grads, named_param_deltas, named_grads_next, named_grads_mid)
        totals = {name: a.sum() for name, a in step.items()}
        source = step if self.elementwise else totals
        for name, a in source.items():
            if name in self._sums:
                self._sums[name] += a
            else:
                self._sums[name] = a.clone()
        self.steps += 1
        return totals

    def allocations(self) -> dict[str, Tensor]:
        """Cumulative per-element allocations (requires ``elementwise=True``)."""
        if not self.elementwise:
            raise RuntimeError("allocator was built with elementwise=False")
        return dict(self._sums)

    def totals(self) -> dict[str, Tensor]:
        """Cumulative allocation per parameter tensor, shape ()."""
        return {name: a.sum() for name, a in self._sums.items()}

    def total(self) -> Tensor:
        """Cumulative allocation over all parameters: approximates L(theta_T) - L(theta_0)."""
        import torch  # lazy: torch

        return torch.stack(list(self.totals().values())).sum()

    def state_dict(self) -> dict[str, object]:
        sums = {k: v.clone() for k, v in self._sums.items()}
        return {"elementwise": self.elementwise, "steps": self.steps, "sums": sums}

    def load_state_dict(self, state: Mapping[str, object]) -> None:
        self.elementwise = bool(state["elementwise"])
        self.steps = int(state["steps"])  # type: ignore[arg-type]
        self._sums = {k: v.clone() for k, v in state["sums"].items()}  # type: ignore[union-attr]


def group_allocations(
    totals: Mapping[str, Tensor],
    key: Callable[[str], str] = lambda name: name.rsplit(".", 1)[0],
) -> dict[str, Tensor]:
    """Sum allocations per layer: A_layer = sum over that layer's parameters.

    Parameters
    ----------
    totals : mapping name -> Tensor
        Per-parameter allocations (any shape; each is summed).
    key : callable
        Maps a parameter name to its layer; default drops the last dotted part
        (``"rnn.weight_hh_l0"`` -> ``"rnn"``, ``"decoder.bias"`` -> ``"decoder"``).

    Returns
    -------
    dict layer -> Tensor, shape ()
    """
    out: dict[str, Tensor] = {}
    for name, a in totals.items():
        k = key(name)
        out[k] = out[k] + a.sum() if k in out else a.sum()
    return out
