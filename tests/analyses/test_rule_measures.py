"""Known answers for the Ch. 5 measures: P(omega), its CD part, DI(alpha, scaffold), and DI by
syntactic distance (analyses/rule_probability.py, analyses/syntactic_interdependence.py and their
training-study registrations)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from analyses.contextual_decomposition import interdependence, lstm_weights
from analyses.rule_probability import cd_target_probability, target_probability
from analyses.syntactic_interdependence import PairDI, aggregate, pair_interdependence, tree_distances
from models.lstm import LSTMLanguageModel, LSTMLanguageModelConfig
from runner.studies.training.data.scaffold import ALPHA, OMEGA, ScaffoldConfig, generate

V = 12  # alpha, omega and 10 words


def _random_model(seed: int) -> LSTMLanguageModel:
    torch.manual_seed(seed)
    model = LSTMLanguageModel(LSTMLanguageModelConfig(V, 4, 4, 1, dropout=0.0)).double().eval()
    with torch.no_grad():
        for p in model.lstm1.parameters():
            p.mul_(3.0)
        model.embedding.weight.mul_(10.0)
    return model


def _separated_model(seed: int) -> LSTMLanguageModel:
    """alpha drives units 0-1 only, the other words units 2-3 only; no biases: alpha and any span
    of other words never interact, so DI(alpha, scaffold) = 0 exactly."""
    model = _random_model(seed)
    with torch.no_grad():
        emb = model.embedding.weight
        emb[ALPHA, 2:] = 0.0
        emb[OMEGA:, :2] = 0.0
        lstm = model.lstm1
        block = torch.zeros(4, 4, dtype=torch.bool)
        block[:2, :2] = block[2:, 2:] = True
        mask = block.repeat(4, 1)  # the same block structure in each gate i, f, g, o
        lstm.weight_ih_l0.mul_(mask)
        lstm.weight_hh_l0.mul_(mask)
        lstm.bias_ih_l0.zero_()
        lstm.bias_hh_l0.zero_()
    return model


def _context(model, cases):
    """What a rule measure reads from the study: one network on a scaffold variant."""
    written = {}
    variant = SimpleNamespace(tests=cases)
    ctx = SimpleNamespace(
        study=SimpleNamespace(model=[SimpleNamespace(corpus_variant="familiar_k3")]),
        corpus=SimpleNamespace(variants={"familiar_k3": variant}), device=torch.device("cpu"),
        model=lambda n, c: model, write=lambda name, task, values: written.__setitem__(name, np.asarray(values)),
        layout=SimpleNamespace(coords={"gradient_distance": SimpleNamespace(values=np.arange(5))}))
    return ctx, SimpleNamespace(network=0, checkpoint=0), written


@pytest.fixture(scope="module")
def cases():
    cfg = ScaffoldConfig(vocab_size=V - 2, tokens=2000, rules=20, phrases=5, familiar_repeats=10, valid_tokens=500,
                         test_cases=16, context=2)
    return generate(cfg, 3, seed=0).tests


def _run(kind: str, model, cases, **params):
    from runner.plugin.measures import measures
    import runner.studies.training.study  # noqa: F401  (registers the measures)

    reg = measures("training")[kind]
    ctx, task, written = _context(model, cases)
    reg(reg.Params(kind=kind, **params)).run(ctx, task)
    return written


def test_di_is_zero_when_alpha_and_scaffold_do_not_interact(cases):
    di = _run("rule_interdependence", _separated_model(0), cases)["rule_di"]
    np.testing.assert_allclose(di, 0.0, atol=1e-12)
    di = _run("rule_interdependence", _random_model(0), cases)["rule_di"]
    assert (di > 1e-3).all()  # a generic LSTM mixes them


def test_di_matches_the_direct_computation(cases):
    model = _random_model(1)
    t = cases["in_domain"]
    x = torch.as_tensor(t.inputs[:, : t.omega])
    a = torch.zeros(x.shape, dtype=torch.bool)
    a[:, t.alpha] = True
    b = torch.zeros(x.shape, dtype=torch.bool)
    b[:, t.scaffold] = True
    want = interdependence(x, a, b, **lstm_weights(model)).hidden[-1].mean()
    got = _run("rule_interdependence", model, cases)["rule_di"]
    assert got[0] == pytest.approx(float(want), rel=1e-12)


def test_marginal_probability_of_a_constant_decoder(cases):
    model = _random_model(2)
    bias = torch.linspace(-1, 1, V, dtype=torch.float64)
    with torch.no_grad():
        model.decoder.weight.zero_()
        model.decoder.bias.copy_(bias)
    p = _run("rule_probability", model, cases)["rule_target_probability"]
    np.testing.assert_allclose(p, float(torch.softmax(bias, 0)[OMEGA]), rtol=1e-12)
    # CD: the relevant logits are W beta = 0 (the bias belongs to gamma), so omega gets 1 / |vocab|
    cd = _run("rule_cd_probability", model, cases, focus=["alpha", "scaffold", "rule"])["rule_cd_probability"]
    assert cd.shape == (2, 3)
    np.testing.assert_allclose(cd, 1.0 / V, rtol=1e-12)


def test_marginal_probability_is_the_forward_pass(cases):
    model = _random_model(3)
    t = cases["out_domain"]
    with torch.no_grad():
        logits, _ = model(torch.as_tensor(t.inputs))
    want = torch.softmax(logits[:, t.omega - 1].double(), -1)[:, OMEGA].mean()
    got = _run("rule_probability", model, cases)["rule_target_probability"]
    assert got[1] == pytest.approx(float(want), rel=1e-9)
    assert target_probability(torch.zeros(2, 3, 4), 1, 0).tolist() == [0.25, 0.25]


def test_cd_probability_with_everything_in_focus_is_the_model_without_its_bias(cases):
    model = _random_model(4)
    with torch.no_grad():
        model.decoder.bias.zero_()
    t = cases["in_domain"]
    x = torch.as_tensor(t.inputs[:, : t.omega])
    everything = torch.ones(x.shape, dtype=torch.bool)
    got = cd_target_probability(x, everything, t.omega - 1, OMEGA, **lstm_weights(model))
    with torch.no_grad():
        logits, _ = model(x)
    np.testing.assert_allclose(got.numpy(), torch.softmax(logits[:, -1].double(), -1)[:, OMEGA].numpy(), rtol=1e-9)


def test_tree_distances_of_figure_2():
    # "Socrates asked the student trick questions": 'trick' is one edge away from 'questions',
    # two from 'asked', and four from 'the' (Ch. 5 Sec. 3.1)
    heads = [2, 0, 4, 2, 6, 2]
    d = tree_distances(heads)
    assert d[4, 5] == 1 and d[4, 1] == 2 and d[4, 2] == 4
    assert (d == d.T).all() and (np.diag(d) == 0).all()
    assert tree_distances([0, 0])[0, 1] == -1  # two roots: unconnected


def test_pairs_and_aggregation():
    model = _random_model(5)
    ids, heads = [3, 4, 5, 6, 7], [2, 0, 2, 5, 3]
    pairs = pair_interdependence(ids, heads, max_distance=2, weights=lstm_weights(model))
    assert list(zip(pairs.left.tolist(), pairs.right.tolist())) == [(0, 1), (0, 2), (1, 2), (1, 3), (2, 3), (2, 4),
                                                                    (3, 4)]
    assert pairs.sequential.tolist() == [1, 2, 1, 2, 1, 2, 1]
    assert pairs.syntactic.tolist() == [1, 2, 1, 3, 2, 1, 1]
    one = interdependence(torch.tensor([ids[:4]]), torch.tensor([1]), torch.tensor([3]), **lstm_weights(model))
    assert pairs.di[3] == pytest.approx(float(one.hidden[-1, 0]), rel=1e-12)

    fake = PairDI(np.array([0, 0, 1, 1]), np.array([1, 2, 2, 3]), np.array([1, 2, 1, 2]), np.array([1, 1, 3, 20]),
                  np.array([0.5, 0.25, 0.1, np.nan]))
    agg = aggregate([fake], [["open", "closed", "open", "other"]], max_distance=2, max_syntactic=4,
                    class_pairs=["open-closed", "closed-open", "open-open"])
    assert agg["seq_count"].tolist() == [2, 1] and agg["seq_sum"].tolist() == [0.6, 0.25]
    assert agg["syn_count"][0, 0].tolist() == [1, 0, 0] and agg["syn_sum"][0, 0, 0] == 0.5  # open-closed at 1
    assert agg["syn_count"][0, 2].tolist() == [0, 1, 0]  # closed-open at syntactic distance 3
    assert agg["syn_count"][1, 0].tolist() == [0, 0, 1]  # open-open at sequential 2, syntactic 1
    assert agg["syn_count"].sum() == 3  # the NaN pair is left out


def test_gradient_by_distance_of_a_resting_lstm_is_geometric(cases):
    """rule_gradient on an LSTM that rests at h = 0 with recurrence derivative u I (inputs ignored,
    saturated gates): the mean norm at d is u^(k - d) ||W^T (softmax(b) - e_omega)||, by hand; the
    entry past k = 3 stays NaN."""
    u = 0.5
    model = _random_model(4)
    with torch.no_grad():
        lstm = model.lstm1
        hidden = lstm.weight_hh_l0.shape[1]
        lstm.weight_ih_l0.zero_()
        lstm.weight_hh_l0.zero_()
        lstm.weight_hh_l0[2 * hidden: 3 * hidden] = u * torch.eye(hidden)
        lstm.bias_hh_l0.zero_()
        lstm.bias_ih_l0.copy_(torch.cat([torch.full((hidden,), 40.0), torch.full((hidden,), -40.0),
                                         torch.zeros(hidden), torch.full((hidden,), 40.0)]))
    got = _run("rule_gradient", model, cases)["rule_gradient_norm"]
    p = torch.softmax(model.decoder.bias.detach(), 0)
    p[OMEGA] -= 1.0
    at_omega = float((model.decoder.weight.detach().T @ p).norm())
    want = [u ** (3 - d) * at_omega for d in range(4)]
    assert got.shape == (2, 5)
    np.testing.assert_allclose(got[:, :4], [want, want], rtol=1e-12)
    assert np.isnan(got[:, 4]).all()
