"""Magnitude of the error gradient carried back from a rule's close symbol, by distance.

Saphra 2021 (PhD thesis), Ch. 5 paper (Saphra & Lopez 2020), Appendix C, Fig. 12: "Average
gradient magnitude [of E_t with respect to the hidden state at t - k + d], varying d up to the length
of the scaffold". The message is the one of Sec. 4.3 ("Vanishing Gradients"), the gradient of the
error e_t at omega's step carried back through the scaffold to the hidden state:

    d e_t / d h_{t-k} = d e_t / d h_t  prod_{i=1..k}  d h_{t-i+1} / d h_{t-i}.

Here e_t = -log softmax(W h^L_p + b)[omega], the cross-entropy of omega at its step (the output at
position p, the last scaffold word's, predicts it), and the gradient is taken with respect to the
top LSTM layer's hidden state h_{a+d} at position a + d, for alpha at position a and d = 0 .. p - a:
d = 0 is alpha's step, d = p - a (= k) the step that predicts omega. For an LSTM the derivative is
the total one through every path from h_{a+d} to e_t (the next hidden and cell states, and the layers
above). The magnitude is the Euclidean norm, per sequence; Fig. 12 averages it over rule instances.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from analyses._arrays import check_token_ids

if TYPE_CHECKING:
    import torch
    from torch import Tensor

__all__ = ["gradient_by_distance", "lstm_forward"]


def _f64(x: Any, device: torch.device) -> Tensor:
    import torch  # lazy: torch

    return torch.as_tensor(x).to(device=device, dtype=torch.float64)


def lstm_forward(inputs: Tensor, layers: Sequence[tuple[Any, Any, Any, Any]]) -> list[list[Tensor]]:
    """The hidden states of a unidirectional LSTM stack from a zero state, one step at a time, so
    that each ``h_t`` is a node of the autograd graph.

    Parameters
    ----------
    inputs : Tensor, shape (batch, seq, d_in), float64
    layers : per layer ``(W_ih, W_hh, b_ih, b_hh)`` in PyTorch's layout (gates i, f, g, o), bottom first

    Returns
    -------
    ``states[l][t]``, shape (batch, hidden): layer l's hidden state at step t.
    """
    import torch  # lazy: torch

    x = [inputs[:, t] for t in range(inputs.shape[1])]
    states = []
    for w_ih, w_hh, b_ih, b_hh in layers:
        w_ih, w_hh = _f64(w_ih, inputs.device), _f64(w_hh, inputs.device)
        bias = _f64(b_ih, inputs.device) + _f64(b_hh, inputs.device)
        hidden = w_hh.shape[1]
        h = c = inputs.new_zeros(inputs.shape[0], hidden)
        out = []
        for xt in x:
            i, f, g, o = (xt @ w_ih.T + h @ w_hh.T + bias).split(hidden, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            out.append(h)
        states.append(out)
        x = out
    return states


def gradient_by_distance(inputs: Any, start: int, position: int, target: int, *, layers, embedding=None,
                         decoder_weight=None, decoder_bias=None) -> Tensor:
    """``||d e / d h_{start+d}||`` for d = 0 .. position - start, per sequence (Ch. 5 App. C, Fig. 12).

    ``e = -log softmax(decoder(h_position))[target]`` is the error of the output at ``position``
    (which predicts token ``position + 1``), ``h`` the top layer's hidden state; the network reads
    each sequence from a zero state, in float64.

    Parameters
    ----------
    inputs : int array (batch, seq) with ``embedding``, or float (batch, seq, d_in)
    start : int
        The first position measured (the open symbol alpha), ``0 <= start <= position``.
    position : int
        The step whose output is scored, ``< seq``.
    target : int
        Token id scored, in ``[0, vocab)``.
    layers, embedding, decoder_weight, decoder_bias : the network
        (``**analyses.contextual_decomposition.lstm_weights(model)``)

    Returns
    -------
    Tensor, shape (batch, position - start + 1), float64
    """
    import torch  # lazy: torch

    if decoder_weight is None:
        raise ValueError("gradient_by_distance needs the decoder (decoder_weight)")
    if not layers:
        raise ValueError("gradient_by_distance needs at least one LSTM layer")
    dev = torch.as_tensor(decoder_weight).device
    x = torch.as_tensor(inputs, device=dev)
    if embedding is not None:
        if x.ndim != 2 or x.is_floating_point():
            raise ValueError(f"with an embedding, inputs must be token ids (batch, seq), got {tuple(x.shape)} {x.dtype}")
        emb = _f64(embedding, dev)
        check_token_ids(x, emb.shape[0], "input id", "the embedding")
        x = emb[x]
    elif x.ndim != 3:
        raise ValueError(f"inputs must be token ids with an embedding, or vectors (batch, seq, d_in); got {tuple(x.shape)}")
    x = x.to(torch.float64)
    if not 0 <= start <= position < x.shape[1]:
        raise ValueError(f"need 0 <= start ({start}) <= position ({position}) < sequence length ({x.shape[1]})")
    w = _f64(decoder_weight, dev)
    check_token_ids(torch.tensor([target]), w.shape[0], "target id", "the decoder")
    with torch.enable_grad():
        x = x[:, : position + 1].detach().requires_grad_(True)  # puts every h_t in the autograd graph
        top = lstm_forward(x, layers)[-1]
        logits = top[position] @ w.T
        if decoder_bias is not None:
            logits = logits + _f64(decoder_bias, dev)
        error = -torch.log_softmax(logits, dim=-1)[:, target]
        measured = top[start: position + 1]
        grads = torch.autograd.grad(error.sum(), measured)  # sequences are independent: the sum keeps each one's own
    return torch.stack([g.norm(dim=-1) for g in grads], dim=1).detach()
