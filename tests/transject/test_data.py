"""Labelled texts for classification (runner/studies/transject/data/classification.py): tokenisation, vocabulary,
encoding, local files through ``datasets``, ListOps splits, and the hub offline."""

from __future__ import annotations

import pytest

from runner.data.hub import hub_cached
from runner.data.registry import InputError
from runner.studies.transject.data.classification import build_vocab, encode, labelled_splits, tokenize
from runner.studies.transject.data.listops import evaluate


def test_word_and_char_tokens():
    assert tokenize("It's a waste, Deneuve!") == ["it", "'", "s", "a", "waste", ",", "deneuve", "!"]
    assert tokenize("Ab c", "char") == ["a", "b", " ", "c"]
    assert tokenize("Ab", "char", lowercase=False) == ["A", "b"]
    with pytest.raises(ValueError):
        tokenize("x", "bpe")


def test_vocabulary_and_encoding():
    vocab = build_vocab([["b", "a", "b"], ["c", "b", "a"]], 4)
    assert vocab == ["<pad>", "<unk>", "b", "a"]  # by frequency, ties by token, capped
    enc = encode([["b", "c", "a", "b"], []], [1, 0], vocab, 3)
    assert enc.ids.tolist() == [[2, 1, 3], [1, 0, 0]]  # cut to 3; unknown 'c' -> <unk>; empty -> one <unk>
    assert enc.mask.tolist() == [[1, 1, 1], [1, 0, 0]] and enc.labels.tolist() == [1, 0]


def test_local_files_per_split_and_one_file_split_by_fraction(tmp_path):
    for split, rows in (("train", [("good film", "pos"), ("bad film", "neg")]), ("test", [("fine", "pos")])):
        (tmp_path / f"d_{split}.csv").write_text("review,sentiment\n" + "".join(f"{t},{s}\n" for t, s in rows))
    train, test = labelled_splits("d_{split}.csv", tmp_path, text="review", label="sentiment")
    assert train.tokens == [["good", "film"], ["bad", "film"]] and train.labels == [1, 0]  # neg < pos
    assert test.tokens == [["fine"]] and test.labels == [1]  # string labels: one numbering for both splits
    (tmp_path / "all.jsonl").write_text("".join(f'{{"text": "t{i}", "label": {i % 2}}}\n' for i in range(10)))
    train, test = labelled_splits("all.jsonl", tmp_path, test_fraction=0.2, seed=0)
    assert len(train.labels) == 8 and len(test.labels) == 2
    assert sorted(t[0] for t in train.tokens + test.tokens) == sorted(f"t{i}" for i in range(10))
    with pytest.raises(InputError, match="no column 'body'"):
        labelled_splits("all.jsonl", tmp_path, text="body")


def test_listops_splits_are_disjoint_and_labelled():
    train, test = labelled_splits("listops:", seed=3, options=dict(train=20, test=5, max_depth=3, max_args=4,
                                                                   min_length=4, max_length=30))
    assert len(train.labels) == 20 and len(test.labels) == 5
    assert not {tuple(t) for t in train.tokens} & {tuple(t) for t in test.tokens}
    assert all(evaluate(t) == y for t, y in zip(train.tokens + test.tokens, train.labels + test.labels))


def test_hub_dataset_offline_names_it(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    why = hub_cached("someone/not-cached-dataset", None)
    assert why and "someone/not-cached-dataset" in why and "cache" in why
    with pytest.raises(InputError, match="someone/not-cached-dataset"):
        labelled_splits("hf:someone/not-cached-dataset")
