"""Checkpoint series: revision patterns, local suites laid out like hub revisions, layers by hooks."""

from __future__ import annotations

import pytest
import torch

from models.hub import ModelLoadError
from models.registry import SUITES
from models.suites import (ADAPTERS, Checkpoint, adapter_for, capture_layers, hub_series, load_checkpoint, local_series,
                           parse_revisions, step_of)


def test_revision_patterns():
    assert parse_revisions("step{0..3000:1000}") == ["step0", "step1000", "step2000", "step3000"]
    assert parse_revisions("step{1..3}") == ["step1", "step2", "step3"]
    assert parse_revisions(["step0", "step512"]) == ["step0", "step512"]
    assert parse_revisions("main") == ["main"]
    assert len(parse_revisions("step{0..143000:1000}")) == 144  # Pythia's evenly spaced checkpoints
    for bad in ("step{3..1}", "step{0..10:0}", "step{0..}", ["a", "a"], []):
        with pytest.raises(ValueError):
            parse_revisions(bad)
    assert step_of("step143000") == 143000 and step_of("seed_3_step_20k0") == 0
    assert [c.step for c in hub_series("EleutherAI/pythia-160m", ["step2000", "step0"])] == [0, 2000]
    pythia = hub_series("EleutherAI/pythia-160m", ["step1000"])[0]
    assert (pythia.location, pythia.hub_revision) == ("EleutherAI/pythia-160m", "step1000")
    # MultiBERTs: one repository per checkpoint, steps in thousands
    mb = hub_series("google/multiberts-seed_3-step_{revision}", "{0..40:20}k")
    assert [c.step for c in mb] == [0, 20000, 40000] and step_of("2000k") == 2_000_000
    assert (mb[1].location, mb[1].hub_revision) == ("google/multiberts-seed_3-step_20k", None)


def tiny(kind: str, seed: int):
    from transformers import AutoModel, BertConfig, GPTNeoXConfig

    torch.manual_seed(seed)
    config = {"gpt_neox": GPTNeoXConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                        intermediate_size=32, max_position_embeddings=32),
              "bert": BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=32, max_position_embeddings=32)}[kind]
    return AutoModel.from_config(config)


@pytest.fixture(scope="module", params=["gpt_neox", "bert"])
def suite(request, tmp_path_factory):
    """A tiny model saved at three 'steps' in folders laid out like hub revisions."""
    root = tmp_path_factory.mktemp(request.param)
    for seed, step in enumerate((0, 10, 200)):
        tiny(request.param, seed).save_pretrained(root / f"step{step}")
    (root / "notes").mkdir()  # not a checkpoint: ignored
    return request.param, root


def test_a_local_series_in_step_order(suite):
    kind, root = suite
    assert [c.revision for c in local_series(root)] == ["step0", "step10", "step200"]
    assert [c.step for c in local_series(root, "step{0..10:10}")] == [0, 10]
    with pytest.raises(ModelLoadError, match="step20"):
        local_series(root, ["step0", "step20"])
    with pytest.raises(ModelLoadError, match="no such checkpoint directory"):
        local_series(root / "missing")


def test_layers_are_captured_as_the_model_computes_them(suite):
    kind, root = suite
    ckpt = local_series(root)[1]
    model = load_checkpoint(ckpt)
    assert adapter_for(model).model_types[0] == kind
    ids = torch.randint(64, (3, 7), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    acts = capture_layers(model, ids, mask)
    assert list(acts) == ["embedding", "layer1", "layer2"]
    hidden = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
    if kind == "bert":  # embeddings output and every block's output are the hidden states
        for i, name in enumerate(acts):
            torch.testing.assert_close(acts[name], hidden[i])
    else:  # GPT-NeoX: token embeddings; the last hidden state has the final layer norm applied
        torch.testing.assert_close(acts["embedding"], model.embed_in(ids))
        torch.testing.assert_close(acts["layer1"], hidden[1])
        torch.testing.assert_close(model.final_layer_norm(acts["layer2"]), hidden[2])
    other = capture_layers(load_checkpoint(local_series(root)[2]), ids, mask, layers=["layer2"])
    assert list(other) == ["layer2"] and not torch.equal(other["layer2"], acts["layer2"])  # another step's weights
    with pytest.raises(ValueError, match="layer9"):
        capture_layers(model, ids, mask, layers=["layer9"])


def test_unknown_families_and_missing_checkpoints_say_what_to_do(tmp_path):
    model = torch.nn.Linear(2, 2)
    with pytest.raises(ModelLoadError, match="no layer adapter"):
        adapter_for(model)
    assert all(a.blocks for a in ADAPTERS)
    with pytest.raises(ModelLoadError):
        load_checkpoint(Checkpoint(str(tmp_path), "step5", 5, True))


def test_word_activations_pool_each_words_subwords(tmp_path):
    """A word's activation is the mean (first, last) of its subword tokens' activations, computed in windows
    and batches as one forward pass over each window would give them."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from models.suites import encode_words, word_activations

    vocab = {"[UNK]": 0, "[PAD]": 1, "ab": 2, "##c": 3, "##d": 4, "x": 5, "y": 6}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]")
    words = ["x", "abcd", "y", "abc", "zz", "x"]
    ids, owner = encode_words(tokenizer, words)
    assert ids == [5, 2, 3, 4, 6, 2, 3, 0, 5] and owner == [0, 1, 1, 1, 2, 3, 3, 4, 5]
    model = tiny("gpt_neox", 0).eval()
    whole = capture_layers(model, torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.long))
    spans = [[0], [1, 2, 3], [4], [5, 6], [7], [8]]
    for pool, pick in (("mean", lambda h, s: h[s].mean(0)), ("first", lambda h, s: h[s[0]]),
                       ("last", lambda h, s: h[s[-1]])):
        got = word_activations(SUITES.activations(model), tokenizer, words, ["layer1"], window=len(words), batch_size=1, pool=pool)
        want = torch.stack([pick(whole["layer1"][0], s) for s in spans])
        torch.testing.assert_close(got["layer1"], want)
    # two windows of three words in one batch, right-padded: each window as if run alone
    got = word_activations(SUITES.activations(model), tokenizer, words, ["layer2"], window=3, batch_size=2)
    alone = word_activations(SUITES.activations(model), tokenizer, words[3:], ["layer2"], window=3, batch_size=1)
    torch.testing.assert_close(got["layer2"][3:], alone["layer2"])
    with pytest.raises(ValueError, match="lower window_words"):
        word_activations(SUITES.activations(model), tokenizer, ["abcd"] * 20, None, window=20, batch_size=1)


def test_loss_and_gradients_are_those_of_the_language_model(tmp_path):
    """The causal LM's summed next-token loss and its gradient at a layer's output, against transformers' own
    loss (``labels``) and autograd on ``hidden_states``; a masked LM's loss covers the masked tokens only."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoModelForCausalLM, BertConfig, BertForMaskedLM, GPTNeoXConfig, \
        PreTrainedTokenizerFast

    from models.suites import lm_loss, word_activations

    vocab = {w: i for i, w in enumerate(["[UNK]", "[PAD]", "[MASK]", "a", "b", "c", "d"])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                        mask_token="[MASK]")
    words = "a b c d a c b d b".split()
    ids = torch.tensor([[vocab[w] for w in words]])
    torch.manual_seed(0)
    small = dict(vocab_size=7, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                 max_position_embeddings=32)
    model = AutoModelForCausalLM.from_config(GPTNeoXConfig(**small)).eval()
    total, n = lm_loss(model, tokenizer, words, window=len(words), batch_size=1)
    ref = model(input_ids=ids, labels=ids, output_hidden_states=True)
    assert n == len(words) - 1
    assert abs(total / n - float(ref.loss.detach())) < 1e-5
    acts, grads = word_activations(SUITES.activations(model), tokenizer, words, ["layer1"], window=len(words), batch_size=1,
                                   gradients=True)
    (want,) = torch.autograd.grad(ref.loss * n, ref.hidden_states[1])
    torch.testing.assert_close(acts["layer1"], ref.hidden_states[1][0].detach())
    torch.testing.assert_close(grads["layer1"], want[0], rtol=1e-4, atol=1e-6)
    bert = BertForMaskedLM(BertConfig(**small)).eval()
    total, n = lm_loss(bert, tokenizer, words * 3, window=len(words) * 3, batch_size=1, mask_fraction=0.5)
    assert 0 < n < len(words) * 3 and total > 0
    assert lm_loss(bert, tokenizer, words * 3, window=len(words) * 3, batch_size=1, mask_fraction=0.5) == (total, n)
    one, two = (lm_loss(bert, tokenizer, words * 3, window=9, batch_size=b, mask_fraction=0.5) for b in (1, 3))
    assert one[1] == two[1] and abs(one[0] - two[0]) < 1e-4  # the masked positions do not follow the batching


def test_pickled_weights_load_only_when_the_spec_allows_them(tmp_path):
    from transformers import AutoModelForCausalLM, GPTNeoXConfig

    model = AutoModelForCausalLM.from_config(GPTNeoXConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2,
                                                           num_attention_heads=2, intermediate_size=32))
    (tmp_path / "step5").mkdir()
    torch.save(model.state_dict(), tmp_path / "step5" / "pytorch_model.bin")
    model.config.save_pretrained(tmp_path / "step5")
    ckpt = local_series(tmp_path)[0]
    with pytest.raises(ModelLoadError, match="model.safetensors"):
        load_checkpoint(ckpt)
    loaded = load_checkpoint(ckpt, pickled_weights=True, head=True)
    assert all(torch.equal(v, loaded.state_dict()[k]) for k, v in model.state_dict().items())
    from transformers import AutoModel

    AutoModel.from_config(model.config).save_pretrained(tmp_path / "step7")  # a base model only: no head weights
    with pytest.raises(ModelLoadError, match="head is not published"):
        load_checkpoint(local_series(tmp_path, ["step7"])[0], head=True)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_gpt2_and_llama_adapters_name_their_blocks(family):
    """Block k's output is hidden state k (the last one before the final norm) for GPT-2 and Llama-style models."""
    from transformers import AutoModel, GPT2Config, LlamaConfig

    torch.manual_seed(0)
    config = {"gpt2": GPT2Config(vocab_size=64, n_embd=16, n_layer=3, n_head=2, n_positions=32),
              "llama": LlamaConfig(vocab_size=64, hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
                                   num_key_value_heads=1, intermediate_size=32, max_position_embeddings=32)}[family]
    model = AutoModel.from_config(config).eval()
    ids = torch.randint(64, (2, 6), generator=torch.Generator().manual_seed(1))
    acts = capture_layers(model, ids, torch.ones_like(ids))
    hidden = model(input_ids=ids, output_hidden_states=True).hidden_states
    assert list(acts) == ["embedding", "layer1", "layer2", "layer3"]
    torch.testing.assert_close(acts["embedding"], model.get_input_embeddings()(ids))
    for k in (1, 2):
        torch.testing.assert_close(acts[f"layer{k}"], hidden[k])
