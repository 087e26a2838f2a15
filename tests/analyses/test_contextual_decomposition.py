"""Known answers for contextual decomposition (CD) and decompositional interdependence (DI)."""

import math

import numpy as np
import pytest
import torch

from analyses.contextual_decomposition import (
    contextual_decomposition,
    decompositional_interdependence,
    interdependence,
    lstm_weights,
)
from models.lstm import LSTMLanguageModel, LSTMLanguageModelConfig, capture


def _model(seed: int, vocab: int = 11, emb: int = 5, hidden: int = 4, layers: int = 2) -> LSTMLanguageModel:
    torch.manual_seed(seed)
    model = LSTMLanguageModel(LSTMLanguageModelConfig(vocab, emb, hidden, layers)).double().eval()
    with torch.no_grad():  # larger weights: gates well inside their nonlinear range
        for lstm in model.lstms():
            for p in lstm.parameters():
                p.mul_(3.0)
        model.embedding.weight.mul_(10.0)
        model.decoder.bias.uniform_(-1.0, 1.0)
    return model


def _ids(seed: int, batch: int, seq: int, vocab: int = 11) -> torch.Tensor:
    return torch.randint(vocab, (batch, seq), generator=torch.Generator().manual_seed(seed))


def _forward(model, ids):
    with torch.no_grad(), capture(model, ["lstm1", "lstm2"]) as cap:
        logits, _ = model(ids)
    return torch.stack([cap["lstm1"], cap["lstm2"]]), logits


def test_beta_plus_gamma_is_the_forward_pass():
    model = _model(0)
    ids = _ids(1, 4, 9)
    focus = torch.rand(4, 9, generator=torch.Generator().manual_seed(2)) < 0.4
    res = contextual_decomposition(ids, focus, **lstm_weights(model))
    hidden, logits = _forward(model, ids)
    assert res.hidden_beta.dtype == torch.float64 and res.hidden_beta.shape == (2, 4, 9, 4)
    torch.testing.assert_close(res.hidden_beta + res.hidden_gamma, hidden, rtol=0, atol=1e-13)
    torch.testing.assert_close(res.logits_beta + res.logits_gamma, logits, rtol=0, atol=1e-12)
    # The parts are far from trivial: beta carries a real share of h.
    assert res.hidden_beta.abs().mean() > 0.1 * hidden.abs().mean()


def test_nothing_or_everything_in_focus():
    model = _model(3)
    ids = _ids(4, 3, 6)
    weights = lstm_weights(model)
    hidden, logits = _forward(model, ids)
    none = contextual_decomposition(ids, torch.zeros(3, 6, dtype=torch.bool), **weights)
    assert torch.equal(none.hidden_beta, torch.zeros_like(none.hidden_beta))
    assert torch.equal(none.cell_beta, torch.zeros_like(none.cell_beta))
    assert torch.equal(none.logits_beta, torch.zeros_like(none.logits_beta))
    torch.testing.assert_close(none.hidden_gamma, hidden, rtol=0, atol=1e-13)
    every = contextual_decomposition(ids, torch.ones(3, 6, dtype=torch.bool), **weights)
    assert torch.equal(every.hidden_gamma, torch.zeros_like(every.hidden_gamma))
    torch.testing.assert_close(every.hidden_beta, hidden, rtol=0, atol=1e-13)
    # Only the decoder bias is left in gamma.
    torch.testing.assert_close(every.logits_gamma, model.decoder.bias.expand_as(logits), rtol=0, atol=0)
    torch.testing.assert_close(every.logits_beta, logits - model.decoder.bias, rtol=0, atol=1e-12)


def _sigmoid(v):
    return 1.0 / (1.0 + math.exp(-v))


def test_one_unit_lstm_by_hand():
    # One unit, input size 1, W_hh = 0, zero biases, two steps, word 0 in focus.
    # Bias parts are s(0) = 1/2 for sigmoid gates and tanh(0) = 0 for g.
    # t = 0 (in focus, nothing irrelevant yet): L(rel_i) = s(a_i) - 1/2, L(rel_g) = tanh(a_g), so
    #   c_beta = (s(a_i) - 1/2) tanh(a_g) + 1/2 tanh(a_g) = s(a_i) tanh(a_g) = c_0, c_gamma = 0.
    # t = 1 (out of focus, W_hh = 0 so rel = 0): L(irr_i) = s(b_i) - 1/2, L(irr_f) = s(b_f) - 1/2,
    #   c_beta = (0 + 1/2) c_0  (the forget gate's bias half keeps half of c_0 relevant),
    #   c_gamma = (s(b_i) - 1/2 + 1/2) tanh(b_g) + (s(b_f) - 1/2) c_0,
    #   h_beta = s(b_o) 1/2 [tanh(c_beta) + tanh(c_1) - tanh(c_gamma)], h_gamma symmetrically.
    w = np.array([[0.7], [-1.3], [1.1], [0.4]])  # rows: i, f, g, o
    x0, x1 = 1.5, -0.8
    a_i, _, a_g, a_o = (w[:, 0] * x0).tolist()
    b_i, b_f, b_g, b_o = (w[:, 0] * x1).tolist()
    c0 = _sigmoid(a_i) * math.tanh(a_g)
    h0 = _sigmoid(a_o) * math.tanh(c0)
    c1 = _sigmoid(b_f) * c0 + _sigmoid(b_i) * math.tanh(b_g)
    cb1 = 0.5 * c0
    cg1 = _sigmoid(b_i) * math.tanh(b_g) + (_sigmoid(b_f) - 0.5) * c0
    hb1 = _sigmoid(b_o) * 0.5 * (math.tanh(cb1) + math.tanh(c1) - math.tanh(cg1))
    hg1 = _sigmoid(b_o) * 0.5 * (math.tanh(cg1) + math.tanh(c1) - math.tanh(cb1))

    layer = (w, np.zeros((4, 1)), np.zeros(4), np.zeros(4))
    res = contextual_decomposition(np.array([[[x0], [x1]]]), [[0]], layers=[layer])
    assert res.logits_beta is None
    expected = {
        "cell_beta": [c0, cb1], "cell_gamma": [0.0, cg1],
        "hidden_beta": [h0, hb1], "hidden_gamma": [0.0, hg1],
    }
    for name, values in expected.items():
        got = getattr(res, name).reshape(-1).tolist()
        assert got == pytest.approx(values, abs=1e-15), name


# ---- an independent, unbatched transcription of the published CD equations --------------------


def _sig(v):
    return 1.0 / (1.0 + np.exp(-v))


def _shapley_two(rel, irr, bias, act):
    rel_part = 0.5 * (act(rel + bias) - act(bias) + act(rel + irr + bias) - act(irr + bias))
    irr_part = 0.5 * (act(irr + bias) - act(bias) + act(rel + irr + bias) - act(rel + bias))
    return rel_part, irr_part, act(bias)


def _reference_cd(vectors, focus, layers, w_out, b_out, bias_positions=None):
    """One sentence: vectors (T, d), focus a set of positions; returns per-layer (rel_h, irrel_h).
    ``bias_positions``: where the pure-bias cell product is relevant (default: the focus)."""
    T = len(vectors)
    bias_positions = focus if bias_positions is None else bias_positions
    rel_in = [vectors[t] if t in focus else np.zeros_like(vectors[t]) for t in range(T)]
    irr_in = [np.zeros_like(vectors[t]) if t in focus else vectors[t] for t in range(T)]
    per_layer = []
    for w_ih, w_hh, b_ih, b_hh in layers:
        H = w_hh.shape[1]
        W_i, W_f, W_g, W_o = np.split(w_ih, 4)
        V_i, V_f, V_g, V_o = np.split(w_hh, 4)
        b_i, b_f, b_g, b_o = np.split(b_ih + b_hh, 4)
        relevant, irrelevant = np.zeros((T, H)), np.zeros((T, H))
        relevant_h, irrelevant_h = np.zeros((T, H)), np.zeros((T, H))
        for t in range(T):
            prev_rel_h = relevant_h[t - 1] if t > 0 else np.zeros(H)
            prev_irr_h = irrelevant_h[t - 1] if t > 0 else np.zeros(H)
            rel_i = W_i @ rel_in[t] + V_i @ prev_rel_h
            rel_f = W_f @ rel_in[t] + V_f @ prev_rel_h
            rel_g = W_g @ rel_in[t] + V_g @ prev_rel_h
            irr_i = W_i @ irr_in[t] + V_i @ prev_irr_h
            irr_f = W_f @ irr_in[t] + V_f @ prev_irr_h
            irr_g = W_g @ irr_in[t] + V_g @ prev_irr_h
            ri, ii, bi = _shapley_two(rel_i, irr_i, b_i, _sig)
            rg, ig, bg = _shapley_two(rel_g, irr_g, b_g, np.tanh)
            relevant[t] = ri * (rg + bg) + bi * rg
            irrelevant[t] = ii * (rg + ig + bg) + (ri + bi) * ig
            if t in bias_positions:
                relevant[t] += bi * bg
            else:
                irrelevant[t] += bi * bg
            if t > 0:
                rf, if_, bf = _shapley_two(rel_f, irr_f, b_f, _sig)
                relevant[t] += (rf + bf) * relevant[t - 1]
                irrelevant[t] += (rf + if_ + bf) * irrelevant[t - 1] + if_ * relevant[t - 1]
            o = _sig(W_o @ (rel_in[t] + irr_in[t]) + V_o @ (prev_rel_h + prev_irr_h) + b_o)
            a, b = relevant[t], irrelevant[t]
            relevant_h[t] = o * 0.5 * (np.tanh(a) + (np.tanh(a + b) - np.tanh(b)))
            irrelevant_h[t] = o * 0.5 * (np.tanh(b) + (np.tanh(a + b) - np.tanh(a)))
        per_layer.append((relevant_h, irrelevant_h))
        rel_in, irr_in = list(relevant_h), list(irrelevant_h)
    rel_h, irr_h = per_layer[-1]
    return per_layer, rel_h @ w_out.T, irr_h @ w_out.T + b_out


def test_two_layer_stack_matches_reference_transcription():
    model = _model(5, vocab=13, emb=6, hidden=5)
    weights = lstm_weights(model)
    np_layers = [tuple(w.numpy() for w in layer) for layer in weights["layers"]]
    emb, w_out, b_out = (weights[k].numpy() for k in ("embedding", "decoder_weight", "decoder_bias"))
    ids = _ids(6, 4, 8, vocab=13).numpy()
    focus = [[2], [0, 1, 2], [3, 6], []]
    res = contextual_decomposition(ids, focus, layers=np_layers, embedding=emb, decoder_weight=w_out,
                                   decoder_bias=b_out)
    for s, positions in enumerate(focus):
        per_layer, scores, irrel_scores = _reference_cd(emb[ids[s]], set(positions), np_layers, w_out, b_out)
        for layer, (rel_h, irr_h) in enumerate(per_layer):
            np.testing.assert_allclose(res.hidden_beta[layer, s].numpy(), rel_h, rtol=0, atol=1e-13)
            np.testing.assert_allclose(res.hidden_gamma[layer, s].numpy(), irr_h, rtol=0, atol=1e-13)
        np.testing.assert_allclose(res.logits_beta[s].numpy(), scores, rtol=0, atol=1e-12)
        np.testing.assert_allclose(res.logits_gamma[s].numpy(), irrel_scores, rtol=0, atol=1e-12)


def test_murdoch_convention_matches_reference_transcription_of_his_span_rule():
    # Murdoch's CD(batch, model, start, stop): words start..stop in focus, the pure-bias product
    # relevant for start <= i < stop only.
    model = _model(5, vocab=13, emb=6, hidden=5)
    weights = lstm_weights(model)
    np_layers = [tuple(w.numpy() for w in layer) for layer in weights["layers"]]
    emb, w_out, b_out = (weights[k].numpy() for k in ("embedding", "decoder_weight", "decoder_bias"))
    ids = _ids(6, 3, 8, vocab=13).numpy()
    spans = [(2, 2), (0, 3), (5, 7)]
    res = contextual_decomposition(ids, [list(range(a, b + 1)) for a, b in spans], layers=np_layers, embedding=emb,
                                   decoder_weight=w_out, decoder_bias=b_out, convention="murdoch")
    for s, (start, stop) in enumerate(spans):
        per_layer, scores, irrel_scores = _reference_cd(emb[ids[s]], set(range(start, stop + 1)), np_layers, w_out,
                                                        b_out, bias_positions=set(range(start, stop)))
        for layer, (rel_h, irr_h) in enumerate(per_layer):
            np.testing.assert_allclose(res.hidden_beta[layer, s].numpy(), rel_h, rtol=0, atol=1e-13)
            np.testing.assert_allclose(res.hidden_gamma[layer, s].numpy(), irr_h, rtol=0, atol=1e-13)
        np.testing.assert_allclose(res.logits_gamma[s].numpy(), irrel_scores, rtol=0, atol=1e-12)


def test_one_step_with_gate_biases_by_hand_in_both_conventions():
    # One unit, one step, the word in focus (the span [0, 0]); gate biases beta_*, W_hh = 0.
    # Summands: rel = w x (the word), irr = 0, so L(rel_i) = s(a_i + beta_i) - s(beta_i) and
    # L(rel_g) = tanh(a_g + beta_g) - tanh(beta_g), bias parts s(beta_i), tanh(beta_g). Then
    #   c_beta = L(rel_i) (L(rel_g) + tanh beta_g) + s(beta_i) L(rel_g) [+ s(beta_i) tanh(beta_g)]
    # is c_0 = s(a_i + beta_i) tanh(a_g + beta_g) with the bracket (acd: t is in focus) and
    # c_0 - s(beta_i) tanh(beta_g) without it (Murdoch: t = stop is not < stop).
    w = np.array([[0.7], [-1.3], [1.1], [0.4]])  # rows: i, f, g, o
    bias = np.array([0.5, -0.2, 0.9, -0.6])
    x0 = 1.5
    a_i, _, a_g, a_o = (w[:, 0] * x0 + bias).tolist()
    c0 = _sigmoid(a_i) * math.tanh(a_g)
    o = _sigmoid(a_o)
    pure_bias = _sigmoid(bias[0]) * math.tanh(bias[2])
    layer = (w, np.zeros((4, 1)), bias, np.zeros(4))
    acd = contextual_decomposition(np.array([[[x0]]]), [[0]], layers=[layer])
    murdoch = contextual_decomposition(np.array([[[x0]]]), [[0]], layers=[layer], convention="murdoch")
    assert acd.cell_beta.item() == pytest.approx(c0, abs=1e-15)
    assert acd.cell_gamma.item() == 0.0 and acd.hidden_gamma.item() == 0.0
    assert acd.hidden_beta.item() == pytest.approx(o * math.tanh(c0), abs=1e-15)
    cb, cg = c0 - pure_bias, pure_bias
    assert murdoch.cell_beta.item() == pytest.approx(cb, abs=1e-15)
    assert murdoch.cell_gamma.item() == pytest.approx(cg, abs=1e-15)
    assert murdoch.hidden_beta.item() == pytest.approx(o * 0.5 * (math.tanh(cb) + math.tanh(c0) - math.tanh(cg)),
                                                      abs=1e-15)
    assert murdoch.hidden_gamma.item() == pytest.approx(o * 0.5 * (math.tanh(cg) + math.tanh(c0) - math.tanh(cb)),
                                                       abs=1e-15)


def test_conventions_differ_exactly_at_the_last_position_of_the_span():
    # Before t = stop the two runs are the same; at t = stop c_beta differs by s(b_i) tanh(b_g) of
    # the summed gate biases b = b_ih + b_hh, whatever the weights and words; later it propagates.
    model = _model(3, hidden=4, layers=1)
    weights = lstm_weights(model)
    ids = _ids(4, 2, 5)
    focus = [[1, 2], [3]]
    acd = contextual_decomposition(ids, focus, **weights)
    murdoch = contextual_decomposition(ids, focus, **weights, convention="murdoch")
    b_i, _, b_g, _ = (weights["layers"][0][2] + weights["layers"][0][3]).double().split(4)
    pure_bias = torch.sigmoid(b_i) * torch.tanh(b_g)
    for s, stop in enumerate((2, 3)):
        assert torch.equal(acd.cell_beta[0, s, :stop], murdoch.cell_beta[0, s, :stop])
        assert torch.equal(acd.hidden_beta[0, s, :stop], murdoch.hidden_beta[0, s, :stop])
        torch.testing.assert_close(acd.cell_beta[0, s, stop] - murdoch.cell_beta[0, s, stop], pure_bias,
                                   rtol=0, atol=1e-14)
        torch.testing.assert_close(murdoch.cell_gamma[0, s, stop] - acd.cell_gamma[0, s, stop], pure_bias,
                                   rtol=0, atol=1e-14)
        assert (acd.hidden_beta[0, s, stop:] != murdoch.hidden_beta[0, s, stop:]).all()
    with torch.no_grad():
        logits, _ = model(ids)
    for res in (acd, murdoch):  # both split the logits exactly
        torch.testing.assert_close(res.logits_beta + res.logits_gamma, logits.double(), rtol=0, atol=1e-5)
    di = [interdependence(ids, [1, 3], [2, 4], **weights, convention=c).hidden for c in ("acd", "murdoch")]
    assert not torch.equal(di[0], di[1])
    with pytest.raises(ValueError, match="convention"):
        contextual_decomposition(ids, focus, **weights, convention="google")


def test_focus_forms_agree_and_float32_weights_are_promoted():
    model = _model(7).float()
    ids = _ids(8, 3, 5)
    weights = lstm_weights(model)
    mask = torch.zeros(3, 5, dtype=torch.bool)
    mask[0, 1] = mask[1, 4] = mask[2, 0] = True
    results = [contextual_decomposition(ids, f, **weights)
               for f in (mask, mask.numpy(), [1, 4, 0], [[1], {4}, (0,)], torch.tensor([1, 4, 0]))]
    for other in results[1:]:
        assert torch.equal(other.hidden_beta, results[0].hidden_beta)
    res = results[0]
    assert res.hidden_beta.dtype == torch.float64
    hidden, logits = _forward(model, ids)
    torch.testing.assert_close(res.logits_beta + res.logits_gamma, logits.double(), rtol=0, atol=1e-5)


def test_bad_inputs_raise():
    model = _model(9, layers=1, hidden=3)
    weights = lstm_weights(model)
    ids = _ids(10, 2, 4)
    with pytest.raises(ValueError, match="bool mask"):
        contextual_decomposition(ids, torch.zeros(2, 4), **weights)
    with pytest.raises(ValueError, match=r"\(batch, seq\)"):
        contextual_decomposition(ids, torch.zeros(4, 2, dtype=torch.bool), **weights)
    with pytest.raises(ValueError, match="outside"):
        contextual_decomposition(ids, [[4], []], **weights)
    with pytest.raises(ValueError, match="bool array"):
        contextual_decomposition(ids, [[True, False, False, False]] * 2, **weights)
    with pytest.raises(ValueError, match="float vectors"):
        contextual_decomposition(ids, [[0], [1]], layers=weights["layers"])
    with pytest.raises(ValueError, match="do not fit"):
        contextual_decomposition(torch.zeros(2, 4, 7, dtype=torch.float64), [[0], [1]], layers=weights["layers"])


@pytest.mark.parametrize("bad", [-1, 11, -12])
def test_out_of_range_token_ids_raise_naming_them_and_the_vocabulary(bad):
    # Indexing the embedding with -1 would silently read its last row; -12 wraps to row -1 too.
    model = _model(9, layers=1, hidden=3)  # vocabulary 11
    weights = lstm_weights(model)
    ids = _ids(10, 2, 4)
    ids[1, 2] = bad
    match = rf"token ids {bad} outside \[0, 11\): the vocabulary size of the embedding is 11"
    with pytest.raises(ValueError, match=match):
        contextual_decomposition(ids, [[0], [1]], **weights)
    with pytest.raises(ValueError, match=match):
        interdependence(ids, [0, 0], [1, 3], **weights)
    if bad == -1:
        with pytest.raises(ValueError, match="padding"):
            contextual_decomposition(ids, [[0], [1]], **weights)


def test_target_probability_refuses_an_out_of_range_target_or_position():
    from analyses.rule_probability import target_probability

    logits = torch.randn(2, 4, 11, dtype=torch.float64)
    assert target_probability(logits, 3, 10).shape == (2,)
    with pytest.raises(ValueError, match=r"target id -1 outside \[0, 11\): the vocabulary size of the logits is 11"):
        target_probability(logits, 3, -1)
    with pytest.raises(ValueError, match=r"position 4 outside"):
        target_probability(logits, 4, 2)


def test_decompositional_interdependence_of_known_vectors():
    union = np.array([[3.0, 4.0], [1.0, 2.0]])
    a = np.array([[1.0, 0.0], [0.5, 1.0]])
    b = torch.tensor([[0.0, 1.0], [0.5, 1.0]])
    di = decompositional_interdependence(union, a, b)
    assert di.dtype == torch.float64 and di.shape == (2,)
    assert di.tolist() == pytest.approx([math.sqrt(2.0**2 + 3.0**2) / 5.0, 0.0], abs=1e-15)
    with pytest.raises(ValueError, match="one shape"):
        decompositional_interdependence(union, a[:, :1], b)


def test_interdependence_is_di_of_three_cd_runs_at_the_later_word():
    model = _model(11)
    weights = lstm_weights(model)
    ids = _ids(12, 3, 7)
    a, b = [1, 5, 2], [3, 0, 6]
    got = interdependence(ids, a, b, **weights)
    assert got.at.tolist() == [3, 5, 6]
    assert got.hidden.shape == (2, 3) and got.logits.shape == (3,)
    for s in range(3):
        t = max(a[s], b[s])
        sentence = ids[s:s + 1]
        union = contextual_decomposition(sentence, [[a[s], b[s]]], **weights)
        only_a = contextual_decomposition(sentence, [[a[s]]], **weights)
        only_b = contextual_decomposition(sentence, [[b[s]]], **weights)
        for layer in range(2):
            expected = decompositional_interdependence(
                union.hidden_beta[layer, 0, t], only_a.hidden_beta[layer, 0, t], only_b.hidden_beta[layer, 0, t])
            assert got.hidden[layer, s].item() == pytest.approx(expected.item(), rel=1e-12)
        expected = decompositional_interdependence(
            union.logits_beta[0, t], only_a.logits_beta[0, t], only_b.logits_beta[0, t])
        assert got.logits[s].item() == pytest.approx(expected.item(), rel=1e-12)
        assert 0.0 < got.hidden[1, s].item() < 10.0
    # An explicit later step, and spans as sets.
    later = interdependence(ids, [[0, 1]] * 3, [[2]] * 3, at=[6, 6, 6], **weights)
    assert later.at.tolist() == [6, 6, 6]
    with pytest.raises(ValueError, match="disjoint"):
        interdependence(ids, a, [1, 0, 6], **weights)
    with pytest.raises(ValueError, match="at least one"):
        interdependence(ids, a, [[3], [], [6]], **weights)


@pytest.mark.requires_gpu
def test_cuda_matches_cpu():
    model = _model(13)
    ids = _ids(14, 3, 6)
    cpu = interdependence(ids, [0, 1, 2], [3, 4, 5], **lstm_weights(model))
    gpu = interdependence(ids.cuda(), [0, 1, 2], [3, 4, 5], **lstm_weights(model.cuda()))
    assert gpu.hidden.device.type == "cuda"
    torch.testing.assert_close(gpu.hidden.cpu(), cpu.hidden, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(gpu.logits.cpu(), cpu.logits, rtol=1e-10, atol=1e-12)
