"""Scaffold specs: the Sec. 4.1 recipe as spec values, [corpus.scaffold] defaults, cross-table checks."""

from __future__ import annotations

import pytest

from runner.run.prepare import validate_spec
from runner.spec.specfile import SpecError
from runner.studies.training.spec import ScaffoldSpec
from training_helpers import ROOT

TINY = ROOT / "specs" / "tiny" / "scaffold_tiny.toml"


@pytest.mark.parametrize("name", ["scaffold.toml", "tiny/scaffold_tiny.toml", "di_syntax.toml"])
def test_shipped_specs_load(name):
    study = validate_spec(ROOT / "specs" / name)
    assert study.model and study.measure


def test_scaffold_spec_is_the_paper():
    s = validate_spec(ROOT / "specs" / "scaffold.toml")
    t = s.training  # Sec. 4.1: one 200-unit layer, lr 1 throughout, clip 0.25, no momentum
    assert (t.num_layers, t.hidden_dim, t.lr, t.lr_decay, t.clip, t.momentum) == (1, 200, 1.0, 1.0, 0.25, 0.0)
    sc = s.corpus.scaffold
    assert (sc.vocab_size, sc.tokens, sc.rules, sc.phrases, sc.familiar_repeats) == (1000, 1_000_000, 1000, 100, 1000)
    assert sc == ScaffoldSpec(lengths=sc.lengths, test_cases=sc.test_cases)  # every other value the default
    variants = {(m.corpus_variant, m.seed) for m in s.model}
    assert len(variants) == len(s.model) == len(sc.lengths) * 2 * 3  # each (k, setting) with 3 seeds


def _errors(tmp_path, replace):
    text = TINY.read_text()
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(SpecError) as err:
        validate_spec(path)
    return err.value.problems


def test_models_must_name_a_variant(tmp_path):
    (msg,) = _errors(tmp_path, {'corpus_variant = "familiar_k3"\nseed = 1': 'corpus_variant = "familiar_k5"\nseed = 1'})
    assert "corpus_variant" in msg and "familiar_k3" in msg and "familiar_k5" in msg


def test_scaffold_measures_need_the_scaffold_corpus(tmp_path):
    problems = _errors(tmp_path, {'source = "scaffold:"': f'source = "{ROOT}/tests/data/tiny_tagged.conllu"'})
    assert any("[corpus.scaffold] needs source" in p for p in problems)


def test_default_scaffold_table(tmp_path):
    text = TINY.read_text()
    start, end = text.index("[corpus.scaffold]"), text.index("[training]")
    path = tmp_path / "s.toml"
    path.write_text(text[:start] + text[end:])
    with pytest.raises(SpecError) as err:  # the default lengths are 2, 4, 6, 8: no k3 variant
        validate_spec(path)
    assert all("corpus_variant" in p and "unfamiliar_k2" in p for p in err.value.problems)


def test_rule_measure_without_scaffold_corpus(tmp_path):
    text = TINY.read_text()
    start, end = text.index("[corpus.scaffold]"), text.index("[training]")
    text = (text[:start] + text[end:]).replace('source = "scaffold:"', f'source = "{ROOT}/tests/data/tiny_tagged.conllu"')
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(SpecError) as err:
        validate_spec(path)
    problems = err.value.problems
    assert any("rule_probability measures the scaffold test sets" in p for p in problems)
    assert any("corpus_variant needs [corpus] source" in p for p in problems)
