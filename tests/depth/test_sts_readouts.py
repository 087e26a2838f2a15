"""Sentence pairs with a score as depth-study samples (STS-B, Inoue et al. 2021 Fig. 3B/3C): local
files, the hub offline (an unmet requirement), a pair field the file lacks (a spec error), and the
readouts resumed after a stop inside the handwriting window. (Values and figures on a finished
run: tests/figures/test_readout_figures.py.)"""

from __future__ import annotations

import json
import signal
import time

import numpy as np
import pytest
import xarray as xr

from runner.studies.depth.samples import draw_pairs
from tests.runner.helpers import write_spec
from tests.runner.pairs import write_pairs

SPEC = """
    [experiment]
    name = "pairs"

    [[model]]
    name = "albert"
    source = "{albert}"

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
def albert(tmp_path_factory):
    from models.tiny import build_tiny_albert

    return build_tiny_albert(tmp_path_factory.mktemp("albert") / "tiny", seed=0, mlm_steps=20)


@pytest.fixture(scope="module")
def tokenizer(albert):
    from models.hub import load_tokenizer

    return load_tokenizer(str(albert))


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


def test_hub_pairs_offline_are_an_unmet_requirement(in_process, tmp_path, albert):
    spec = write_spec(tmp_path, SPEC.format(source="hf:nyu-mll/glue", score="label", albert=albert))
    code, out, _ = in_process("plan", spec)
    assert code == 0 and "[input] source 'hf:nyu-mll/glue'" in out and "requirements not met" in out
    assert "pairs 'sentence1' [SEP] 'sentence2', score 'label'" in out
    code, _, err = in_process("apply", "-q", spec)
    assert code == 66 and "hf:nyu-mll/glue" in err


def test_a_score_field_the_file_lacks_is_a_spec_error(in_process, tmp_path, albert):
    write_pairs(tmp_path / "pairs.jsonl")
    spec = write_spec(tmp_path, SPEC.format(source="pairs.jsonl", score="score", albert=albert))
    code, _, err = in_process("plan", spec)
    assert code == 65 and "[input] source" in err and "has no field 'score'" in err


RESUMED = SPEC.replace("steps = 4", "steps = 20\ncheckpoint_every = 10").replace("samples = 20", "samples = 60") + """
    [[measure]]
    kind = "handwriting_readout"
    t0_start = 0
    t0_stop = 6
    dt_start = 4
    dt_stop = 12
    demo = [2, 8]
    """


def test_readouts_resume_after_a_stop_inside_the_handwriting_window(in_process, tmp_path, monkeypatch, albert):
    """Stopped (SIGINT, in this process) at t = 15, past the durable point at 10 and inside the
    handwriting window 0..18: the resumed run's values equal an uninterrupted run's, bit for bit on
    the CPU (the window's states come back from the durable point)."""
    import os
    import threading

    import runner.core.interrupt

    write_pairs(tmp_path / "pairs.jsonl")
    text = RESUMED.format(source="pairs.jsonl", score="label", albert=albert)
    spec, ref = write_spec(tmp_path, text), write_spec(tmp_path, text.replace('"pairs"', '"ref"'), "ref.toml")
    assert in_process("apply", "-q", ref)[0] == 0
    monkeypatch.setattr(runner.core.interrupt, "_stall", "albert@15")
    marker = tmp_path / "store/pairs.runner/stalled"

    def stop():
        deadline = time.monotonic() + 120
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=stop, daemon=True).start()
    assert in_process("apply", "-q", spec)[0] == 130
    monkeypatch.setattr(runner.core.interrupt, "_stall", None)
    assert in_process("apply", "-q", spec)[0] == 0
    got, want = (xr.open_zarr(tmp_path / f"store/{n}.zarr", consolidated=False) for n in ("pairs", "ref"))
    for name in ("sts_pearson", "handwriting_nmse", "handwriting_output"):
        np.testing.assert_array_equal(got[name].values, want[name].values)
    assert np.isfinite(got["handwriting_nmse"].values).all()
