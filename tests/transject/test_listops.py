"""The seeded ListOps generator of runner/studies/transject/data/listops.py (Long Range Arena's rules), checked
against an evaluator written here from the task's definition."""

from __future__ import annotations

import statistics

import pytest

from runner.studies.transject.data.listops import OPERATORS, evaluate, generate, to_lra_string, tree_tokens

OPS = {"[MIN": min, "[MAX": max, "[MED": lambda a: int(statistics.median(a)), "[SM": lambda a: sum(a) % 10}


def reference(source: str) -> tuple[int, int, int]:
    """(value, operator nesting depth, most arguments of one operator), by recursive descent over
    the tokens of LRA's string with its parentheses removed."""
    toks = [t for t in source.split() if t not in "()"]

    def node(i: int):
        tok = toks[i]
        if tok.isdigit():
            return int(tok), i + 1, 0, 0
        assert tok in OPS, tok
        args, depth, width, i = [], 0, 0, i + 1
        while toks[i] != "]":
            v, i, d, w = node(i)
            args.append(v)
            depth, width = max(depth, d), max(width, w)
        return OPS[tok](args), i + 1, depth + 1, max(width, len(args))

    value, end, depth, width = node(0)
    assert end == len(toks)
    return value, depth, width


def test_hand_written_expressions():
    assert evaluate("( ( ( [MAX 2 ) 9 ) ] )") == 9
    assert evaluate(["[MED", "1", "2", "3", "4", "]"]) == 2  # int(np.median) = int(2.5)
    assert evaluate("[MED 7 1 3 ]") == 3
    assert evaluate("[SM 9 9 5 ]") == 3
    assert evaluate("[MIN 4 [MAX 1 8 ] [SM 6 7 ] ]") == 3
    assert to_lra_string(("[MAX", (2, 9))) == "( ( ( [MAX 2 ) 9 ) ] )"
    assert tree_tokens(("[SM", (1, ("[MIN", (3, 4))))) == ["[SM", "1", "[MIN", "3", "4", "]", "]"]
    for bad in ("[MAX 1 2", "1 2", "[MAX ]", "]", "[FOO 1 ]", ""):
        with pytest.raises(ValueError):
            evaluate(bad)


def test_labels_equal_an_independent_evaluation():
    examples = generate(200, seed=3, max_depth=6, max_args=5, min_length=10, max_length=120)
    for ex in examples:
        value, depth, width = reference(ex.source)
        assert ex.label == value and 0 <= ex.label <= 9
        assert list(ex.tokens) == [t for t in ex.source.split() if t not in "()"]
        assert depth <= 6 - 1 and 2 <= width <= 5  # the root is at depth 1, nodes at depth 6 are digits
    assert len({ex.label for ex in examples}) == 10


def test_length_bounds_and_uniqueness():
    examples = generate(100, seed=0, max_depth=8, max_args=6, min_length=30, max_length=60)
    assert all(30 < len(ex.tokens) < 60 for ex in examples)
    assert len({ex.source for ex in examples}) == 100


def test_lra_defaults():
    examples = generate(4, seed=0)
    assert all(500 < len(ex.tokens) < 2000 for ex in examples)
    for ex in examples:
        value, depth, width = reference(ex.source)
        assert ex.label == value and depth <= 9 and width <= 10


def test_deterministic_under_a_seed():
    kw = dict(max_depth=5, max_args=4, min_length=5, max_length=50)
    assert generate(30, seed=11, **kw) == generate(30, seed=11, **kw)
    assert generate(30, seed=11, **kw) != generate(30, seed=12, **kw)


def test_every_operator_occurs():
    examples = generate(20, seed=1, max_depth=6, max_args=5, min_length=20, max_length=100)
    tokens = {t for ex in examples for t in ex.tokens}
    assert set(OPERATORS) <= tokens and {str(d) for d in range(10)} <= tokens
    roots = {ex.tokens[0] for ex in generate(100, seed=2, max_depth=4, max_args=4, min_length=4, max_length=40)}
    assert roots == set(OPERATORS)


def test_bad_arguments():
    with pytest.raises(ValueError):
        generate(1, max_args=1)
    with pytest.raises(ValueError):
        generate(1, min_length=10, max_length=11)
    with pytest.raises(RuntimeError, match="found 0 of 1"):
        generate(1, max_depth=2, max_args=3, min_length=20, max_length=40, max_tries=200)
