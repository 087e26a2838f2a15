"""The one registry base: a name taken is refused unless replaced, an unknown name gets the closest
known one, and listing by name or newest first."""

from __future__ import annotations

import pytest

from models.registry_base import Registry


class First:
    pass


class Second:
    pass


def test_a_name_taken_is_refused_unless_the_newcomer_replaces_it():
    reg = Registry("widget")
    reg.add("a", First)
    reg.add("a", First)  # the same thing again: a module imported twice
    with pytest.raises(ValueError) as refused:
        reg.add("a", Second)
    assert str(refused.value) == (f"widget 'a' is {__name__}.First's; give {__name__}.Second another name, or set "
                                  "`replaces = True` to replace it")
    reg.add("a", Second, replaces=True)
    assert reg.get("a") is Second and len(reg) == 1


def test_an_unknown_name_lists_the_known_ones_and_the_closest():
    reg = Registry("executor", {"local": "x:Local", "ray": "y:Ray"})
    assert reg.unknown("rya") == "unknown executor 'rya'; known: local, ray (did you mean 'ray'?)"
    assert reg.unknown("slurm") == "unknown executor 'slurm'; known: local, ray"
    with pytest.raises(KeyError, match="unknown executor 'slurm'"):
        reg.get("slurm")


def test_listing_by_name_and_newest_first_and_a_snapshot_restores():
    reg = Registry("family")
    for name in ("b", "a", "c"):
        reg.add(name, name)
    saved = reg.snapshot()
    reg.add("b", "b2", replaces=True)  # a replacement is the newest
    assert reg.names() == ["a", "b", "c"] and reg.newest_first() == ["b2", "c", "a"]
    reg.restore(saved)
    assert reg.newest_first() == ["c", "a", "b"]
