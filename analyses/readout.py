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

:func:`ridge_readout_accuracy` is the "fine-tuned" setting: a linear decoder (with a bias) fitted
afresh to one step's states of a training split, in closed form as ridge regression on one-hot
targets, W = (X^T X + lambda I)^{-1} X^T Y with lambda = ``ridge`` times the mean of diag(X^T X),
and scored by the accuracy of its arg-max on the held-out split. (The paper re-trains its decoder,
a softmax regression; least squares is the closed-form linear decoder, fitted on the device with
no host synchronisation.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch
    from torch import Tensor


__all__ = ["choose_masked", "masked_token_accuracy", "ridge_decoder", "ridge_readout_accuracy"]


def choose_masked(input_ids: Tensor, special_ids: list[int], fraction: float, generator: torch.Generator) -> Tensor:
    """Bool ``(samples, tokens)``: ``max(1, round(fraction * n))`` of the ``n`` non-special tokens of
    each row, drawn uniformly without replacement with ``generator`` (none in a row with none)."""
    import torch  # lazy: torch

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
    import torch  # lazy: torch

    finite = torch.isfinite(states).all(dim=1)
    correct = torch.zeros((), dtype=torch.float64, device=states.device)
    for i in range(0, states.shape[0], chunk):
        pred = head(states[i:i + chunk]).argmax(dim=-1)
        correct += ((pred == labels[i:i + chunk]) & finite[i:i + chunk]).sum()
    return correct / finite.sum()


def _with_bias(x: Tensor) -> tuple[Tensor, Tensor]:
    """``[x, 1]`` in float64 with non-finite rows zeroed, and the finite-row mask."""
    import torch  # lazy: torch

    finite = torch.isfinite(x).all(dim=1)
    xb = torch.cat([x.double(), torch.ones(x.shape[0], 1, dtype=torch.float64, device=x.device)], dim=1)
    return torch.where(finite[:, None], xb, torch.zeros((), dtype=torch.float64, device=x.device)), finite


def ridge_decoder(states: Tensor, labels: Tensor, vocab: int, ridge: float = 1e-3) -> Tensor:
    """``(hidden + 1, vocab)`` float64: the ridge-regression decoder of one-hot ``labels`` from
    ``[states, 1]`` (rows with a non-finite state left out)."""
    import torch  # lazy: torch

    x, _ = _with_bias(states)
    gram = x.T @ x
    gram = gram + ridge * gram.diagonal().mean().clamp_min(1e-300) * torch.eye(gram.shape[0], dtype=gram.dtype,
                                                                               device=gram.device)
    xty = torch.zeros(vocab, x.shape[1], dtype=torch.float64, device=x.device).index_add_(0, labels, x)
    chol, _ = torch.linalg.cholesky_ex(gram)  # the _ex variant: no host synchronisation for its error check
    return torch.cholesky_solve(xty.T, chol)


def ridge_readout_accuracy(train_states: Tensor, train_labels: Tensor, test_states: Tensor, test_labels: Tensor,
                           vocab: int, ridge: float = 1e-3, chunk: int = 4096) -> Tensor:
    """Held-out accuracy (0-d float64) of :func:`ridge_decoder` fitted on the training split."""
    w = ridge_decoder(train_states, train_labels, vocab, ridge)
    return masked_token_accuracy(lambda s: _with_bias(s)[0] @ w, test_states, test_labels, chunk)
