"""Sentence pairs with a score as depth-study samples (STS-B, Inoue et al. 2021 Fig. 3B/3C): local
files, the hub offline (an unmet requirement), and a pair field the file lacks (a spec error)."""

from __future__ import annotations

import json

import pytest

from runner.data.sentences import draw_pairs
from tests.runner.helpers import write_spec
from tests.runner.pairs import write_pairs

SPEC = """
    [experiment]
    name = "pairs"

    [[model]]
    name = "albert"
    source = "builtin:tiny-albert"

    [input]
    source = "{source}"
    subset = "stsb"
    pair = ["sentence1", "sentence2"]
    score = "{score}"
    samples = 20
    tokens = 16

    [dynamics]
    steps = 4

    [[measure]]
    kind = "sts_readout"
    """


@pytest.fixture(scope="module")
def tokenizer():
    from models.hub import load_tokenizer
    from models.registry import family_for

    return load_tokenizer(family_for("builtin:tiny-albert").location("builtin:tiny-albert", build=True))


def test_pairs_are_encoded_as_cls_a_sep_b_sep_of_exactly_n_tokens(tmp_path, tokenizer):
    tsv, jsonl = write_pairs(tmp_path / "pairs.tsv"), write_pairs(tmp_path / "pairs.jsonl")
    with jsonl.open("a") as f:  # unlabelled (GLUE's test split) and too short: never drawn
        f.write(json.dumps({"sentence1": "An unlabelled pair of sentences here.", "sentence2": "Yes, indeed it is.",
                            "label": -1}) + "\n")
        f.write(json.dumps({"sentence1": "Short.", "sentence2": "Too.", "label": 5.0}) + "\n")
    a = draw_pairs(str(tsv), tokenizer=tokenizer, samples=30, tokens=16, seed=3)
    b = draw_pairs(str(jsonl), tokenizer=tokenizer, samples=30, tokens=16, seed=3)
    assert a.texts == b.texts and a.scores == b.scores and a.input_ids.equal(b.input_ids)
    sep, cls = tokenizer.sep_token_id, tokenizer.cls_token_id
    for text, ids, score in zip(a.texts, a.input_ids.tolist(), a.scores, strict=True):
        first, second = text.split(" [SEP] ")
        assert ids[0] == cls and ids[-1] == sep and ids.count(sep) == 2 and len(ids) == 16
        assert ids == tokenizer(first, second, truncation=True, max_length=16)["input_ids"]
        assert 0 <= score <= 5 and "unlabelled" not in text and "Short." not in text


def test_hub_pairs_offline_are_an_unmet_requirement(in_process, tmp_path):
    spec = write_spec(tmp_path, SPEC.format(source="hf:nyu-mll/glue", score="label"))
    code, out, _ = in_process("plan", spec)
    assert code == 0 and "[input] source 'hf:nyu-mll/glue'" in out and "requirements not met" in out
    assert "pairs 'sentence1' [SEP] 'sentence2', score 'label'" in out
    code, _, err = in_process("apply", "-q", spec)
    assert code == 66 and "hf:nyu-mll/glue" in err


def test_a_score_field_the_file_lacks_is_a_spec_error(in_process, tmp_path):
    write_pairs(tmp_path / "pairs.jsonl")
    spec = write_spec(tmp_path, SPEC.format(source="pairs.jsonl", score="score"))
    code, _, err = in_process("plan", spec)
    assert code == 65 and "[input] source" in err and "has no field 'score'" in err
