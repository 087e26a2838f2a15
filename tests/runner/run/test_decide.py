"""What an apply does, decided without a store (issue 52, item 1): one table of cases for
:func:`runner.run.decide.decide`, each a store state, a spec's changes and the user's consent."""

from __future__ import annotations

import pytest

from runner.core.plan import Task
from runner.run.changes import Changes, Replacement
from runner.run.decide import Decision, decide


def task(tid: str) -> Task:
    return Task(id=tid, kind="iterate", measure="m", network=0, name="m")


def changes(*, done=(), add=(), replace=(), extend=(), keep=(), drop=()) -> Changes:
    """``replace``/``extend``: new id -> old id; ``keep``: extensions whose finished result stands."""
    return Changes(done=list(done), add=[task(t) for t in add],
                   replace=[Replacement(task(new), "net", [old], ["steps: 1 -> 2"]) for new, old in replace],
                   extend=[Replacement(task(new), "net", [old], ["steps: 1 -> 2"], how="continued", keep=new in keep)
                           for new, old in extend],
                   drop=list(drop))


CASES = {
    # name: (planned, done, changes, records_lost, whole, consent, remade) -> expected
    "all finished": (["a", "b"], ["a", "b"], changes(done=["a", "b"]), False, True, False, (),
                     Decision(nothing_to_do=True)),
    "all finished, a chunk damaged": (["a"], ["a"], changes(done=["a"]), False, False, False, (),
                                      Decision()),
    "all finished, records gone": (["a"], ["a"], changes(done=["a"]), True, True, False, (),
                                   Decision(refused=True)),
    "records gone, consent": (["a"], [], changes(add=["a"]), True, True, True, (),
                              Decision(keep_version=True, reason="records missing")),
    "new tasks": (["a", "b"], ["a"], changes(done=["a"], add=["b"]), False, True, False, (), Decision()),
    "a replace without consent": (["b"], ["a"], changes(replace=[("b", "a")]), False, True, False, (),
                                  Decision(refused=True)),
    "a replace with consent": (["b"], ["a"], changes(replace=[("b", "a")]), False, True, True, (),
                               Decision(keep_version=True, reason="replace", forget=("a",))),
    "a drop without consent": (["b", "c"], ["a", "b"], changes(done=["b"], add=["c"], drop=["a"]), False, True,
                               False, (), Decision(refused=True)),
    "nothing to run: a drop waits": (["b"], ["a", "b"], changes(done=["b"], drop=["a"]), False, True, False, (),
                                     Decision(nothing_to_do=True)),
    "an extension needs no consent": (["b"], ["a"], changes(extend=[("b", "a")]), False, True, False, (),
                                      Decision(keep_version=True, reason="extend", forget=("a",),
                                               extend={"b": ("a",)})),
    "a result taken over is not continued": (["b"], ["a"], changes(extend=[("b", "a")], keep=["b"]), False, True,
                                             False, (), Decision(keep_version=True, reason="extend", forget=("a",))),
    "an extension beside a replace": (["b", "d"], ["a", "c"], changes(extend=[("b", "a")], replace=[("d", "c")]),
                                      False, True, True, (),
                                      Decision(keep_version=True, reason="replace", forget=("c", "a"),
                                               extend={"b": ("a",)})),
    "arrays remade without consent": (["b"], ["b", "x"], changes(done=["b"]), False, True, False, ("x", "b"),
                                      Decision(refused=True, forget=("x",))),
    "arrays remade with consent": (["b"], ["b", "x"], changes(done=["b"]), False, True, True, ("x",),
                                   Decision(keep_version=True, reason="replace", forget=("x",))),
}


@pytest.mark.parametrize("name", CASES)
def test_what_an_apply_does(name):
    planned, done, chg, lost, whole, consent, remade, expected = CASES[name]
    assert decide(planned, done, chg, records_lost=lost, whole=whole, consent=consent, remade=remade) == expected
