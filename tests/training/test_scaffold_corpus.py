"""The synthetic scaffold corpora (Ch. 5 Sec. 4.2-4.3): counts, determinism, familiarity, test domains."""

from __future__ import annotations

import numpy as np
import pytest

from runner.studies.training.data.scaffold import (ALPHA, OMEGA, ScaffoldConfig, generate, occurrences, vocabulary)

SMALL = ScaffoldConfig(vocab_size=20, tokens=20_000, rules=200, phrases=10, familiar_repeats=50,
                       valid_tokens=4000, test_cases=60, context=3)


@pytest.fixture(scope="module")
def k3():
    return generate(SMALL, 3, seed=0)


def test_paper_defaults():
    cfg = ScaffoldConfig()
    assert (cfg.vocab_size, cfg.tokens, cfg.rules, cfg.phrases, cfg.familiar_repeats) == (1000, 1_000_000, 1000, 100,
                                                                                         1000)
    assert vocabulary(3) == ["<alpha>", "<omega>", "w0", "w1", "w2"]


@pytest.mark.parametrize("setting", ["unfamiliar", "familiar"])
def test_counts(k3, setting):
    s = k3.train[setting]
    assert s.tokens.shape == (SMALL.tokens,) and s.tokens.dtype == np.int64
    assert (s.tokens == ALPHA).sum() == (s.tokens == OMEGA).sum() == SMALL.rules
    assert s.tokens.min() >= 0 and s.tokens.max() < SMALL.vocab_size + 2
    # every rule is alpha q omega with its recorded phrase; each phrase is in rules/phrases rules
    for start, ph in zip(s.rule_starts, s.rule_phrases):
        assert s.tokens[start] == ALPHA and s.tokens[start + 4] == OMEGA
        np.testing.assert_array_equal(s.tokens[start + 1:start + 4], k3.phrases[ph])
    assert np.bincount(s.rule_phrases, minlength=SMALL.phrases).tolist() == [SMALL.rules // SMALL.phrases] * 10
    assert k3.phrases.shape == (10, 3) and len({tuple(q) for q in k3.phrases.tolist()}) == 10
    assert ((k3.phrases >= 2) & (k3.phrases < SMALL.vocab_size + 2)).all()  # alpha, omega are not in Sigma


def test_familiarity(k3):
    inside = SMALL.rules // SMALL.phrases
    # unfamiliar: every scaffold occurs exactly where the rules put it, nowhere else (Sec. 4.3)
    occ = occurrences(k3.train["unfamiliar"].tokens, k3.phrases)
    assert np.bincount(occ[:, 1], minlength=10).tolist() == [inside] * 10
    assert set(occ[:, 0].tolist()) == set((k3.train["unfamiliar"].rule_starts + 1).tolist())
    # familiar: familiar_repeats more times, all outside the rules
    fam = k3.train["familiar"]
    occ = occurrences(fam.tokens, k3.phrases)
    assert np.bincount(occ[:, 1], minlength=10).tolist() == [inside + SMALL.familiar_repeats] * 10
    outside = sorted(set(occ[:, 0].tolist()) - set((fam.rule_starts + 1).tolist()))
    assert outside == sorted(fam.free_starts.tolist())
    assert all(fam.tokens[s - 1] != ALPHA for s in outside)
    assert len(k3.train["unfamiliar"].free_starts) == 0


def test_validation_streams_scale(k3):
    for setting in ("unfamiliar", "familiar"):
        v = k3.valid[setting].tokens
        assert v.size == SMALL.valid_tokens
        assert (v == ALPHA).sum() == max(SMALL.phrases, round(SMALL.rules * 0.2))


def test_in_and_out_domain(k3):
    phrases = {tuple(q) for q in k3.phrases.tolist()}
    for domain, inside in (("in_domain", True), ("out_domain", False)):
        t = k3.tests[domain]
        assert t.inputs.shape == (SMALL.test_cases, 3 + 3 + 2) and t.alpha == 3 and t.omega == 7
        assert (t.inputs[:, t.alpha] == ALPHA).all() and (t.inputs[:, t.omega] == OMEGA).all()
        assert ((t.inputs[:, :t.alpha] >= 2)).all()
        scaffolds = {tuple(q) for q in t.inputs[:, t.scaffold].tolist()}
        assert (scaffolds <= phrases) if inside else not (scaffolds & phrases)
    assert len({tuple(q) for q in k3.tests["in_domain"].inputs[:, 4:7].tolist()}) == 10  # every phrase tested


def test_deterministic_and_seeded():
    a, b = generate(SMALL, 2, seed=1), generate(SMALL, 2, seed=1)
    c = generate(SMALL, 2, seed=2)
    for s in ("unfamiliar", "familiar"):
        np.testing.assert_array_equal(a.train[s].tokens, b.train[s].tokens)
    np.testing.assert_array_equal(a.tests["out_domain"].inputs, b.tests["out_domain"].inputs)
    assert not np.array_equal(a.train["familiar"].tokens, c.train["familiar"].tokens)
    # the two settings share the phrases and the tests; one setting alone gives the same corpus
    only = generate(SMALL, 2, seed=1, settings=("familiar",))
    np.testing.assert_array_equal(only.train["familiar"].tokens, a.train["familiar"].tokens)
    np.testing.assert_array_equal(only.tests["in_domain"].inputs, a.tests["in_domain"].inputs)


def test_too_many_segments_is_refused():
    with pytest.raises(ValueError, match="cannot hold"):
        generate(ScaffoldConfig(vocab_size=20, tokens=1000, rules=200, phrases=10, familiar_repeats=0,
                                valid_tokens=100), 4, seed=0)
