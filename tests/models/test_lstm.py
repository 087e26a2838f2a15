"""LSTM LM and taggers of Saphra's thesis (models/lstm.py)."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from models.lstm import (
    IGNORE_INDEX,
    LSTMLanguageModel,
    LSTMLanguageModelConfig,
    LSTMTagger,
    LSTMTaggerConfig,
    capture,
    layer_names,
)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # these models are tiny: one intra-op thread is faster and immune to a busy machine
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def small_lm(**kw) -> LSTMLanguageModel:
    torch.manual_seed(0)
    cfg = dict(vocab_size=23, embedding_dim=12, hidden_dim=16, dropout=0.2)
    cfg.update(kw)
    return LSTMLanguageModel(LSTMLanguageModelConfig(**cfg))


def test_config_defaults_follow_thesis():
    cfg = LSTMLanguageModelConfig(vocab_size=100)
    assert (cfg.embedding_dim, cfg.hidden_dim, cfg.num_layers, cfg.dropout) == (200, 200, 2, 0.2)
    assert not cfg.tie_weights
    with pytest.raises(Exception):
        cfg.hidden_dim = 3  # frozen
    with pytest.raises(ValueError):
        LSTMLanguageModelConfig(vocab_size=10, embedding_dim=8, hidden_dim=16, tie_weights=True)
    with pytest.raises(ValueError):
        LSTMTaggerConfig(vocab_size=10, n_tags=3, mode="nonsense")  # type: ignore[arg-type]


def test_lm_forward_shapes_and_layers():
    model = small_lm()
    assert layer_names() == ("embedding", "lstm1", "lstm2")
    assert model.layer_names() == ("embedding", "lstm1", "lstm2")
    assert isinstance(model.lstm1, torch.nn.LSTM) and isinstance(model.lstm2, torch.nn.LSTM)
    x = torch.randint(0, 23, (4, 7))
    logits, hidden = model(x)
    assert logits.shape == (4, 7, 23)
    assert len(hidden) == 2
    assert all(h.shape == c.shape == (1, 4, 16) for h, c in hidden)
    init = model.init_hidden(4)
    assert all(torch.equal(h, torch.zeros(1, 4, 16)) for h, _ in init)
    detached = model.detach_hidden(hidden)
    assert all(not h.requires_grad and not c.requires_grad for h, c in detached)
    three = small_lm(num_layers=3)
    assert three.layer_names() == ("embedding", "lstm1", "lstm2", "lstm3")
    assert three(x)[0].shape == (4, 7, 23)


def test_tied_weights_share_storage():
    model = small_lm(embedding_dim=16, tie_weights=True)
    assert model.decoder.weight is model.embedding.weight


def test_hidden_state_carries_over_chunks():
    model = small_lm().eval()
    x = torch.randint(0, 23, (3, 10))
    with torch.no_grad():
        full, _ = model(x)
        first, h = model(x[:, :6])
        second, _ = model(x[:, 6:], model.detach_hidden(h))
    torch.testing.assert_close(torch.cat([first, second], dim=1), full)


def test_capture_matches_manual_autograd():
    model = small_lm().eval()  # eval: dropout off, so the manual recomputation is identical
    x = torch.randint(0, 23, (3, 9))
    y = torch.randint(0, 23, (3, 9))
    with capture(model, ["embedding", "lstm1", "lstm2", "logits"], gradients=True) as cap:
        logits, _ = model(x)
        model.loss(logits, y).backward()

    emb = model.embedding(x)
    h1, _ = model.lstm1(emb)
    h2, _ = model.lstm2(h1)
    out = model.decoder(h2)
    loss = F.cross_entropy(out.reshape(-1, 23), y.reshape(-1))
    grads = torch.autograd.grad(loss, [emb, h1, h2, out])
    for name, act, grad, dim in zip(
        ["embedding", "lstm1", "lstm2", "logits"], [emb, h1, h2, out], grads, [12, 16, 16, 23]
    ):
        assert cap.activations[name].shape == (3, 9, dim)
        assert cap.gradients[name].shape == (3, 9, dim)
        torch.testing.assert_close(cap.activations[name], act.detach())
        torch.testing.assert_close(cap.gradients[name], grad)
        assert not cap.activations[name].requires_grad


def test_capture_subset_and_logits_gradient_always():
    model = small_lm().eval()
    x = torch.randint(0, 23, (2, 5))
    with capture(model, ["lstm1"], gradients=True) as cap:
        logits, _ = model(x)
        logits.sum().backward()
    assert set(cap.activations) == {"lstm1"}
    assert set(cap.gradients) == {"lstm1", "logits"}
    torch.testing.assert_close(cap.gradients["logits"], torch.ones(2, 5, 23))
    with capture(model) as cap:  # default: all layers, no gradients
        model(x)
    assert set(cap.activations) == {"embedding", "lstm1", "lstm2"} and not cap.gradients
    with pytest.raises(ValueError):
        with capture(model, ["lstm7"]):
            pass


def _hook_count(model) -> int:
    return sum(len(m._forward_hooks) for m in model.modules())


def test_hooks_removed_on_exit_and_on_error():
    model = small_lm()
    assert _hook_count(model) == 0
    x = torch.randint(0, 23, (2, 5))
    with capture(model, ["embedding", "lstm1", "lstm2"], gradients=True) as cap:
        assert _hook_count(model) == 4  # three layers + logits
        logits, _ = model(x)
    assert _hook_count(model) == 0
    # the tensor hooks registered during the forward are gone too: a late backward records nothing
    logits.sum().backward()
    assert cap.gradients == {}
    with capture(model) as cap:
        model(x)
    n = len(cap.activations)
    model(x[:, :2])
    assert all(a.shape[1] == 5 for a in cap.activations.values()) and len(cap.activations) == n
    with pytest.raises(RuntimeError):
        with capture(model, gradients=True):
            raise RuntimeError("boom")
    assert _hook_count(model) == 0


def test_capture_under_no_grad_records_activations_only():
    model = small_lm().eval()
    with torch.no_grad(), capture(model, gradients=True) as cap:
        model(torch.randint(0, 23, (2, 4)))
    assert set(cap.activations) == {"embedding", "lstm1", "lstm2"} and cap.gradients == {}


def test_tagger_shapes_and_target_alignment():
    torch.manual_seed(0)
    tags = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 0]])
    words = torch.randint(0, 11, (2, 4))
    pred = LSTMTagger(LSTMTaggerConfig(vocab_size=11, n_tags=8, embedding_dim=6, hidden_dim=5,
                                       mode="tag_predictor"))
    inp = LSTMTagger(LSTMTaggerConfig(vocab_size=11, n_tags=8, embedding_dim=6, hidden_dim=5,
                                      mode="input_tagger"))
    assert pred.layer_names() == ("embedding", "lstm1") and not hasattr(pred, "lstm2")
    logits, hidden = pred(words)
    assert logits.shape == (2, 4, 8) and len(hidden) == 1
    # input tagger: logits at t predict y_t, the tag of the word just read
    assert torch.equal(inp.targets(tags), tags)
    # tag predictor: logits at t predict y_{t+1}; the last position has no next tag in the chunk
    shifted = torch.tensor([[2, 3, 4, IGNORE_INDEX], [6, 7, 0, IGNORE_INDEX]])
    assert torch.equal(pred.targets(tags), shifted)
    nxt = torch.tensor([[2, 3, 4, 5], [6, 7, 0, 1]])
    assert torch.equal(pred.targets(tags, nxt), nxt)
    assert torch.equal(inp.targets(tags, nxt), tags)
    loss = pred.loss(logits, pred.targets(tags))
    manual = F.cross_entropy(logits[:, :-1].reshape(-1, 8), tags[:, 1:].reshape(-1))
    torch.testing.assert_close(loss, manual)


def test_two_layer_lm_overfits_repetitive_corpus():
    # about half a second on one CPU thread
    torch.manual_seed(0)
    vocab = 7
    stream = torch.arange(vocab).repeat(40)  # 0 1 2 ... 6 0 1 2 ...: deterministic given context
    model = LSTMLanguageModel(LSTMLanguageModelConfig(vocab_size=vocab, embedding_dim=16,
                                                      hidden_dim=32, dropout=0.0))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    batch, bptt = 4, 12
    data = stream[: (len(stream) // batch) * batch].view(batch, -1)  # (batch, steps)
    initial = None
    for step in range(200):
        i = (step * bptt) % (data.shape[1] - bptt - 1)
        x, y = data[:, i : i + bptt], data[:, i + 1 : i + 1 + bptt]
        logits, _ = model(x)
        loss = model.loss(logits, y)
        initial = loss.item() if initial is None else initial
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25 * 20)
        opt.step()
    assert initial > 1.5  # ~ log(7) at init
    assert loss.item() < 0.05


def test_eval_turns_dropout_off_and_keeps_the_lstms_in_training_mode():
    """cuDNN has an RNN backward only for a forward in training mode; measures take gradients of
    eval-mode models. A one-layer nn.LSTM has no dropout, so its training mode is the same function."""
    model = LSTMLanguageModel(LSTMLanguageModelConfig(vocab_size=20, embedding_dim=8, hidden_dim=8, dropout=0.5))
    model.eval()
    assert not model.drop.training and all(lstm.training for lstm in model.lstms())
    x = torch.randint(0, 20, (3, 7))
    first, _ = model(x)
    second, _ = model(x)
    torch.testing.assert_close(first, second, rtol=0, atol=0)  # no dropout
    reference = LSTMLanguageModel(model.config)
    reference.load_state_dict(model.state_dict())
    torch.nn.Module.train(reference, False)  # every module in eval mode, as before
    expected, _ = reference(x)
    torch.testing.assert_close(first, expected, rtol=0, atol=0)
    model.train()
    assert model.drop.training
