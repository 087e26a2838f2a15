"""One activation adapter per architecture (models/activations.py), reached through its family
(``Family.activations``): every family's hook points hold what the model computes there, checked against
transformers' hidden states or the model's own forward, and their gradients against autograd's."""

from __future__ import annotations

import pytest
import torch

from models import load_albert
from models.activations import Activations, MapActivations, token_rows, tokens
from models.registry import MODULES, SUITES, family_for
from models.lstm import LSTMActivations, LSTMLanguageModel, LSTMLanguageModelConfig
from models.suites import SuiteActivations
from models.transject import TransJectActivations, build_model


def _ids(vocab: int, batch: int = 3, n: int = 10, seed: int = 1):
    return torch.randint(5, vocab, (batch, n), generator=torch.Generator().manual_seed(seed))


def test_albert_hook_points_are_transformers_hidden_states(tmp_path, save_albert):
    """x_t of the depth map at t = 0..L is AlbertModel's hidden state t (Inoue et al. 2021, Eqs. 1-4)."""
    from transformers import AlbertModel

    save_albert(tmp_path, num_hidden_layers=3, seed=2)
    ids = _ids(100)
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    with torch.no_grad():
        want = AlbertModel.from_pretrained(tmp_path).eval()(input_ids=ids, attention_mask=mask,
                                                           output_hidden_states=True).hidden_states
    adapter = family_for("builtin:tiny-albert").activations(load_albert(str(tmp_path), implementation="transformers"))
    assert isinstance(adapter, MapActivations) and isinstance(adapter, Activations)
    assert adapter.layer_names() == ("embedding", "layer1", "layer2", "layer3")
    got = adapter.capture(tokens(ids, mask))
    assert list(got) == list(adapter.layer_names())
    for k, name in enumerate(got):
        torch.testing.assert_close(got[name], want[k], atol=1e-5, rtol=0)
    assert (got["layer3"] - got["embedding"]).abs().max() > 0.1  # the layers move the state
    only = adapter.capture(tokens(ids, mask), ["layer2", "embedding"])
    assert list(only) == ["embedding", "layer2"] and torch.equal(only["layer2"], got["layer2"])


def test_lstm_hook_points_carry_the_stream_across_windows():
    """Windows read one after the other are the whole sequence read at once (the hidden state is carried);
    the hook points are h^e_t, h^k_t and the logits (Saphra 2021, Ch. 6 Fig. 1)."""
    torch.manual_seed(0)
    model = LSTMLanguageModel(LSTMLanguageModelConfig(vocab_size=30, embedding_dim=8, hidden_dim=8)).eval()
    ids = _ids(30, batch=2, n=12)
    adapter = family_for("builtin:lstm-lm").activations(model)
    assert isinstance(adapter, LSTMActivations)
    assert adapter.layer_names() == ("embedding", "lstm1", "lstm2", "logits")
    whole = adapter.capture(tokens(ids))
    with torch.no_grad():
        logits, _ = model(ids)
        emb = model.embedding(ids)
        h1, _ = model.lstm1(emb)
    torch.testing.assert_close(whole["embedding"], emb, atol=0, rtol=0)
    torch.testing.assert_close(whole["lstm1"], h1, atol=1e-6, rtol=0)
    torch.testing.assert_close(whole["logits"], logits, atol=1e-6, rtol=0)
    stream = LSTMActivations(model)
    parts = [stream.capture(tokens(ids[:, :5])), stream.capture(tokens(ids[:, 5:]))]
    for name in adapter.layer_names():
        torch.testing.assert_close(torch.cat([p[name] for p in parts], 1), whole[name], atol=1e-6, rtol=0)
    stream.reset()  # from zeros again: the second window alone is not its continuation
    alone = stream.capture(tokens(ids[:, 5:]), ["lstm2"])
    assert (alone["lstm2"] - whole["lstm2"][:, 5:]).abs().max() > 1e-4


def _tiny_encoder(variant: str):
    """A 2-layer TransJect (entropic experts) or Transformer baseline of width 8, seeded."""
    params = ({"vocab_size": 40, "n_classes": 3, "d_model": 8, "n_layers": 2, "n_experts": 2,
               "variant": "entropic-transject"} if variant == "transject" else
              {"vocab_size": 40, "n_classes": 3, "d_model": 8, "n_layers": 2, "n_heads": 2, "d_ff": 16})
    torch.manual_seed(0)
    return build_model(variant, params).eval()


@pytest.mark.parametrize("variant", ["transject", "transformer"])
def test_transject_hook_points_are_the_encoders_hidden_states(variant):
    """X^(0) .. X^(L) of TransJect (entropic draws from the given generator) and of the Transformer baseline."""
    model = _tiny_encoder(variant)
    ids = _ids(40)
    mask = torch.ones_like(ids)
    mask[0, 7:] = 0
    with torch.no_grad():
        want = model(ids, mask, output_hidden_states=True,
                     generator=torch.Generator().manual_seed(5)).hidden_states
    adapter = family_for(f"builtin:{variant}").activations(model, generator=torch.Generator().manual_seed(5))
    assert isinstance(adapter, TransJectActivations)
    got = adapter.capture(tokens(ids, mask))
    assert list(got) == ["embedding", "layer1", "layer2"]
    for k, name in enumerate(got):
        assert torch.equal(got[name], want[k])
    with torch.no_grad():
        assert torch.equal(got["embedding"], model.embed(ids))


def _hf(family: str):
    from transformers import AutoModel, BertConfig, GPT2Config, GPTNeoXConfig, LlamaConfig

    torch.manual_seed(0)
    small = dict(vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                 max_position_embeddings=32)
    config = {"gpt_neox": GPTNeoXConfig(**small), "bert": BertConfig(**small),
              "gpt2": GPT2Config(vocab_size=64, n_embd=16, n_layer=2, n_head=2, n_positions=32),
              "llama": LlamaConfig(**small, num_key_value_heads=1)}[family]
    return AutoModel.from_config(config).eval()


@pytest.mark.parametrize("family", ["gpt_neox", "bert", "gpt2", "llama"])
def test_suite_family_hook_points_are_transformers_hidden_states(family):
    """Block k's output is hidden state k (BERT: its last one too; the others apply a final norm after the last
    block); ``embedding`` is the embeddings module's output (BERT: the embeddings' hidden state 0)."""
    model = _hf(family)
    ids = _ids(64, batch=2, n=6)
    mask = torch.ones_like(ids)
    adapter = SUITES.activations(model)
    assert isinstance(adapter, SuiteActivations) and adapter.layer_names() == ("embedding", "layer1", "layer2")
    got = adapter.capture(tokens(ids, mask))
    with torch.no_grad():
        hidden = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
    torch.testing.assert_close(got["layer1"], hidden[1])
    if family == "bert":
        torch.testing.assert_close(got["embedding"], hidden[0])
        torch.testing.assert_close(got["layer2"], hidden[2])
    else:
        torch.testing.assert_close(got["embedding"], model.get_input_embeddings()(ids))


def test_token_rows_leave_out_padding_sequence_by_sequence():
    h = torch.arange(2 * 3 * 2, dtype=torch.float64).reshape(2, 3, 2)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    rows = token_rows({"x": h}, mask)["x"]
    assert rows.tolist() == [[0.0, 1.0], [2.0, 3.0], [6.0, 7.0]]
    assert token_rows({"x": h})["x"].shape == (6, 2)


def test_an_unknown_hook_point_is_named():
    torch.manual_seed(0)
    model = LSTMLanguageModel(LSTMLanguageModelConfig(vocab_size=30, embedding_dim=8, hidden_dim=8))
    with pytest.raises(ValueError, match="'lstm7'.*embedding, lstm1, lstm2, logits"):
        family_for("builtin:lstm-lm").activations(model).capture(tokens(_ids(30)), ["lstm7"])
    with pytest.raises(ValueError, match="layer9"):
        SUITES.activations(_hf("gpt2")).capture(tokens(_ids(64)), ["layer9"])


def _grad_reference(model_outputs: dict[str, torch.Tensor], value: torch.Tensor) -> dict[str, torch.Tensor]:
    grads = torch.autograd.grad(value, list(model_outputs.values()))
    return dict(zip(model_outputs, grads))


def test_lstm_gradients_are_those_of_the_window_loss_with_the_stream_carried():
    """capture_gradients: d loss / d h of each hook point, the window's hidden state carried (detached) from the
    last capture, as truncated BPTT reads the analysis stream (Saphra 2021, Ch. 6 Fig. 1)."""
    torch.manual_seed(0)
    model = LSTMLanguageModel(LSTMLanguageModelConfig(vocab_size=30, embedding_dim=8, hidden_dim=8)).eval()
    ids, y = _ids(30, batch=2, n=12), _ids(30, batch=2, n=12, seed=2)
    adapter = family_for("builtin:lstm-lm").activations(model)
    adapter.capture(tokens(ids[:, :6]))
    acts, grads = adapter.capture_gradients(tokens(ids[:, 6:]), lambda logits: model.loss(logits, y[:, 6:]),
                                            ["lstm1", "logits"])
    assert list(acts) == list(grads) == ["lstm1", "logits"]
    with torch.no_grad():
        _, hidden = model(ids[:, :6])
    emb = model.embedding(ids[:, 6:])
    h1, _ = model.lstm1(emb, hidden[0])
    h2, _ = model.lstm2(h1, hidden[1])
    logits = model.decoder(h2)
    want = _grad_reference({"lstm1": h1, "logits": logits}, model.loss(logits, y[:, 6:]))
    for name in want:
        torch.testing.assert_close(grads[name], want[name], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(acts["lstm1"], h1.detach(), atol=1e-6, rtol=0)
    assert grads["lstm1"].abs().max() > 0


def test_suite_and_module_gradients_are_autograds():
    """A transformers model's and a plain module's hook points serve backward as forward: d loss / d output."""
    model = _hf("gpt2")
    ids = _ids(64, batch=2, n=6)
    mask = torch.ones_like(ids)
    loss = lambda out: out.last_hidden_state.pow(2).sum()  # noqa: E731
    acts, grads = SUITES.activations(model).capture_gradients(tokens(ids, mask), loss, ["layer1"])
    out = {}
    handle = model.h[0].register_forward_hook(lambda m, a, o: out.__setitem__("layer1", o[0] if isinstance(o, tuple) else o))
    value = loss(model(input_ids=ids, attention_mask=mask))
    handle.remove()
    torch.testing.assert_close(grads["layer1"], _grad_reference(out, value)["layer1"])
    torch.testing.assert_close(acts["layer1"], out["layer1"].detach())

    torch.manual_seed(0)
    seq = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 3))
    adapter = MODULES.activations(seq)
    assert adapter.layer_names() == ("0", "1")
    acts, grads = adapter.capture_gradients(tokens(_ids(10, n=5)), lambda y: (y ** 2).sum())
    torch.testing.assert_close(grads["1"], 2 * acts["1"])  # d sum(y^2) / dy = 2y
    assert grads["0"].shape == acts["0"].shape == (3, 5, 4)


@pytest.mark.parametrize("variant", ["transject", "transformer"])
def test_transject_gradients_are_autograds_of_the_encoders_hidden_states(variant):
    """d loss / d X^(l) of TransJect (the same entropic draws as a forward pass) and of the Transformer baseline."""
    model = _tiny_encoder(variant)
    ids = _ids(40)
    y = torch.arange(ids.shape[0]) % 3
    mask = torch.ones_like(ids)
    mask[0, 7:] = 0
    loss = lambda out: torch.nn.functional.cross_entropy(out.logits, y)  # noqa: E731
    adapter = family_for(f"builtin:{variant}").activations(model, generator=torch.Generator().manual_seed(5))
    acts, grads = adapter.capture_gradients(tokens(ids, mask), loss, ["embedding", "layer2"])
    assert list(acts) == list(grads) == ["embedding", "layer2"]
    out = model(ids, mask, output_hidden_states=True, generator=torch.Generator().manual_seed(5))
    want = _grad_reference({"embedding": out.hidden_states[0], "layer2": out.hidden_states[2]}, loss(out))
    for name in want:
        torch.testing.assert_close(grads[name], want[name])
        torch.testing.assert_close(acts[name], dict(zip(("embedding", "layer2"), (out.hidden_states[0],
                                                                                 out.hidden_states[2])))[name].detach())
    assert grads["embedding"].abs().max() > 0


def test_map_gradients_flow_through_the_steps():
    """A map's states x_0 .. x_T carry gradients of a loss of x_T even when it has no trained weights."""
    from models import MapInputs, build_map

    m = build_map("logistic", {"r": 3.2})
    adapter = family_for("map:logistic").activations(m, depth=3)
    gen = torch.Generator().manual_seed(0)
    acts, grads = adapter.capture_gradients(MapInputs(samples=4, generator=gen), lambda x: x.sum())
    assert list(grads) == ["embedding", "layer1", "layer2", "layer3"]
    torch.testing.assert_close(grads["layer3"], torch.ones_like(acts["layer3"]))
    x2 = acts["layer2"]
    torch.testing.assert_close(grads["layer2"], 3.2 * (1 - 2 * x2))  # d f(x) / dx of r x (1 - x)


def test_a_map_without_a_depth_is_refused_with_the_fix():
    from models import build_map

    with pytest.raises(ValueError, match=r"is a map: say how many steps to capture \(depth=...\)"):
        family_for("map:logistic").activations(build_map("logistic", {"r": 3.2}))
