"""Probability of a rule's close symbol, from the whole model or from the words in focus (CD).

Saphra 2021, Ch. 5 paper (Saphra & Lopez 2020), Sec. 4.3: Fig. 7, "mean marginal target
probability of the close symbol in a rule", P(x_t = omega | x_<t); Fig. 8, "mean target probability
of omega at its correct timestep based on CD with alpha in focus"; Sec. 2.1: "We can use softmax to
convert the relevant logits v^t_beta into a probability distribution as P(Y | x_beta) =
softmax(v^t_beta)". Fig. 11 (Appendix B) does the same with the scaffold in focus.

The logits at position t - 1 predict x_t: for a rule alpha q omega with alpha at position a and
scaffold length k, omega is predicted from position a + k.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from analyses._arrays import check_token_ids
from analyses.contextual_decomposition import Convention, contextual_decomposition

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["cd_target_probability", "target_probability"]


def target_probability(logits: Any, position: int, target: int) -> Tensor:
    """softmax(logits[:, position])[target] per sequence: P(x_{position+1} = target | x_<=position).

    Parameters
    ----------
    logits : array, shape (batch, seq, vocab)
    position : int
        The step whose output predicts the target, in [0, seq).
    target : int
        Token id, in [0, vocab).

    Returns
    -------
    Tensor, shape (batch,), float64
    """
    import torch  # lazy: torch

    x = torch.as_tensor(logits).to(torch.float64)
    if x.ndim != 3:
        raise ValueError(f"logits must be (batch, seq, vocab), got {tuple(x.shape)}")
    if not 0 <= position < x.shape[1]:
        raise ValueError(f"position {position} outside the logits' {x.shape[1]} steps [0, {x.shape[1]})")
    check_token_ids(torch.tensor([target]), x.shape[2], "target id", "the logits")
    return torch.softmax(x[:, position], dim=-1)[:, target]


def cd_target_probability(inputs: Any, focus: Any, position: int, target: int, *, layers, embedding=None,
                          decoder_weight=None, decoder_bias=None, convention: Convention = "acd") -> Tensor:
    """softmax(v_beta)[target] at ``position``: the target's probability from the words in focus
    alone (Ch. 5 Sec. 2.1), v_beta the relevant logits of :func:`contextual_decomposition`
    (decoder bias excluded, as it belongs to gamma).

    Parameters
    ----------
    inputs : int array (batch, seq) with ``embedding``, or float (batch, seq, d_in)
    focus : focus specification of :func:`contextual_decomposition` (bool mask (batch, seq), ...)
    position, target : as in :func:`target_probability`
    layers, embedding, decoder_weight, decoder_bias : the network (``**lstm_weights(model)``)
    convention : "acd" or "murdoch", as in :func:`contextual_decomposition`

    Returns
    -------
    Tensor, shape (batch,), float64
    """
    if decoder_weight is None:
        raise ValueError("cd_target_probability needs the decoder (decoder_weight)")
    res = contextual_decomposition(inputs, focus, layers=layers, embedding=embedding, decoder_weight=decoder_weight,
                                   decoder_bias=decoder_bias, convention=convention)
    return target_probability(res.logits_beta, position, target)
