"""Contextual decomposition (CD) of an LSTM stack and decompositional interdependence (DI).

CD (Murdoch, Liu & Yu 2018, "Beyond word importance", arXiv 1801.05453, Sec. 3) splits every
hidden state of an LSTM into h_t = beta_t + gamma_t: beta_t the contribution of the words in
focus, gamma_t that of the other words *and* of their interactions with the words in focus
(thesis, Saphra 2021: background Sec. 2.4.4, Eqs. 2.13-2.16; Ch. 5 paper Sec. 2.1, Eq. 1 and
Appendix A). Each gate activation is linearised with a Shapley split of its summands; the
decoder is linear, so the logits split as well. DI (Ch. 5 paper Sec. 2.2, Eq. 2) measures the
non-additivity of the beta parts of two disjoint word sets.

Conventions, following the published code where the paper leaves room: Murdoch's
(github.com/jamie-murdoch/ContextualDecomposition, ``train_model/sent_util.py``, ``CD``) and the
thesis author's fork of the ACD code (github.com/nsaphra/acd, ``acd/scores/cd.py``, ``cd_lstm``),
which agree except for the pure-bias product of the cell:

* A gate's pre-activation is rel + irr + b, with b = b_ih + b_hh. The bias is the baseline of a
  two-player Shapley split (``decomp_three``): L(rel) = 1/2 [s(rel+b) - s(b) + s(rel+irr+b) -
  s(irr+b)], L(irr) symmetrically, and s(b) stays a separate bias part. With b = 0 this is the
  thesis' L_sigma(y_beta) = 1/2 [s(y_beta) - s(0) + s(y_beta + y_gamma) - s(y_gamma)].
* Cell: i * g is expanded into its 9 products; beta gets rel_i (rel_g + b_g) + b_i rel_g, gamma
  the products that touch irr. The pure-bias product s(b_i) tanh(b_g) goes to beta at every
  position t in focus with ``convention="acd"`` (the default: nsaphra/acd, ``start <= i <= stop``
  since its commit 820fabd, "fixing a bug in the original contextual decomposition code", and
  ``index_is_relevant(i)`` later). Murdoch's ``CD`` gives it to beta for ``start <= i < stop``
  only, the focus span [start, stop] without its last word (a single word in focus never gets
  it); ``convention="murdoch"`` does that for each contiguous span of the focus mask. The two
  differ by exactly s(b_i) tanh(b_g) in c_beta (and -that in c_gamma) at each span's last position,
  and through it at later ones. Forget: beta gets (rel_f + b_f) c_beta, gamma the rest,
  f (c_beta + c_gamma) in all.
* The output gate is not split: o_t (from the full pre-activation) multiplies both halves of
  the two-player Shapley split of tanh(c_beta + c_gamma) (baseline 0).
* Stacks (the published code has one layer): layer l > 1 takes its input split from layer
  l - 1's (beta, gamma), and the bias rule above uses the same focus positions at every layer.
  So nothing in focus gives beta = 0 exactly, and with ``"acd"`` everything in focus gives
  gamma = 0 exactly.
* Decoder: logits_beta = W beta, logits_gamma = W gamma + bias (the published code leaves the
  bias out of both and checks "scores + irrel_scores = output - bias").

The initial state is zero, as in ``LSTMLanguageModel.forward`` with ``hidden=None``. The split
is exact: beta + gamma = h to rounding, at every layer and at the logits. All arithmetic is
float64; inputs may be torch tensors or numpy arrays, outputs are float64 tensors on the
weights' device. Weights use PyTorch's layout: ``W_ih`` (4H, d_in), ``W_hh`` (4H, H), biases
(4H,), gates stacked in the order i, f, g, o.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypedDict

import numpy as np

from analyses._arrays import check_token_ids

if TYPE_CHECKING:
    import torch
    from torch import Tensor

__all__ = [
    "CDResult",
    "Interdependence",
    "LSTMWeights",
    "contextual_decomposition",
    "decompositional_interdependence",
    "interdependence",
    "lstm_weights",
]

#: Where the cell's pure-bias product goes: nsaphra/acd's rule or Murdoch's (module docstring).
Convention = Literal["acd", "murdoch"]

#: One LSTM layer's ``(W_ih, W_hh, b_ih, b_hh)``, PyTorch layout, gates i, f, g, o.
LayerWeights = tuple[Any, Any, Any, Any]


class LSTMWeights(TypedDict):
    """Keyword arguments of :func:`contextual_decomposition` and :func:`interdependence`."""

    layers: tuple[LayerWeights, ...]
    embedding: Tensor | None
    decoder_weight: Tensor | None
    decoder_bias: Tensor | None


@dataclass(frozen=True)
class CDResult:
    """Relevant (beta) and irrelevant (gamma) parts of an LSTM stack's states and logits.

    Attributes
    ----------
    hidden_beta, hidden_gamma : Tensor, shape (layers, batch, seq, hidden)
        h_t = beta_t + gamma_t for every layer, bottom first.
    cell_beta, cell_gamma : Tensor, shape (layers, batch, seq, hidden)
        The same split of the cell states c_t.
    logits_beta, logits_gamma : Tensor, shape (batch, seq, n_out), or None
        Split of the decoder output of the top layer; the decoder bias is in gamma.
        None without a decoder.
    """

    hidden_beta: Tensor
    hidden_gamma: Tensor
    cell_beta: Tensor
    cell_gamma: Tensor
    logits_beta: Tensor | None
    logits_gamma: Tensor | None


@dataclass(frozen=True)
class Interdependence:
    """DI_t(A, B) per sentence (Ch. 5 Eq. 2).

    Attributes
    ----------
    hidden : Tensor, shape (layers, batch)
        DI of the hidden states of each layer, bottom first.
    logits : Tensor, shape (batch,), or None
        DI of the logits (None without a decoder).
    at : Tensor, shape (batch,), int64
        The time step t at which each sentence was read.
    """

    hidden: Tensor
    logits: Tensor | None
    at: Tensor


def _f64(x: Any, device: torch.device | None = None) -> Tensor:
    import torch  # lazy: torch

    t = torch.as_tensor(x)
    return t.to(device=device if device is not None else t.device, dtype=torch.float64)


def _focus_mask(focus: Any, batch: int, seq: int, device: torch.device, name: str = "focus") -> Tensor:
    """(batch, seq) bool mask from a bool mask, one position per sentence, or position collections."""
    import torch  # lazy: torch
    from torch import Tensor  # lazy: torch

    if isinstance(focus, (Tensor, np.ndarray)):
        f = torch.as_tensor(focus)
        if f.dtype == torch.bool:
            if tuple(f.shape) != (batch, seq):
                raise ValueError(f"{name} mask must be (batch, seq) = {(batch, seq)}, got {tuple(f.shape)}")
            return f.to(device)
        if f.is_floating_point() or f.is_complex():
            raise ValueError(f"{name} must be a bool mask or integer positions, got dtype {f.dtype}")
        if tuple(f.shape) != (batch,):
            raise ValueError(f"integer {name} must hold one position per sentence, shape ({batch},); "
                             f"got {tuple(f.shape)} (use a bool mask or a list of position lists)")
        focus = [[int(p)] for p in f.tolist()]
    if len(focus) != batch:
        raise ValueError(f"{name} must have one entry per sentence ({batch}), got {len(focus)}")
    mask = torch.zeros(batch, seq, dtype=torch.bool)
    for b, positions in enumerate(focus):
        positions = [positions] if isinstance(positions, (int, np.integer)) else list(positions)
        for p in positions:
            if isinstance(p, (bool, np.bool_)):
                raise ValueError(f"{name}: give a mask as a bool array (batch, seq), not as lists of bools")
            if not 0 <= int(p) < seq:
                raise ValueError(f"{name} position {p} of sentence {b} outside [0, {seq})")
            mask[b, int(p)] = True
    return mask.to(device)


def _shapley(rel: Tensor, irr: Tensor, bias: Tensor, act) -> tuple[Tensor, Tensor, Tensor]:
    # Two-player Shapley split of act(rel + irr + bias) with act(bias) as the baseline.
    both = act(rel + irr + bias)
    base = act(bias)
    with_rel, with_irr = act(rel + bias), act(irr + bias)
    return 0.5 * (with_rel - base + both - with_irr), 0.5 * (with_irr - base + both - with_rel), base.expand_as(rel)


def _bias_mask(mask: Tensor, convention: str) -> Tensor:
    """Positions whose pure-bias cell product goes to beta: the focus ("acd"), or the focus
    without the last position of each contiguous span ("murdoch": start <= t < stop)."""
    import torch  # lazy: torch

    if convention == "acd":
        return mask
    following = torch.zeros_like(mask)
    following[:, :-1] = mask[:, 1:]
    return mask & following


def _layer(
    xb: Tensor, xg: Tensor, mask: Tensor, w_ih: Tensor, w_hh: Tensor, bias: Tensor,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One layer's CD; ``mask`` (batch, seq) marks where the pure-bias product goes to beta."""
    import torch  # lazy: torch

    batch, seq, _ = xb.shape
    hidden = w_hh.shape[1]
    # Input projections of all steps at once: (batch, seq, 4H) each.
    pre_b, pre_g = xb @ w_ih.T, xg @ w_ih.T
    b_i, b_f, b_g, b_o = bias.split(hidden)
    hb = hg = cb = cg = xb.new_zeros(batch, hidden)
    out = [xb.new_empty(batch, seq, hidden) for _ in range(4)]
    for t in range(seq):
        rel = pre_b[:, t] + hb @ w_hh.T
        irr = pre_g[:, t] + hg @ w_hh.T
        rel_i, rel_f, rel_g, rel_o = rel.split(hidden, dim=1)
        irr_i, irr_f, irr_g, irr_o = irr.split(hidden, dim=1)
        ri, ii, bi = _shapley(rel_i, irr_i, b_i, torch.sigmoid)
        rf, if_, bf = _shapley(rel_f, irr_f, b_f, torch.sigmoid)
        rg, ig, bg = _shapley(rel_g, irr_g, b_g, torch.tanh)
        bias_to_beta = mask[:, t, None]
        bias_bias = bi * bg
        cb_new = ri * (rg + bg) + bi * rg + torch.where(bias_to_beta, bias_bias, 0.0) + (rf + bf) * cb
        cg_new = (ii * (rg + ig + bg) + (ri + bi) * ig + torch.where(bias_to_beta, 0.0, bias_bias)
                  + (rf + if_ + bf) * cg + if_ * cb)
        o = torch.sigmoid(rel_o + irr_o + b_o)
        t_all = torch.tanh(cb_new + cg_new)
        tb, tg = torch.tanh(cb_new), torch.tanh(cg_new)
        hb, hg = o * 0.5 * (tb + t_all - tg), o * 0.5 * (tg + t_all - tb)
        cb, cg = cb_new, cg_new
        for buf, value in zip(out, (hb, hg, cb, cg)):
            buf[:, t] = value
    return out[0], out[1], out[2], out[3]


def contextual_decomposition(
    inputs: Any,
    focus: Any,
    *,
    layers: Sequence[LayerWeights],
    embedding: Any = None,
    decoder_weight: Any = None,
    decoder_bias: Any = None,
    convention: Convention = "acd",
) -> CDResult:
    """Contextual decomposition h_t = beta_t + gamma_t of an LSTM stack (Murdoch et al. 2018).

    beta_t is the contribution of the positions in ``focus`` (thesis Eq. 2.13; Ch. 5 Eq. 1,
    Appendix A), from the Shapley-linearised gates described in the module docstring.

    Parameters
    ----------
    inputs : int array, shape (batch, seq), or float array, shape (batch, seq, d_in)
        Token ids (with ``embedding``; each in [0, vocab), else ``ValueError``: no padding id -1)
        or the first layer's input vectors (without).
    focus : bool array (batch, seq); int array (batch,); or a sequence of ``batch`` ints or
        collections of ints
        The words in focus (the set beta) of each sentence, as a mask or as positions.
    layers : sequence of (W_ih, W_hh, b_ih, b_hh)
        One entry per LSTM layer, bottom first; PyTorch layout and gate order i, f, g, o.
    embedding : array, shape (vocab, d_in), optional
        Embedding matrix; needed when ``inputs`` are token ids.
    decoder_weight : array, shape (n_out, H), optional
    decoder_bias : array, shape (n_out,), optional
        Linear decoder of the top layer; its bias goes to gamma.
    convention : {"acd", "murdoch"}
        Where the cell's pure-bias product goes (module docstring): to beta at every focus
        position (nsaphra/acd, the thesis' code; default), or at every one but the last of each
        contiguous span (Murdoch's published ``CD``).

    Returns
    -------
    CDResult
        float64 tensors on the device of the first layer's ``W_ih``.
    """
    import torch  # lazy: torch

    if convention not in ("acd", "murdoch"):
        raise ValueError(f"convention must be 'acd' or 'murdoch', got {convention!r}")
    if not layers:
        raise ValueError("layers must hold at least one (W_ih, W_hh, b_ih, b_hh)")
    device = torch.as_tensor(layers[0][0]).device
    x = torch.as_tensor(inputs).to(device)
    if embedding is not None:
        if x.is_floating_point() or x.ndim != 2:
            raise ValueError(f"with an embedding, inputs must be integer token ids (batch, seq); "
                             f"got {x.dtype} {tuple(x.shape)}")
        emb = _f64(embedding, device)
        if emb.ndim != 2:
            raise ValueError(f"embedding must be (vocab, d_in), got {tuple(emb.shape)}")
        check_token_ids(x, emb.shape[0], "inputs: token ids")
        x = emb[x]
    elif x.ndim != 3 or not x.is_floating_point():
        raise ValueError(f"without an embedding, inputs must be float vectors (batch, seq, d_in); "
                         f"got {x.dtype} {tuple(x.shape)}")
    x = x.to(torch.float64)
    batch, seq, _ = x.shape
    mask = _focus_mask(focus, batch, seq, device)
    xb = torch.where(mask[..., None], x, 0.0)
    xg = x - xb
    bias_mask = _bias_mask(mask, convention)
    outs = []
    for n, weights in enumerate(layers):
        if len(weights) != 4:
            raise ValueError(f"layer {n}: expected (W_ih, W_hh, b_ih, b_hh), got {len(weights)} arrays")
        w_ih, w_hh, b_ih, b_hh = (_f64(w, device) for w in weights)
        hidden = w_hh.shape[1]
        if (w_ih.shape != (4 * hidden, xb.shape[-1]) or w_hh.shape != (4 * hidden, hidden)
                or b_ih.shape != (4 * hidden,) or b_hh.shape != (4 * hidden,)):
            raise ValueError(f"layer {n}: shapes W_ih {tuple(w_ih.shape)}, W_hh {tuple(w_hh.shape)}, b_ih "
                             f"{tuple(b_ih.shape)}, b_hh {tuple(b_hh.shape)} do not fit input size "
                             f"{xb.shape[-1]} and hidden size {hidden} (expected (4H, d_in), (4H, H), (4H,))")
        hb, hg, cb, cg = _layer(xb, xg, bias_mask, w_ih, w_hh, b_ih + b_hh)
        outs.append((hb, hg, cb, cg))
        xb, xg = hb, hg
    hidden_beta, hidden_gamma, cell_beta, cell_gamma = (torch.stack(parts) for parts in zip(*outs))
    logits_beta = logits_gamma = None
    if decoder_weight is not None:
        w = _f64(decoder_weight, device)
        if w.ndim != 2 or w.shape[1] != xb.shape[-1]:
            raise ValueError(f"decoder_weight must be (n_out, {xb.shape[-1]}), got {tuple(w.shape)}")
        logits_beta, logits_gamma = xb @ w.T, xg @ w.T
        if decoder_bias is not None:
            logits_gamma = logits_gamma + _f64(decoder_bias, device)
    elif decoder_bias is not None:
        raise ValueError("decoder_bias given without decoder_weight")
    return CDResult(hidden_beta, hidden_gamma, cell_beta, cell_gamma, logits_beta, logits_gamma)


def lstm_weights(model: Any) -> LSTMWeights:
    """Weights of a ``models.lstm`` LSTM stack, as keyword arguments of the CD functions.

    ``contextual_decomposition(input_ids, focus, **lstm_weights(model))`` decomposes
    ``model(input_ids)`` (dropout off, as in ``eval()``). Duck-typed, so ``analyses`` does not
    import ``models``: ``model`` needs ``embedding`` (``nn.Embedding``), ``lstms()`` (a list of
    unidirectional ``nn.LSTM``, bottom first, any ``num_layers``) and ``decoder`` (``nn.Linear``),
    like ``LSTMLanguageModel`` and ``LSTMTagger``. Tensors are detached, not copied.
    """
    layers = []
    for lstm in model.lstms():
        if getattr(lstm, "bidirectional", False) or getattr(lstm, "proj_size", 0):
            raise ValueError("CD needs unidirectional LSTMs without projections")
        for k in range(lstm.num_layers):
            w_ih = getattr(lstm, f"weight_ih_l{k}").detach()
            w_hh = getattr(lstm, f"weight_hh_l{k}").detach()
            if lstm.bias:
                b_ih, b_hh = getattr(lstm, f"bias_ih_l{k}").detach(), getattr(lstm, f"bias_hh_l{k}").detach()
            else:
                b_ih = b_hh = w_ih.new_zeros(w_ih.shape[0])
            layers.append((w_ih, w_hh, b_ih, b_hh))
    decoder = model.decoder
    bias = decoder.bias.detach() if decoder.bias is not None else None
    return LSTMWeights(layers=tuple(layers), embedding=model.embedding.weight.detach(),
                       decoder_weight=decoder.weight.detach(), decoder_bias=bias)


def decompositional_interdependence(h_union: Any, h_a: Any, h_b: Any) -> Tensor:
    """DI = ||h_{A u B} - (h_A + h_B)||_2 / ||h_{A u B}||_2 (thesis Ch. 5 paper Sec. 2.2, Eq. 2).

    ``h_X`` is the relevant (beta) part of a representation when the set X is in focus; DI is 0
    when the contributions of A and B add up, i.e. A and B are decomposable.

    Parameters
    ----------
    h_union, h_a, h_b : array, shape (..., d)
        Same shape; the last axis holds the vector.

    Returns
    -------
    Tensor, shape (...)
        float64; NaN where ``h_union`` and the residual are both zero, inf where only h_union is.
    """
    import torch  # lazy: torch

    u, a, b = (_f64(v) for v in (h_union, h_a, h_b))
    if not u.shape == a.shape == b.shape or u.ndim == 0:
        raise ValueError(f"h_union, h_a, h_b must share one shape (..., d); got "
                         f"{tuple(u.shape)}, {tuple(a.shape)}, {tuple(b.shape)}")
    a, b = a.to(u.device), b.to(u.device)
    return torch.linalg.vector_norm(u - (a + b), dim=-1) / torch.linalg.vector_norm(u, dim=-1)


def interdependence(
    inputs: Any,
    a: Any,
    b: Any,
    *,
    layers: Sequence[LayerWeights],
    embedding: Any = None,
    decoder_weight: Any = None,
    decoder_bias: Any = None,
    at: Any = None,
    convention: Convention = "acd",
) -> Interdependence:
    """DI_t(A, B) of disjoint word sets A, B per sentence, from three CD runs (Ch. 5 Sec. 2.2).

    Runs :func:`contextual_decomposition` with A, B and A u B in focus (one batch of 3 x batch
    sentences) and compares the beta parts at step t by :func:`decompositional_interdependence`.
    By default t = max(idx(A), idx(B)), "the lowest timestep accommodating all spans in focus"
    (Ch. 5 Sec. 2.2). For several word pairs of one sentence, repeat the sentence once per pair:
    ``a``, ``b`` as int arrays of shape (batch,) then give one word each.

    Parameters
    ----------
    inputs : array, shape (batch, seq) or (batch, seq, d_in)
        As in :func:`contextual_decomposition`.
    a, b : focus specifications, as ``focus`` in :func:`contextual_decomposition`
        Non-empty and disjoint in every sentence.
    layers, embedding, decoder_weight, decoder_bias
        As in :func:`contextual_decomposition` (e.g. ``**lstm_weights(model)``).
    at : int array, shape (batch,), optional
        Step t per sentence; default the last position of A u B.
    convention : {"acd", "murdoch"}
        As in :func:`contextual_decomposition`.

    Returns
    -------
    Interdependence
        DI of each layer's hidden state and of the logits, float64, shape (..., batch).
    """
    import torch  # lazy: torch

    x = torch.as_tensor(inputs)
    if x.ndim not in (2, 3):
        raise ValueError(f"inputs must be (batch, seq) ids or (batch, seq, d_in) vectors, got {tuple(x.shape)}")
    batch, seq = x.shape[:2]
    mask_a = _focus_mask(a, batch, seq, torch.device("cpu"), "a")
    mask_b = _focus_mask(b, batch, seq, torch.device("cpu"), "b")
    if not (mask_a.any(1) & mask_b.any(1)).all():
        raise ValueError("a and b must each hold at least one position in every sentence")
    if (mask_a & mask_b).any():
        raise ValueError("a and b must be disjoint (A n B = {} in Eq. 2)")
    union = mask_a | mask_b
    if at is None:
        positions = torch.arange(seq).expand(batch, seq)
        t = torch.where(union, positions, -1).amax(dim=1)
    else:
        t = torch.as_tensor(at).to(torch.int64).reshape(-1)
        if t.shape != (batch,) or (t < 0).any() or (t >= seq).any():
            raise ValueError(f"at must hold one step in [0, {seq}) per sentence, shape ({batch},)")
    res = contextual_decomposition(
        torch.cat([x, x, x]), torch.cat([union, mask_a, mask_b]), layers=layers,
        embedding=embedding, decoder_weight=decoder_weight, decoder_bias=decoder_bias, convention=convention,
    )
    rows = torch.arange(batch, device=res.hidden_beta.device)
    t_dev = t.to(res.hidden_beta.device)

    def di(beta: Tensor) -> Tensor:  # beta: (..., 3 batch, seq, d) -> (..., batch)
        picked = beta.unflatten(-3, (3, batch))[..., rows, t_dev, :]  # (..., 3, batch, d)
        return decompositional_interdependence(picked[..., 0, :, :], picked[..., 1, :, :], picked[..., 2, :, :])

    logits = di(res.logits_beta) if res.logits_beta is not None else None
    return Interdependence(hidden=di(res.hidden_beta), logits=logits, at=t)
