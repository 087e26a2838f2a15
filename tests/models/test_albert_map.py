"""AlbertMap iterated L times equals transformers' own L-layer AlbertModel (Eqs. 1-4)."""

from __future__ import annotations

import pytest
import torch

from models import AlbertMap, MapInputs, load_albert


def _batch(vocab: int = 100, n: int = 12):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, vocab, (3, n), generator=g)
    mask = torch.ones(3, n, dtype=torch.long)
    mask[1, 8:] = 0  # padding at the end of some rows
    mask[2, 4:] = 0
    ids[mask == 0] = 0  # the pad token
    return ids, mask


def _iterate(amap: AlbertMap, ids, mask, steps: int):
    with torch.no_grad():
        x = amap.initial_state(MapInputs(samples=ids.shape[0], input_ids=ids, attention_mask=mask))
        for _ in range(steps):
            x = amap.step(x, mask)
    return x


@pytest.mark.parametrize("layers", [1, 3, 7])
@pytest.mark.parametrize(("implementation", "atol"), [("transformers", 1e-5), ("fused", 1e-4)])
def test_iterating_the_shared_layer_equals_albert_model(tmp_path, save_albert, layers, implementation, atol):
    from transformers import AlbertModel

    save_albert(tmp_path, num_hidden_layers=layers, seed=layers)
    ref = AlbertModel.from_pretrained(tmp_path).eval()
    ids, mask = _batch()
    with torch.no_grad():
        expected = ref(input_ids=ids, attention_mask=mask).last_hidden_state
    amap = load_albert(str(tmp_path), implementation=implementation)
    got = _iterate(amap, ids, mask, layers)
    assert got.shape == expected.shape == (3, 12, 32)
    # HF computes padded query positions too (they attend to the unpadded keys), so every
    # position must agree, not only the unmasked ones.
    torch.testing.assert_close(got, expected, atol=atol, rtol=0)
    # and the test is not vacuous: the layer moves the state and the mask matters
    assert (got - amap.initial_state(MapInputs(samples=3, input_ids=ids))).abs().max() > 0.1
    unmasked = _iterate(amap, ids, None, layers)
    assert (unmasked[1:] - got[1:]).abs().max() > 1e-3
    torch.testing.assert_close(unmasked[0], got[0], atol=atol, rtol=0)  # row 0 has no padding


def test_no_mask_equals_all_ones_and_eager_reference(tmp_path, save_albert):
    from transformers import AlbertModel

    save_albert(tmp_path, num_hidden_layers=3)
    ref = AlbertModel.from_pretrained(tmp_path, attn_implementation="eager").eval()
    ids, _ = _batch()
    with torch.no_grad():
        expected = ref(input_ids=ids).last_hidden_state
    for impl in ("transformers", "fused"):
        amap = load_albert(str(tmp_path), implementation=impl)
        torch.testing.assert_close(_iterate(amap, ids, None, 3), expected, atol=1e-4, rtol=0)
        torch.testing.assert_close(_iterate(amap, ids, torch.ones_like(ids), 3), expected, atol=1e-4, rtol=0)


@pytest.fixture(scope="module")
def both(tmp_path_factory, save_albert):
    """The same checkpoint as the two implementations."""
    d = save_albert(tmp_path_factory.mktemp("albert"), num_hidden_layers=2)
    return d, load_albert(str(d), implementation="transformers"), load_albert(str(d), implementation="fused")


def test_fused_and_transformers_agree_on_one_step(both):
    _, hf, fused = both
    assert isinstance(hf.layer, torch.nn.Module) and type(hf.layer).__name__ == "AlbertLayer"
    assert type(fused.layer).__name__ == "FusedAlbertLayer"
    ids, mask = _batch()
    x = 3.0 * torch.randn(3, 12, 32, generator=torch.Generator().manual_seed(5))  # off the embedding manifold
    with torch.no_grad():
        for m in (mask, None):
            torch.testing.assert_close(fused.step(x, m), hf.step(x, m), atol=1e-5, rtol=0)
        torch.testing.assert_close(fused.attention_probs(x, mask), hf.attention_probs(x, mask), atol=1e-6, rtol=0)
    x0_hf = hf.initial_state(MapInputs(samples=3, input_ids=ids))
    x0_fused = fused.initial_state(MapInputs(samples=3, input_ids=ids))
    assert torch.equal(x0_hf, x0_fused)


def test_attention_probs(both):
    from transformers import AlbertModel

    d, hf, fused = both
    ids, mask = _batch()
    with torch.no_grad():
        for amap in (hf, fused):
            x0 = amap.initial_state(MapInputs(samples=3, input_ids=ids))
            p = amap.attention_probs(x0, mask)
            assert p.shape == (3, 4, 12, 12)
            torch.testing.assert_close(p.sum(-1), torch.ones(3, 4, 12), atol=1e-6, rtol=0)
            assert p[1, :, :, 8:].max() < 1e-12 and p[2, :, :, 4:].max() < 1e-12  # masked keys
            assert p[0].min() > 0
        # the same probabilities transformers reports for its first layer (eager attention)
        ref = AlbertModel.from_pretrained(d, attn_implementation="eager").eval()
        out = ref(input_ids=ids, attention_mask=mask, output_attentions=True)
        torch.testing.assert_close(fused.attention_probs(x0, mask), out.attentions[0], atol=1e-6, rtol=0)


def test_mask_cache_follows_the_mask(both):
    """A new mask tensor, or the same tensor changed in place, is not served from the cache."""
    _, hf, fused = both
    x = torch.randn(3, 12, 32, generator=torch.Generator().manual_seed(6))
    _, mask = _batch()
    with torch.no_grad():
        for amap in (hf, fused):
            a = amap.step(x, mask)
            m = mask.clone()
            b = amap.step(x, m)
            torch.testing.assert_close(a, b, atol=0, rtol=0)
            m[0, 6:] = 0
            c = amap.step(x, m)
            assert (c[0] - a[0]).abs().max() > 1e-3
            torch.testing.assert_close(c[1:], a[1:], atol=0, rtol=0)


def test_dtype_state_shape_and_frozen(tmp_path, save_albert):
    save_albert(tmp_path, num_hidden_layers=1)
    amap = load_albert(str(tmp_path), dtype=torch.float64)
    ids, mask = _batch()
    x = amap.initial_state(MapInputs(samples=3, input_ids=ids, attention_mask=mask))
    assert x.dtype == torch.float64 and x.shape == (3, 12, amap.n_hidden)
    assert amap.step(x, mask).dtype == torch.float64
    assert not amap.training and not any(p.requires_grad for p in amap.parameters())
    assert amap.needs_tokens
    with pytest.raises(ValueError, match="input_ids"):
        amap.initial_state(MapInputs(samples=3))
    with pytest.raises(ValueError, match="implementation"):
        load_albert(str(tmp_path), implementation="flash")  # type: ignore[arg-type]


@pytest.mark.parametrize("act", ["gelu", "relu"])
def test_fused_exact_activations(tmp_path, save_albert, act):
    from transformers import AlbertModel

    save_albert(tmp_path, num_hidden_layers=2, hidden_act=act)
    ids, mask = _batch()
    with torch.no_grad():
        expected = AlbertModel.from_pretrained(tmp_path).eval()(input_ids=ids, attention_mask=mask).last_hidden_state
    got = _iterate(load_albert(str(tmp_path), implementation="fused"), ids, mask, 2)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
