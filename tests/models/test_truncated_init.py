"""The paper's initial networks: truncated-normal weights, zero biases, LayerNorm 1/0."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from models import MapInputs, TruncatedNormalInit, apply_truncated_normal, load_albert


def _weights(module: nn.Module) -> list[torch.Tensor]:
    return [m.weight for m in module.modules() if isinstance(m, (nn.Linear, nn.Embedding))]


@pytest.fixture(scope="module")
def albert_dir(tmp_path_factory, save_albert):
    return save_albert(tmp_path_factory.mktemp("init"), num_hidden_layers=3, seed=11, hidden_size=64,
                       intermediate_size=256)


def test_initial_network_statistics(albert_dir):
    init = TruncatedNormalInit()
    amap = load_albert(str(albert_dir), init=init, seed=0)
    w = torch.cat([p.flatten() for p in _weights(amap)])
    assert w.numel() > 50_000
    bound = init.clip * init.std
    assert w.abs().max() <= bound and w.abs().max() > 0.95 * bound
    assert abs(w.mean()) < 5e-4
    # std of N(0, s^2) truncated at +-2s is 0.8796 s
    assert init.effective_std == pytest.approx(0.02 * 0.87962566, rel=1e-6)
    assert w.std().item() == pytest.approx(init.effective_std, rel=0.02)
    for m in amap.modules():
        if isinstance(m, (nn.Linear, nn.LayerNorm)) and m.bias is not None:
            assert torch.count_nonzero(m.bias) == 0
        if isinstance(m, nn.LayerNorm):
            assert torch.all(m.weight == 1)


def test_seeds(albert_dir):
    init = TruncatedNormalInit()
    a = load_albert(str(albert_dir), init=init, seed=1).state_dict()
    b = load_albert(str(albert_dir), init=init, seed=1).state_dict()
    c = load_albert(str(albert_dir), init=init, seed=2).state_dict()
    assert a.keys() == b.keys() == c.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    w = "embeddings.word_embeddings.weight"
    assert not torch.equal(a[w], c[w])
    # and none of them is the checkpoint's own weights
    pre = load_albert(str(albert_dir)).state_dict()
    assert not torch.equal(a[w], pre[w])


def test_std_and_clip_are_used():
    lin = nn.Linear(200, 300)
    apply_truncated_normal(lin, TruncatedNormalInit(std=0.5, clip=1.0), torch.Generator().manual_seed(0))
    assert lin.weight.abs().max() <= 0.5
    expected = 0.5 * math.sqrt(1 - 2 * math.exp(-0.5) / math.sqrt(2 * math.pi) / math.erf(1 / math.sqrt(2)))
    assert TruncatedNormalInit(std=0.5, clip=1.0).effective_std == pytest.approx(expected)
    assert lin.weight.std().item() == pytest.approx(expected, rel=0.02)
    assert torch.count_nonzero(lin.bias) == 0


def test_unknown_parameters_are_refused_and_bad_init_rejected():
    class WithScale(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.ones(3))

    with pytest.raises(TypeError, match="scale"):
        apply_truncated_normal(WithScale(), TruncatedNormalInit(), torch.Generator())
    with pytest.raises(ValueError, match="std"):
        TruncatedNormalInit(std=0.0)
    with pytest.raises(ValueError, match="clip"):
        TruncatedNormalInit(clip=-1.0)


def test_initial_network_dynamics_differ_from_pretrained(tiny_albert_dir):
    """Iterating a freshly drawn network is not iterating the (tiny) pre-trained one."""
    from models import load_tokenizer

    tok = load_tokenizer(str(tiny_albert_dir))
    enc = tok(["the function returns a list of values", "a class defines new objects"], padding=True,
              return_tensors="pt")
    inputs = MapInputs(samples=2, input_ids=enc["input_ids"], attention_mask=enc["attention_mask"])
    finals = []
    for init in (None, TruncatedNormalInit()):
        amap = load_albert(str(tiny_albert_dir), init=init, seed=0)
        with torch.no_grad():
            x = amap.initial_state(inputs)
            for _ in range(10):
                x = amap.step(x, enc["attention_mask"])
        assert torch.isfinite(x).all()
        finals.append(x)
    assert (finals[0] - finals[1]).abs().max() > 0.1
