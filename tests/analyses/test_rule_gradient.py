"""Known answers for the error gradient by distance (Ch. 5 App. C, Fig. 12; analyses/rule_gradient.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from analyses.contextual_decomposition import lstm_weights
from analyses.rule_gradient import gradient_by_distance, lstm_forward
from models.lstm import LSTMLanguageModel, LSTMLanguageModelConfig

H, V = 3, 5


def _resting_lstm(u: float):
    """One layer whose input, forget and output gates are saturated constants (biases +-40: sigma is 1
    or 4e-18 in float64) and whose candidate is tanh(u h_{t-1}); the inputs are ignored (W_ih = 0).
    From the zero state h stays 0, so every recurrence derivative d h_{t+1} / d h_t is exactly u I
    (tanh'(0) = 1, and the forget path carries 4e-18 of the cell): the message back from step p to
    step p - j is u^j times the one at p, the thesis' product of recurrence derivatives."""
    w_ih = torch.zeros(4 * H, 2, dtype=torch.float64)
    w_hh = torch.zeros(4 * H, H, dtype=torch.float64)
    w_hh[2 * H: 3 * H] = u * torch.eye(H, dtype=torch.float64)
    b_ih = torch.cat([torch.full((H,), 40.0), torch.full((H,), -40.0), torch.zeros(H), torch.full((H,), 40.0)]).double()
    return (w_ih, w_hh, b_ih, torch.zeros(4 * H, dtype=torch.float64))


@pytest.mark.parametrize("u", [0.5, -2.0])
def test_the_message_scales_by_the_recurrence_derivative_per_step(u):
    gen = torch.Generator().manual_seed(0)
    decoder_w = torch.randn(V, H, generator=gen, dtype=torch.float64)
    decoder_b = torch.randn(V, generator=gen, dtype=torch.float64)
    embedding = torch.randn(V, 2, generator=gen, dtype=torch.float64)
    inputs = torch.tensor([[3, 0, 4, 2, 2, 3, 1], [2, 0, 2, 3, 4, 4, 1]])
    start, position, target = 1, 5, 1  # alpha at 1, scaffold 2..5 (k = 4), omega at 6
    got = gradient_by_distance(inputs, start, position, target, layers=[_resting_lstm(u)], embedding=embedding,
                               decoder_weight=decoder_w, decoder_bias=decoder_b)
    # by hand: h_p = 0, so the logits are the decoder bias and d e / d h_p = W^T (softmax(b) - e_target)
    p = np.exp(decoder_b.numpy()) / np.exp(decoder_b.numpy()).sum()
    p[target] -= 1.0
    at_p = np.linalg.norm(decoder_w.numpy().T @ p)
    k = position - start
    want = np.array([abs(u) ** (k - d) * at_p for d in range(k + 1)])
    assert got.shape == (2, k + 1) and got.dtype == torch.float64
    np.testing.assert_allclose(got.numpy(), np.stack([want, want]), rtol=1e-12)


def _model(num_layers: int) -> LSTMLanguageModel:
    torch.manual_seed(3)
    return LSTMLanguageModel(LSTMLanguageModelConfig(V, 4, 6, num_layers, dropout=0.0)).double().eval()


@pytest.mark.parametrize("num_layers", [1, 2])
def test_the_stepwise_lstm_is_the_models_own_and_the_last_step_has_the_closed_form(num_layers):
    """The step-by-step forward equals torch.nn.LSTM's; at d = k the gradient is the softmax's closed
    form W^T (softmax(logits) - e_target), with the logits of the model itself."""
    model = _model(num_layers)
    inputs = torch.randint(0, V, (4, 6), generator=torch.Generator().manual_seed(1))
    weights = lstm_weights(model)
    with torch.no_grad():
        logits, _ = model(inputs)
        emb = weights["embedding"][inputs]
    top = torch.stack(lstm_forward(emb, weights["layers"])[-1], dim=1)
    np.testing.assert_allclose(top @ weights["decoder_weight"].T + weights["decoder_bias"], logits, rtol=1e-10,
                               atol=1e-12)
    got = gradient_by_distance(inputs, 1, 4, 2, **weights)
    p = torch.softmax(logits[:, 4], dim=-1)
    p[:, 2] -= 1.0
    np.testing.assert_allclose(got[:, -1], (p @ weights["decoder_weight"]).norm(dim=-1), rtol=1e-10)
    assert (got > 0).all()


@pytest.mark.parametrize("num_layers", [1, 2])
def test_every_distance_matches_central_differences_through_torchs_lstm(num_layers):
    """d e / d h_tau by perturbing the top layer's carried state h_tau of the model's own nn.LSTM
    (run to tau, perturbed, run on to p): central differences, component by component."""
    model = _model(num_layers)
    inputs = torch.randint(0, V, (2, 7), generator=torch.Generator().manual_seed(2))
    start, position, target = 1, 5, 3
    got = gradient_by_distance(inputs, start, position, target, **lstm_weights(model))

    def error(tau: int, delta: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            logits, state = model(inputs[:, : tau + 1])
            if tau < position:
                h, c = state[-1]
                state = (*state[:-1], (h + delta, c))
                logits, _ = model(inputs[:, tau + 1: position + 1], state)
            else:
                logits = logits + delta @ model.decoder.weight.T
        return -torch.log_softmax(logits[:, -1], dim=-1)[:, target]

    eps = 1e-6
    for d in range(position - start + 1):
        tau = start + d
        grad = torch.stack([(error(tau, eps * e) - error(tau, -eps * e)) / (2 * eps)
                            for e in torch.eye(model.hidden_dim, dtype=torch.float64)], dim=-1)
        np.testing.assert_allclose(got[:, d], grad.norm(dim=-1), rtol=1e-6)


def test_bad_positions_and_ids_are_named():
    w = lstm_weights(_model(1))
    inputs = torch.zeros(1, 4, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"start \(3\) <= position \(2\)"):
        gradient_by_distance(inputs, 3, 2, 0, **w)
    with pytest.raises(ValueError, match=r"position \(4\) < sequence length \(4\)"):
        gradient_by_distance(inputs, 0, 4, 0, **w)
    with pytest.raises(ValueError, match=r"target id 9 outside \[0, 5\)"):
        gradient_by_distance(inputs, 0, 2, 9, **w)
