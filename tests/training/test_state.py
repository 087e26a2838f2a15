"""The training study's plan state is typed (issue 33): the corpus' statistics are a frozen
:class:`CorpusStats`, cached beside the corpus as its fields; a cache file of another version is read
as none (the corpus is then read again), never half-understood."""

from __future__ import annotations

import dataclasses
import json

import pytest

from runner.studies.training.state import CorpusStats


def test_corpus_statistics_round_trip_their_cache_file_and_are_frozen(tmp_path):
    stats = CorpusStats("abc", 10, 100, 20, 30, 50, {"sem_coarse": 3})
    path = tmp_path / "corpora" / "s.json"
    stats.write(path)
    assert CorpusStats.read(path) == stats
    assert stats.tokens == (100, 20, 30) and stats.split_tokens("valid") == 20 and stats.split_tokens("test") == 30
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.vocab = 1


@pytest.mark.parametrize("text", [
    json.dumps({"corpus_key": "abc", "steps_per_epoch": 10, "tokens": [100, 20, 30], "vocab": 50}),  # untyped
    "{",
])
def test_a_cache_file_of_another_version_is_none(tmp_path, text):
    path = tmp_path / "s.json"
    path.write_text(text)
    assert CorpusStats.read(path) is None
    assert CorpusStats.read(tmp_path / "missing.json") is None
