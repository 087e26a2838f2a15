"""TransJect's entropy and distances on the LSTMs and on a checkpoint suite (measures on activations only,
runner/checkpointed/measure.py), with known answers: at the embedding layer a token's vector is its row of
the embedding matrix, so the pair distances are those of the rows, and their ratio to layer 0 is 1."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from safetensors.torch import load_file

from suite_helpers import build_suite
from training_helpers import CORPUS, ROOT, TINY

SHARED = """
[[measure]]
kind = "entropy"

[[measure]]
kind = "distances"
max_tokens = 6
"""


def _apply(path):
    from runner.run.apply import apply
    from runner.run.prepare import prepare

    out = apply(prepare(path), quiet=True)
    assert not out.failed


def _pair_distances(rows: np.ndarray, first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, b = rows[first], rows[second]
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return np.linalg.norm(a - b, axis=1), 1 - cos


def _sentence(pairs) -> list[str]:
    """The tokens named by the labels ``i:word~j:word`` of every pair of the first tokens."""
    out = {}
    for label in pairs:
        for side in label.split("~"):
            i, word = side.split(":", 1)
            out[int(i)] = word
    return [out[i] for i in sorted(out)]


@pytest.mark.timeout(60)
def test_entropy_and_distances_on_the_lstms(tmp_path):
    text = TINY.read_text()
    text = text[:text.index("[[measure]]")].replace('seed = 0\n', f'seed = 0\nstore = "{tmp_path / "s.zarr"}"\n', 1)
    text = text.replace("epochs = 3", "epochs = 1").replace("../../tests/data/", f"{ROOT}/tests/data/")
    (tmp_path / "s.toml").write_text(text + SHARED)
    _apply(tmp_path / "s.toml")
    ds = xr.open_zarr(tmp_path / "s.zarr")
    assert list(ds.layer.values) == ["embedding", "lstm1", "lstm2", "logits"]
    lms = [list(ds.network.values).index(n) for n in ("lm", "lm_seed2")]
    taggers = [i for i in range(ds.sizes["network"]) if i not in lms]
    assert np.isfinite(ds.layer_entropy.values[lms]).all()  # every layer of every checkpoint of the LMs
    assert np.isnan(ds.layer_entropy.values[taggers]).all()  # taggers are not language models: not measured
    np.testing.assert_array_equal(ds.euclidean_ratio.sel(layer="embedding").values[lms], 1.0)
    assert ds.sizes["pair"] == 15  # every pair of the sentence's first 6 tokens
    first, second = ds.pair_first.values, ds.pair_second.values
    vocab = list(ds.vocab_word.values)
    ids = [vocab.index(w) for w in _sentence(ds.pair.values)]
    for n in lms:
        for c in range(ds.sizes["checkpoint"]):
            weights = load_file(str(tmp_path / ds.checkpoint_path.values[n, c]))["model.embedding.weight"].double().numpy()
            eu, cos = _pair_distances(weights[ids], first, second)
            np.testing.assert_allclose(ds.pair_euclidean.values[n, c, :, 0], eu, rtol=1e-6)
            np.testing.assert_allclose(ds.pair_cosine.values[n, c, :, 0], cos, rtol=1e-6, atol=1e-7)
    assert not np.allclose(ds.pair_euclidean.values[lms[0], -1, :, 2], ds.pair_euclidean.values[lms[0], -1, :, 0])
    from runner.plugin.recipes import recipes  # runner figures draws them with TransJect's Fig. 1 and 5a recipes

    fig = recipes("training")["fig1"].draw(ds)
    line = fig.axes[0].get_lines()[0]  # lm, Euclidean distance of the first pair over the layers
    np.testing.assert_array_equal(line.get_ydata(), ds.pair_euclidean.values[lms[0], -1, 0])
    assert recipes("training")["fig5a"].draw(ds).axes[0].get_xticklabels()[3].get_text() == "logits"


@pytest.mark.timeout(120)
def test_entropy_and_distances_on_a_checkpoint_suite(tmp_path):
    """A word-level GPT-NeoX series: a word's ``embedding`` activation is its token's row of ``embed_in``."""
    build_suite(tmp_path / "neox", "gpt_neox", steps=(0, 10))
    spec = tmp_path / "suite.toml"
    spec.write_text(f"""[experiment]
name = "suite"
seed = 0
store = "{tmp_path / 'suite.zarr'}"

[corpus]
source = "{CORPUS}"
min_count = 1
drop_rare_sentences = false
analysis_tokens = 150

[[model]]
name = "neox"
kind = "suite"
source = "{tmp_path / 'neox'}"
""" + SHARED)
    _apply(spec)
    ds = xr.open_zarr(tmp_path / "suite.zarr")
    assert list(ds.layer.values) == ["embedding", "layer1", "layer2"]
    assert np.isfinite(ds.layer_entropy.values).all()
    np.testing.assert_array_equal(ds.euclidean_ratio.sel(layer="embedding").values, 1.0)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tmp_path / "neox" / "step10")
    ids = [tok.convert_tokens_to_ids(w) for w in _sentence(ds.pair.values)]
    for c, step in enumerate((0, 10)):
        model = AutoModelForCausalLM.from_pretrained(tmp_path / "neox" / f"step{step}")
        rows = model.gpt_neox.embed_in.weight.detach().double().numpy()[ids]
        eu, _ = _pair_distances(rows, ds.pair_first.values, ds.pair_second.values)
        np.testing.assert_allclose(ds.pair_euclidean.values[0, c, :, 0], eu, rtol=1e-5)


def test_pairs_the_lstm_sentence_lacks_are_named_before_compute(tmp_path, in_process):
    text = TINY.read_text()
    text = text[:text.index("[[measure]]")].replace('seed = 0\n', f'seed = 0\nstore = "{tmp_path / "p.zarr"}"\n', 1)
    (tmp_path / "p.toml").write_text(text + '[[measure]]\nkind = "distances"\npairs = [["fish", "unicorn"]]\n')
    code, out, err = in_process("apply", tmp_path / "p.toml", "-q")
    assert code == 65 and "pairs: the analysis sentence has no 'unicorn'; its tokens: this small fish" in err, err
    assert not list((tmp_path / "p.runner").glob("checkpoints/*"))  # nothing trained
