"""A hub-style tokenizer (the paper's BERT tokenizer for IMDb and AGnews) in place of word tokens:
a local tokenizer directory, a local csv, one tiny network trained and measured in process."""

from __future__ import annotations

import json

import pytest
import xarray as xr

from runner.apply import apply, prepare

TEXTS = ["the film was great and the actors were great", "an awful script and awful actors",
         "great characters", "the script is awful", "a waste of the talents of the actors",
         "great great film", "awful film", "the characters are unlikeable"]


def test_a_tokenizer_directory_gives_tokens_and_vocabulary(tmp_path):
    from models.tiny import _train_tokenizer

    tok = _train_tokenizer(TEXTS * 4, 200)
    tok.save_pretrained(tmp_path / "tok")
    for split, rows in (("train", TEXTS), ("test", TEXTS[:4])):
        (tmp_path / f"r_{split}.csv").write_text("text,label\n" + "".join(
            f"{t},{int('great' in t)}\n" for t in rows))
    spec = tmp_path / "tok.toml"
    spec.write_text(f"""
[experiment]
name = "tok"
study = "transject"
store = "{tmp_path / 'tok.zarr'}"

[data]
source = "r_{{split}}.csv"
tokenizer = "{tmp_path / 'tok'}"
max_length = 12
analysis_examples = 2
analysis_text = "The characters are unlikeable and the script is awful."

[training]
epochs = 1
batch_size = 4

[[model]]
name = "tj"
d_model = 8
n_layers = 1
n_experts = 2

[[measure]]
kind = "distances"
pairs = [["characters", "script"]]
""")
    p = prepare(spec)
    assert p.unmet == []
    out = apply(p, quiet=True)
    assert not out.failed and len(out.ran) == 3
    ds = xr.open_zarr(tmp_path / "tok.zarr", consolidated=False)
    assert list(ds.pair.values) == ["characters~script"]
    vocab = json.loads((tmp_path / str(ds.export_path.values[0]) / "vocab.json").read_text())
    assert vocab == tok.convert_ids_to_tokens(list(range(len(tok))))  # the tokenizer's vocabulary, by id

    (tmp_path / "tok" / "tokenizer.json").unlink()  # a broken tokenizer: plan names it
    (tmp_path / "tok" / "tokenizer_config.json").unlink()
    p = prepare(spec)
    assert len(p.unmet) == 1 and "[data] tokenizer" in p.unmet[0]


def test_pairs_are_found_across_word_pieces():
    from runner.studies.transject.measures.distances import resolve_pairs

    sentence = ["the", "char", "##acters", "are", "unlike", "##able", "script"]
    pos, labels = resolve_pairs(sentence, [["characters", "script"], ["unlikeable", "are"]], 12)
    assert pos == [(1, 6), (4, 3)] and labels == ["characters~script", "unlikeable~are"]
    with pytest.raises(ValueError, match="the analysis sentence has no 'x'"):  # never replaced by other pairs
        resolve_pairs(sentence, [["characters", "script"], ["x", "the"]], 12)
    pos, labels = resolve_pairs(sentence[:3], [], 2)  # no pairs given: every pair of the first tokens
    assert pos == [(0, 1)] and labels == ["0:the~1:char"]
