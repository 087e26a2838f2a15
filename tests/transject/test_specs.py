"""Every shipped TransJect spec plans offline; the hub ones name their dataset and apply refuses (66)."""

from __future__ import annotations

import json

import pytest

from runner.run.prepare import prepare
from runner.run.apply import states
from runner.cli import main

from .conftest import ROOT, TINY

PAPER = {"transject_imdb": "stanfordnlp/imdb", "transject_agnews": "fancyzhx/ag_news",
         "transject_listops": None, "transject_charimdb": "stanfordnlp/imdb"}
VARIANTS = {"transject", "entropic-transject", "random-transject", "random-entropic-transject", "transformer",
            "transformer-rezero"}


@pytest.mark.parametrize("name", sorted(PAPER))
def test_paper_specs_plan_offline(name, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    p = prepare(ROOT / "specs" / f"{name}.toml")
    s = p.spec
    assert p.study.name == "transject"
    assert {m.variant for m in s.model} == VARIANTS and all(len(s.seeds(m)) == 3 for m in s.model)
    tr = s.training  # App. B
    assert (tr.lr, tr.betas, tr.eps, tr.batch_size, tr.epochs, tr.patience) == (5e-4, [0.9, 0.98], 1e-9, 32, 30, 4)
    assert all((m.n_layers, m.d_model, m.n_experts) == (6, 512, 4) for m in s.model)
    assert {m.kind for m in s.measure} == {"distances", "activation_bound", "entropy", "experts", "isomap"}
    n_nets = 18
    assert len([t for t in p.tasks if t.kind == "train"]) == n_nets
    assert len(p.tasks) == n_nets * (1 + 5 * 31) and all(t.id for t in p.tasks)
    if PAPER[name]:  # the hub is off: the dataset (and the BERT tokenizer of Table 2) cannot be had
        assert any(PAPER[name] in u and "[data] source" in u for u in p.unmet)
        assert any("bert-base-uncased" in u for u in p.unmet) == (s.data.tokenizer is not None)
        assert (s.data.tokenizer is not None) == (name in ("transject_imdb", "transject_agnews"))
    else:
        assert p.unmet == [] or all("device" in u for u in p.unmet)
        assert {s2 for s2 in states(p).values()} == {"pending"}


def test_plan_and_refused_apply_through_the_cli(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = ROOT / "specs" / "transject_imdb.toml"
    assert main(["plan", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "requirements not met" in out and "stanfordnlp/imdb" in out
    assert main(["apply", "-q", str(spec)]) == 66
    assert "stanfordnlp/imdb" in capsys.readouterr().err and not (tmp_path / "store").exists()


def test_tiny_spec_plans_every_task(tmp_path, capsys):
    assert main(["plan", "--json", str(TINY)]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["study"] == "transject" and plan["unmet"] == [] and plan["epochs"] == 3
    kinds = [t["kind"] for t in plan["tasks"]]
    assert kinds.count("train") == 8 and len(kinds) == 8 * (1 + 6 * 4)  # six measures (SVCCA among them), epochs 0..3
    assert set(plan["networks"]) >= {"transject-s0", "transformer-rezero-s1"}


def test_bad_specs_name_the_line(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text(TINY.read_text().replace("seeds = [0, 1]\nd_model = 16\nn_layers = 2\nn_heads = 2",
                                            "seeds = [0, 1]\nd_model = 15\nn_layers = 2\nn_heads = 2", 1)
                   .replace('source = "listops:"', 'source = "nope.parquet"'))
    assert main(["plan", str(bad)]) == 65
    err = capsys.readouterr().err
    assert "d_model must be even" in err and "bad.toml" in err


def test_seeds_must_be_distinct(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text(TINY.read_text().replace("seeds = [0, 1]", "seeds = [1, 1]", 1))
    assert main(["plan", str(bad)]) == 65
    assert "seeds must be distinct" in capsys.readouterr().err
