"""A hub-style tokenizer (the paper's BERT tokenizer for IMDb and AGnews) in place of word tokens:
a local tokenizer directory, a local csv, one tiny network trained and measured in process."""

from __future__ import annotations

import json

import pytest
import xarray as xr

from runner.run.apply import apply
from runner.run.prepare import prepare

from .tokenized import write_data, write_spec


def test_a_tokenizer_directory_gives_tokens_and_vocabulary(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the spec's relative paths (tok/, the csv files) read from here
    tok = write_data(tmp_path)
    spec = write_spec(tmp_path, "tok", str(tmp_path / "tok.zarr"))
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
    from runner.checkpointed.measures.distances import resolve_pairs

    sentence = ["the", "char", "##acters", "are", "unlike", "##able", "script"]
    pos, labels = resolve_pairs(sentence, [["characters", "script"], ["unlikeable", "are"]], 12)
    assert pos == [(1, 6), (4, 3)] and labels == ["characters~script", "unlikeable~are"]
    with pytest.raises(ValueError, match="the analysis sentence has no 'x'"):  # never replaced by other pairs
        resolve_pairs(sentence, [["characters", "script"], ["x", "the"]], 12)
    pos, labels = resolve_pairs(sentence[:3], [], 2)  # no pairs given: every pair of the first tokens
    assert pos == [(0, 1)] and labels == ["0:the~1:char"]
