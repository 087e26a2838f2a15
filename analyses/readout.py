r"""Masked-language-model readout of a state (Inoue et al. 2021, Fig. 3A and Appendix A).

The MLM task of BERT and ALBERT: some input tokens are replaced by ``[MASK]`` and a readout
predicts each masked token's original vocabulary id from the state vector at its position. The
paper applies a linear decoder to x_t at every step t and reports the accuracy on the masked
tokens.

:func:`choose_masked` picks the masked positions as BERT's reference data pipeline does
(``create_pretraining_data.py``: ``max(1, round(fraction * n))`` of the ``n`` maskable tokens
of each sequence, uniformly, special tokens never); here every chosen token becomes ``[MASK]``
(an evaluation, not BERT's 80/10/10 training corruption).

:func:`masked_token_accuracy` is the share of masked positions whose arg-max prediction equals
the original token, among positions whose state is finite, computed on the device without a
host synchronisation (NaN when no position is finite).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

__all__ = ["choose_masked", "masked_token_accuracy"]


def choose_masked(input_ids: Tensor, special_ids: list[int], fraction: float, generator: torch.Generator) -> Tensor:
    """Bool ``(samples, tokens)``: ``max(1, round(fraction * n))`` of the ``n`` non-special tokens of
    each row, drawn uniformly without replacement with ``generator`` (none in a row with none)."""
    ids = input_ids.cpu()
    maskable = ~torch.isin(ids, torch.as_tensor(sorted(set(special_ids)), dtype=ids.dtype))
    out = torch.zeros(ids.shape, dtype=torch.bool)
    for i in range(ids.shape[0]):
        where = maskable[i].nonzero().flatten()
        n = int(where.numel())
        if n == 0:
            continue
        k = max(1, round(fraction * n))
        out[i, where[torch.randperm(n, generator=generator)[:k]]] = True
    return out


def masked_token_accuracy(head: Callable[[Tensor], Tensor], states: Tensor, labels: Tensor,
                          chunk: int = 4096) -> Tensor:
    """Accuracy of ``argmax head(states)`` against ``labels`` (a 0-d float64 tensor on the device).

    ``states``: ``(positions, hidden)``, the states at the masked positions; ``labels``:
    ``(positions,)`` the original token ids; ``head`` maps states to logits over the vocabulary,
    applied ``chunk`` positions at a time (logits of every position at once may not fit). Positions
    with a non-finite state are left out of both counts.
    """
    finite = torch.isfinite(states).all(dim=1)
    correct = torch.zeros((), dtype=torch.float64, device=states.device)
    for i in range(0, states.shape[0], chunk):
        pred = head(states[i:i + chunk]).argmax(dim=-1)
        correct += ((pred == labels[i:i + chunk]) & finite[i:i + chunk]).sum()
    return correct / finite.sum()
