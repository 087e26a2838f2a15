"""The offline tiny ALBERT: builds, loads back through the hub code path, is reusable."""

from __future__ import annotations

import json
import sys
import time

import pytest
import torch

from models import MapInputs, build_tiny_albert, load_albert, load_tokenizer
from models.tiny import MARKER, _wordpiece_vocab


def test_loads_back_and_tokenizes_english(tiny_albert_dir):
    tok = load_tokenizer(str(tiny_albert_dir))
    amap = load_albert(str(tiny_albert_dir))
    cfg = amap.config
    assert (cfg.hidden_size, cfg.embedding_size, cfg.num_attention_heads, cfg.intermediate_size) == (64, 32, 4, 256)
    assert cfg.hidden_act == "gelu_new" and cfg.vocab_size == len(tok) == 2000
    enc = tok(["The quick brown fox jumps over the lazy dog.", "Functions return values."], padding=True,
              return_tensors="pt")
    ids = enc["input_ids"]
    assert ids.max() < cfg.vocab_size and ids.min() >= 0
    assert tok.convert_ids_to_tokens(int(ids[0, 0])) == "[CLS]"
    assert tok.unk_token_id not in ids[0].tolist()  # every character was seen in training
    assert tok.pad_token_id == cfg.pad_token_id and (ids[1] == tok.pad_token_id).any()
    assert tok.mask_token == "[MASK]" and tok.sep_token == "[SEP]"
    with torch.no_grad():
        x = amap.initial_state(MapInputs(samples=2, input_ids=ids, attention_mask=enc["attention_mask"]))
        for _ in range(4):
            x = amap.step(x, enc["attention_mask"])
    assert x.shape == (2, ids.shape[1], 64) and torch.isfinite(x).all()
    meta = json.loads((tiny_albert_dir / MARKER).read_text())
    assert meta["mlm_steps"] == 20 and meta["last_loss"] < meta["first_loss"]


def test_second_call_returns_at_once_and_leaves_no_temp_dirs(tiny_albert_dir):
    before = (tiny_albert_dir / "model.safetensors").stat().st_mtime_ns
    t = time.perf_counter()
    assert build_tiny_albert(tiny_albert_dir, mlm_steps=20) == tiny_albert_dir
    assert time.perf_counter() - t < 0.5
    assert (tiny_albert_dir / "model.safetensors").stat().st_mtime_ns == before
    assert [p.name for p in tiny_albert_dir.parent.iterdir()] == [tiny_albert_dir.name]


def test_refuses_a_foreign_non_empty_directory(tmp_path):
    (tmp_path / "other.txt").write_text("not a model")
    with pytest.raises(FileExistsError):
        build_tiny_albert(tmp_path, mlm_steps=1)


def test_wordpiece_vocab_is_deterministic_and_merges_frequent_pairs():
    counts = {"low": 5, "lower": 2, "newest": 6, "widest": 3}
    specials = ["[PAD]", "[UNK]"]
    v = _wordpiece_vocab(counts, 40, specials)
    assert v == _wordpiece_vocab(dict(reversed(list(counts.items()))), 40, specials)
    assert v[:2] == specials
    assert {"l", "n", "w", "##o", "##e", "##s", "##t"} <= set(v)
    assert "##est" in v and "newest" in v and "low" in v
    assert len(v) == len(set(v)) <= 40


def test_a_build_reports_its_progress_and_apply_prints_it(tmp_path, caplog, capsys):
    import logging

    from runner.run.apply import _BuildProgress
    from runner.storage.events import EventLog, read_events
    from runner.core.progress import ProgressView

    events = EventLog(tmp_path / "events.jsonl")
    shown = _BuildProgress(events, ProgressView(quiet=False))
    try:
        with caplog.at_level(logging.INFO, logger="models"):
            build_tiny_albert(tmp_path / "tiny", mlm_steps=4)
    finally:
        shown.close()
        events.close()
    said = capsys.readouterr().err.splitlines()
    assert said[0].startswith("building tiny-ALBERT (first use") and said[-1].startswith(
        "building tiny-ALBERT: MLM step 4/4")
    stages = [e["stage"] for e in read_events(tmp_path / "events.jsonl") if e["event"] == "run_preparing"]
    assert stages == said  # the monitor shows the same stages
    assert logging.getLogger("models").handlers == []  # the handler is gone after the run


@pytest.mark.skipif(sys.platform != "linux", reason="XDG_CACHE_HOME is the Linux convention")
def test_the_cache_follows_xdg_cache_home(monkeypatch, tmp_path):
    from models.registry import cache_dir

    monkeypatch.delenv("TRANSIENT_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "transient"
    monkeypatch.setenv("TRANSIENT_CACHE", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
