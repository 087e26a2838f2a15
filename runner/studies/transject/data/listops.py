"""ListOps (Nangia & Bowman 2018) as the Long Range Arena generates it, seeded.

The TransJect paper (Sec. 3.6.2, Table 3) classifies ListOps sequences of up to 1024 tokens; its
data are LRA's (Tay et al. 2021, ``lra_benchmarks/data/listops.py``), whose generator this module
follows rule for rule:

* A node at depth < ``max_depth`` (the root is at depth 1) is an operator with probability
  ``VALUE_P = 0.25``, else a digit 0-9; a node at ``max_depth`` is always a digit. An operator
  takes ``randint(2, max_args)`` arguments, drawn before the operator itself is chosen.
* Operators: ``[MIN``, ``[MAX``, ``[MED`` (median of the arguments, truncated to an integer as
  ``int(np.median(...))``: the lower mean of the two middle values for an even count) and ``[SM``
  (sum modulo 10); ``]`` closes an operator. The label is the value of the root, 0..9.
* Length = operators x 2 + digits: the operator and ``]`` tokens and the digits, no parentheses;
  a tree is kept when ``min_length < length < max_length`` (strict, as in LRA), and each tree at
  most once (LRA collects a set). LRA's defaults: depth 10, 10 arguments, lengths 500..2000.
* ``source`` is LRA's TSV string, with its left-nested parentheses: ``[MAX 2 9 ]`` is written
  ``( ( ( [MAX 2 ) 9 ) ] )``. ``tokens`` drops the parentheses and keeps ``]``. (LRA's own input
  pipeline tokenises with ``tfds``' alphanumeric tokenizer, which also drops ``[`` and ``]``.)

The random draws are those of LRA's ``generate_tree`` in the same order, from a
``random.Random(seed)`` instead of the global ``random`` module, so ``random.seed(seed)`` before
LRA's generator yields the same candidate trees.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Union

__all__ = ["END", "MAX", "MED", "MIN", "OPERATORS", "SUM_MOD", "ListOpsExample", "apply_operator", "evaluate",
           "generate", "generate_tree", "to_lra_string", "tree_tokens"]

MIN, MAX, MED, SUM_MOD, END = "[MIN", "[MAX", "[MED", "[SM", "]"
OPERATORS: tuple[str, ...] = (MIN, MAX, MED, SUM_MOD)  # LRA's order (its draws depend on it)
VALUES = range(10)
VALUE_P = 0.25

#: A digit, or (operator, arguments).
Tree = Union[int, tuple[str, tuple["Tree", ...]]]


@dataclass(frozen=True)
class ListOpsExample:
    source: str  # LRA's string, parentheses included
    tokens: tuple[str, ...]  # operators, digits and "]"; len(tokens) is LRA's length
    label: int  # the value of the expression, 0..9


def generate_tree(rng: random.Random, depth: int = 1, max_depth: int = 10, max_args: int = 10) -> tuple[Tree, int]:
    """One random tree and its length (LRA's ``generate_tree``, same draws in the same order)."""
    r = rng.random() if depth < max_depth else 1
    if r > VALUE_P:
        return rng.choice(VALUES), 1
    n_args = rng.randint(2, max_args)
    args, length = [], 2
    for _ in range(n_args):
        arg, arg_length = generate_tree(rng, depth + 1, max_depth, max_args)
        args.append(arg)
        length += arg_length
    return (rng.choice(OPERATORS), tuple(args)), length


def tree_tokens(tree: Tree) -> list[str]:
    """``[OP arg ... ]`` tokens, digits as strings, no parentheses."""
    if isinstance(tree, int):
        return [str(tree)]
    op, args = tree
    out = [op]
    for arg in args:
        out += tree_tokens(arg)
    out.append(END)
    return out


def to_lra_string(tree: Tree) -> str:
    """LRA's ``to_string`` of its left-nested tuples: ``[MAX 2 9 ]`` -> ``( ( ( [MAX 2 ) 9 ) ] )``."""
    if isinstance(tree, int):
        return str(tree)
    op, args = tree
    s = f"( {op} {to_lra_string(args[0])} )"
    for arg in args[1:]:
        s = f"( {s} {to_lra_string(arg)} )"
    return f"( {s} {END} )"


def apply_operator(op: str, args: list[int]) -> int:
    if not args:
        raise ValueError(f"{op} without arguments")
    if op == MIN:
        return min(args)
    if op == MAX:
        return max(args)
    if op == MED:  # int(np.median(args)) for non-negative integers
        s, n = sorted(args), len(args)
        return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) // 2
    if op == SUM_MOD:
        return sum(args) % 10
    raise ValueError(f"unknown operator {op!r}")


def evaluate(expression: str | Iterable[str]) -> int:
    """Value of an expression given as LRA's string or as tokens (parentheses are ignored)."""
    tokens = expression.split() if isinstance(expression, str) else list(expression)
    stack: list[tuple[str | None, list[int]]] = [(None, [])]
    for tok in tokens:
        if tok in ("(", ")"):
            continue
        if tok in OPERATORS:
            stack.append((tok, []))
        elif tok == END:
            if len(stack) < 2:
                raise ValueError("']' without an operator")
            op, args = stack.pop()
            stack[-1][1].append(apply_operator(op, args))
        elif tok.isdigit():
            stack[-1][1].append(int(tok))
        else:
            raise ValueError(f"unknown token {tok!r}")
    if len(stack) != 1 or len(stack[0][1]) != 1:
        raise ValueError("not a single complete expression")
    return stack[0][1][0]


def generate(n: int, seed: int = 0, *, max_depth: int = 10, max_args: int = 10, min_length: int = 500,
             max_length: int = 2000, unique: bool = True, max_tries: int | None = None) -> list[ListOpsExample]:
    """``n`` examples whose length is in ``(min_length, max_length)``, by LRA's rejection sampling.

    Deterministic under ``seed``. Gives up with ``RuntimeError`` after ``max_tries`` candidate
    trees (default ``1000 * n + 10_000``), e.g. for bounds the tree sizes seldom reach."""
    if n < 0 or max_depth < 1 or max_args < 2 or min_length < 0 or max_length <= min_length + 1:
        raise ValueError("need n >= 0, max_depth >= 1, max_args >= 2 and 0 <= min_length < max_length - 1")
    rng = random.Random(seed)
    tries = 1000 * n + 10_000 if max_tries is None else max_tries
    seen: set = set()
    out: list[ListOpsExample] = []
    while len(out) < n:
        if tries == 0:
            raise RuntimeError(f"found {len(out)} of {n} trees with {min_length} < length < {max_length}")
        tries -= 1
        tree, length = generate_tree(rng, 1, max_depth, max_args)
        if not min_length < length < max_length or (unique and tree in seen):
            continue
        seen.add(tree)
        tokens = tuple(tree_tokens(tree))
        out.append(ListOpsExample(to_lra_string(tree), tokens, evaluate(tokens)))
    return out
