"""Token deviation D(t) and the synchronization offset (Inoue et al. 2021, Eq. 5, Fig. 2A-B).

All functions are free of host synchronisation, so the runner can call them
on every step of a GPU loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analyses._arrays import tensor

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["token_deviation", "synchronization_offset", "SyncOffsetTracker"]

#: Threshold on D(t) below which tokens count as synchronized (paper, Fig. 2A).
DEFAULT_THRESHOLD = 1e-5


def _at_least_float32(x: Tensor) -> Tensor:
    import torch  # lazy: torch

    if x.dtype in (torch.float16, torch.bfloat16):
        return x.float()
    return x


def token_deviation(x: Tensor) -> Tensor:
    r"""Degree of deviation among token vectors.

    .. math:: D(t) = \frac{1}{N_w} \sum_{i=1}^{N_w} \| x_t^i - \bar x_t \|^2,
              \quad \bar x_t = \frac{1}{N_w} \sum_i x_t^i

    (Inoue et al. 2021, Eq. 5; Fig. 2A bottom).

    Parameters
    ----------
    x : Tensor, shape ``(..., n_tokens, n_hidden)``
        Token vectors; any float dtype and device. Half precision is
        computed in float32.

    Returns
    -------
    Tensor, shape ``(...)``
        D for each leading index, dtype of ``x`` (at least float32).
    """
    x = _at_least_float32(tensor(x, "x (..., n_tokens, n_hidden)", min_ndim=2))
    centred = x - x.mean(dim=-2, keepdim=True)
    return centred.square().sum(dim=-1).mean(dim=-1)


def synchronization_offset(deviation: Tensor, threshold: float = DEFAULT_THRESHOLD) -> Tensor:
    r"""First step at which the token deviation falls below ``threshold``.

    .. math:: t_\mathrm{sync} = \min\{ t : D(t) < \theta \}, \quad \theta = 10^{-5}

    (Inoue et al. 2021, Sec. II.A; Fig. 2A-B). NaN never counts as synchronized.

    Parameters
    ----------
    deviation : Tensor, shape ``(..., T)``
        D(t) for t = 0 .. T-1.
    threshold : float
        The paper's threshold, 1e-5.

    Returns
    -------
    Tensor, shape ``(...)``, int64
        The first such t, or -1 when D never falls below the threshold.
    """
    import torch  # lazy: torch

    deviation = tensor(deviation, "deviation (..., T)", min_ndim=1)
    below = deviation < threshold  # NaN < threshold is False
    # argmax returns the index of the first maximal value.
    first = below.to(torch.uint8).argmax(dim=-1)
    return torch.where(below.any(dim=-1), first, torch.full_like(first, -1))


class SyncOffsetTracker:
    """Streaming :func:`synchronization_offset` for a batch, one step at a time.

    Parameters
    ----------
    batch : int
        Number of samples.
    threshold : float
        Threshold on D(t) (paper: 1e-5).
    device : torch.device or str, optional
        Device of :attr:`offset`.

    Attributes
    ----------
    offset : Tensor, shape ``(batch,)``, int64
        First step with D(t) < threshold seen so far; -1 while not yet.
    """

    def __init__(self, batch: int, threshold: float = DEFAULT_THRESHOLD, device=None) -> None:
        import torch  # lazy: torch

        self.threshold = float(threshold)
        self.offset = torch.full((batch,), -1, dtype=torch.int64, device=device)

    def update(self, t: int, deviation: Tensor) -> None:
        """Record D(t) for step ``t`` (steps arrive in increasing order).

        Parameters
        ----------
        t : int
            Step index.
        deviation : Tensor, shape ``(batch,)``
            D(t); NaN never counts as synchronized.
        """
        import torch  # lazy: torch

        hit = (self.offset < 0) & (deviation.to(self.offset.device) < self.threshold)
        self.offset = torch.where(hit, torch.full_like(self.offset, t), self.offset)

    def state_dict(self) -> dict[str, Tensor]:
        """Tensors needed to resume: ``offset`` and ``threshold`` (0-d float64)."""
        import torch  # lazy: torch

        return {
            "offset": self.offset.clone(),
            "threshold": torch.tensor(self.threshold, dtype=torch.float64),
        }

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        """Restore from :meth:`state_dict` (keeps this tracker's device)."""
        import torch  # lazy: torch

        offset = state["offset"]
        if offset.shape != self.offset.shape:
            raise ValueError(f"offset shape {tuple(offset.shape)} != {tuple(self.offset.shape)}")
        self.offset = offset.to(device=self.offset.device, dtype=torch.int64).clone()
        if "threshold" in state:
            self.threshold = float(state["threshold"])
