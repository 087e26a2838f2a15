"""Input checks every measure shares: numpy arrays or torch tensors in, shapes checked, never transposed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from torch import Tensor


def tensor(x: Any, name: str, *, ndim: int | tuple[int, ...] | None = None, min_ndim: int = 0,
           like: Tensor | None = None) -> Tensor:
    """``x`` as a tensor (a numpy array or a nested sequence is converted with its dtype kept: float64
    stays float64), on ``like``'s device when given. ``ValueError`` when its number of dimensions is not
    ``ndim`` (one of them, for a tuple) or below ``min_ndim``; ``name`` says which argument."""
    import torch  # lazy: torch
    from torch import Tensor  # lazy: torch

    if not isinstance(x, Tensor):
        try:
            x = torch.as_tensor(np.asarray(x))
        except (TypeError, ValueError, RuntimeError) as err:
            raise ValueError(f"{name}: not an array ({type(x).__name__}): {err}") from None
    if like is not None and x.device != like.device:
        x = x.to(like.device)
    allowed = (ndim,) if isinstance(ndim, int) else ndim
    if allowed is not None and x.ndim not in allowed:
        want = " or ".join(f"{d}-D" for d in allowed)
        raise ValueError(f"{name} must be {want}; got shape {tuple(x.shape)}")
    if x.ndim < min_ndim:
        raise ValueError(f"{name} needs at least {min_ndim} dimensions; got shape {tuple(x.shape)}")
    return x


def float64_numpy(x: Any) -> np.ndarray:
    """``x`` (a tensor on any device, of any dtype bfloat16 included, or an array) as a float64 numpy array."""
    import torch  # lazy: torch
    from torch import Tensor  # lazy: torch

    if isinstance(x, Tensor):
        return x.detach().cpu().to(torch.float64).numpy()
    return np.asarray(x, dtype=np.float64)


def check_token_ids(ids: Tensor, vocab_size: int, name: str = "token ids", of: str = "the embedding") -> None:
    """``ValueError`` naming the ids outside ``[0, vocab_size)`` (indexing with them would wrap
    around, -1 to the last row, or fail on the device), before any compute."""
    import torch  # lazy: torch

    bad = (ids < 0) | (ids >= vocab_size)
    if bool(bad.any()):
        values = torch.unique(ids[bad]).tolist()
        shown = ", ".join(str(v) for v in values[:10]) + (", ..." if len(values) > 10 else "")
        hint = " (-1 is a common padding id: drop padded positions or map them to a real token)" if -1 in values else ""
        raise ValueError(f"{name} {shown} outside [0, {vocab_size}): the vocabulary size of {of} is "
                         f"{vocab_size}{hint}")
