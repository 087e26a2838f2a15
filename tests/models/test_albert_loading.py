"""load_albert / load_tokenizer: refusals and the errors a user sees."""

from __future__ import annotations

import pytest
import torch

from models import AlbertMap, ModelLoadError, TruncatedNormalInit, load_albert, load_tokenizer
from models.albert import check_shared_layer


@pytest.mark.parametrize(("field", "value"), [("num_hidden_groups", 2), ("inner_group_num", 2)])
def test_refuses_configs_that_do_not_share_one_layer(tmp_path, save_albert, tiny_config, field, value):
    from transformers import AlbertModel

    save_albert(tmp_path, num_hidden_layers=4, **{field: value})
    with pytest.raises(ValueError, match=f"{field}={value}") as info:
        load_albert(str(tmp_path))
    assert "num_hidden_groups" in str(info.value) and "inner_group_num" in str(info.value)
    with pytest.raises(ValueError, match=field):
        load_albert(str(tmp_path), init=TruncatedNormalInit())
    with pytest.raises(ValueError, match=field):
        AlbertMap(AlbertModel(tiny_config(4, **{field: value})))
    check_shared_layer(tiny_config(4))  # the shared default passes


def test_missing_local_directory(tmp_path):
    missing = tmp_path / "no" / "such" / "model"
    for load in (load_albert, load_tokenizer):
        with pytest.raises(ModelLoadError) as info:
            load(str(missing))
        msg = str(info.value)
        assert str(missing) in msg and "does not exist" in msg
        assert "hf download" not in msg  # a path, not a hub id


def test_directory_without_a_model(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelLoadError, match="empty"):
        load_albert(str(tmp_path / "empty"))
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(ModelLoadError, match="not a model directory"):
        load_albert(str(tmp_path / "file.txt"))


def test_unknown_hub_id_offline_says_what_to_do():
    source = "transient-tests-nobody/no-such-albert"
    for load in (load_albert, load_tokenizer):
        with pytest.raises(ModelLoadError) as info:
            load(source, revision="v1")
        msg = str(info.value)
        assert source in msg
        assert f"hf download {source} --revision v1" in msg
        assert "HF_HOME" in msg and 'source = "path:DIR"' in msg
        assert "\n" not in msg  # the CLI prints it as one line


def test_checkpoint_missing_encoder_weights_is_an_error(tmp_path, save_albert):
    """A checkpoint whose weights do not fit would silently iterate random weights."""
    from safetensors.torch import load_file, save_file

    save_albert(tmp_path, num_hidden_layers=1)
    weights = load_file(tmp_path / "model.safetensors")
    kept = {k: v for k, v in weights.items() if "ffn_output" not in k}
    assert len(kept) < len(weights)
    save_file(kept, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ModelLoadError, match="ffn_output"):
        load_albert(str(tmp_path))


def test_global_rng_untouched(tmp_path, save_albert):
    from models import TruncatedNormalInit

    save_albert(tmp_path, num_hidden_layers=1)
    state = torch.get_rng_state()
    load_albert(str(tmp_path), init=TruncatedNormalInit(), seed=3)
    load_albert(str(tmp_path))
    assert torch.equal(state, torch.get_rng_state())
