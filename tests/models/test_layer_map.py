"""A transformer's distinct layers as a depth map (models.layer_map): stepping block after block from
x_0 reproduces the model's own hidden states, for every adapter family, padding masks included."""

from __future__ import annotations

import pytest
import torch

from models.base import MapInputs
from models.layer_map import LayerMap


def _model(kind: str):
    from transformers import AutoModel, BertConfig, GPT2Config, GPTNeoXConfig, LlamaConfig

    common = dict(vocab_size=50, hidden_size=16, num_hidden_layers=3, num_attention_heads=2, intermediate_size=32,
                  max_position_embeddings=32)
    config = {"gpt_neox": lambda: GPTNeoXConfig(**common),
              "bert": lambda: BertConfig(**common),
              "gpt2": lambda: GPT2Config(vocab_size=50, n_embd=16, n_layer=3, n_head=2, n_positions=32),
              "llama": lambda: LlamaConfig(**common, num_key_value_heads=2)}[kind]()
    torch.manual_seed(0)
    return AutoModel.from_config(config, attn_implementation="eager").eval()


@pytest.mark.parametrize("kind", ["gpt_neox", "bert", "gpt2", "llama"])
def test_stepping_the_blocks_gives_the_models_hidden_states(kind):
    model = _model(kind)
    ids = torch.randint(0, 50, (3, 7), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0  # a padded sentence
    with torch.no_grad():
        want = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
        f = LayerMap(model)
        x = f.initial_state(MapInputs(samples=3, input_ids=ids, attention_mask=mask))
        torch.testing.assert_close(x, want[0], rtol=0, atol=0)
        last = len(want) - 1 if kind in ("bert",) else len(want) - 2  # the others' last state is after a final norm
        for t in range(f.n_layers):
            f.at(t)
            x = f.step(x, mask)
            if t + 1 <= last:
                torch.testing.assert_close(x, want[t + 1], rtol=0, atol=0)  # the same blocks on the same shapes: bit for bit
    assert f.n_layers == 3 and not f.autonomous
    with pytest.raises(ValueError, match="3 layers"):
        f.at(3)
