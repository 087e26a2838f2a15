"""What ``apply`` will do to the finished results of a store: add, keep, replace or drop them.

A finished task has a completion record (:mod:`runner.storage.records`) with its *slot* (the network
label, the measure and its label: where in the store its results sit) and its *key* (the resolved
values its id hashes). When a spec changes, a planned task whose slot holds a finished result of
another id would **replace** it; a finished result whose network left the spec would be
**dropped** with its network's entry of every array. Both need the user's consent (``apply
--replace`` or ``[experiment] replace = true``) and then leave the old store in its history
(:mod:`runner.storage.history`). A finished result whose slot the spec no longer plans (a measure taken
out) is **kept** as it is. :func:`changed` names the values that differ (``steps: 60 -> 80``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from runner.core.plan import Task

#: Leading names of a task key's nesting that say nothing to a reader (``from.trajectory.steps`` -> ``steps``).
_STRUCTURE = {"trajectory", "from", "train", "deps", "params", "payload"}


def slot(network_label: str, measure: str, label: str) -> tuple[str, str, str]:
    return (network_label, measure, label)


def task_slot(t: Task, labels: list[str]) -> tuple[str, str, str]:
    return slot(labels[t.network], t.measure, t.label)


def record_slot(rec: dict) -> tuple[str, str, str]:
    return slot(str(rec.get("network_label")), str(rec.get("measure")), str(rec.get("label")))


@dataclass
class Replacement:
    task: Task
    network: str
    """The task's network label."""
    old_ids: list[str]
    changes: list[str]
    """``name: old -> new`` for each resolved value that differs (empty when the old record has no key)."""
    how: str | None = None
    """For an extension: how its results are continued (the study's line); None for a replacement."""
    keep: bool = False
    """For an extension: the finished result stands as the new task's (its record is taken over)."""


@dataclass
class Changes:
    """Finished results and planned tasks, sorted by what ``apply`` will do with them."""

    done: list[str] = field(default_factory=list)
    """Planned tasks already finished: kept."""
    add: list[Task] = field(default_factory=list)
    """Planned tasks whose slot holds no finished result."""
    replace: list[Replacement] = field(default_factory=list)
    extend: list[Replacement] = field(default_factory=list)
    """Finished results continued rather than recomputed (a longer run): no consent needed."""
    drop: list[str] = field(default_factory=list)
    """Finished results apply would delete (their network left the spec, or their arrays change shape)."""
    kept: list[str] = field(default_factory=list)
    """Finished results the spec no longer plans that stay as they are."""
    records: dict[str, dict] = field(default_factory=dict)

    @property
    def needs_consent(self) -> bool:
        return bool(self.replace or self.drop)

    def planned_ids(self) -> list[str]:
        """Ids of every task the spec plans."""
        return (list(self.done) + [t.id for t in self.add] + [r.task.id for r in self.replace]
                + [r.task.id for r in self.extend])

    @property
    def replaced_ids(self) -> list[str]:
        return [i for r in self.replace for i in r.old_ids]

    @property
    def extended_ids(self) -> list[str]:
        return [i for r in self.extend for i in r.old_ids]

    def lost(self) -> list[str]:
        """Ids of the finished results whose records apply forgets (replaced and dropped with consent;
        extended ones, whose values the longer run keeps and continues)."""
        return self.replaced_ids + self.extended_ids + self.drop

    def sources(self) -> dict[str, tuple[str, ...]]:
        """Planned task id -> the finished ids it continues (:attr:`runner.core.plan.Task.extends`)."""
        return {r.task.id: tuple(r.old_ids) for r in self.extend if not r.keep}

    def taken_over(self, labels: list[str]) -> dict[str, dict]:
        """The records of the planned tasks whose finished result stands (``keep``), from the old ones."""
        out = {}
        for r in self.extend:
            if r.keep and len(r.old_ids) == 1:
                old = {k: v for k, v in self.records[r.old_ids[0]].items() if k not in ("digest", "store_id")}
                out[r.task.id] = {**old, "key": r.task.key, "network": r.task.network,
                                  "network_label": labels[r.task.network], "taken_over_from": r.old_ids[0]}
        return out


def compare(tasks: list[Task], labels: list[str], records: dict[str, dict],
            extensions: Callable[[dict[str, list[str]]], dict[str, Any]] | None = None) -> Changes:
    """Sort ``tasks`` and ``records`` (see :class:`Changes`) from the records alone (what ``plan`` knows).
    ``extensions``: given the replacements (task id -> old ids), what the study says of each longer
    run (task id -> :class:`runner.plugin.study.Extension`: how it extends, or why it cannot)."""
    out = Changes(records=records)
    planned = {t.id for t in tasks}
    by_slot: dict[tuple, list[str]] = {}
    for tid, rec in records.items():
        if tid not in planned:
            by_slot.setdefault(record_slot(rec), []).append(tid)
    keys = {t.id: t.key for t in tasks if t.key is not None}
    taken: set[str] = set()
    for t in tasks:
        if t.id in records:
            out.done.append(t.id)
            continue
        old = by_slot.get(task_slot(t, labels), [])
        if not old:
            out.add.append(t)
            continue
        taken.update(old)
        rec = records[old[0]]
        diff = changed(expand(rec.get("key"), {i: r.get("key") for i, r in records.items()}),
                       expand(t.key, keys)) if rec.get("key") is not None and t.key is not None else []
        out.replace.append(Replacement(t, labels[t.network], old, diff))
    if extensions is not None and out.replace:
        said = extensions({r.task.id: list(r.old_ids) for r in out.replace})
        for r in out.replace:
            e = said.get(r.task.id)
            if e is not None and e.extends:
                r.how, r.keep = e.how, e.keep
            elif e is not None:
                r.changes = [*r.changes, f"not extended: {e.how}"]
        out.extend = [r for r in out.replace if r.how]
        out.replace = [r for r in out.replace if not r.how]
    present = set(labels)
    runs = bool(out.add or out.replace or out.extend)  # with nothing to run, apply leaves the store as it is
    for tid, rec in records.items():
        if tid in planned or tid in taken:
            continue
        (out.drop if runs and rec.get("network_label") not in present else out.kept).append(tid)
    return out


def changes_of(p, records: dict[str, dict]) -> Changes:
    """:func:`compare` for a prepared spec (a :class:`runner.plugin.study.Prepared`), its study saying
    which replacements extend."""
    from runner.plugin.study import extensions_of  # lazy: numpy, pydantic

    return compare(p.tasks, p.labels, records, lambda replaced: extensions_of(p, replaced, records))


def expand(key: Any, keys: dict[str, Any], depth: int = 0) -> Any:
    """``key`` with every task id in it replaced by that task's own key (what a derived or a
    checkpoint measure depends on is then compared value by value, not as an opaque id)."""
    if depth > 8:
        return key
    if isinstance(key, dict):
        return {k: expand(v, keys, depth) for k, v in key.items()}
    if isinstance(key, list | tuple):
        out = [expand(v, keys, depth) for v in key]
        if key and all(isinstance(v, str) and keys.get(v) is not None for v in key):  # task ids: in an order
            out.sort(key=lambda v: json.dumps(v, sort_keys=True, default=str))  # of their keys, not of their hashes
        return out
    if isinstance(key, str) and keys.get(key) is not None:
        return expand(keys[key], keys, depth + 1)
    return key


def flatten(key: Any, prefix: tuple = ()) -> dict[tuple, Any]:
    if isinstance(key, dict):
        out: dict[tuple, Any] = {}
        for k, v in key.items():
            out.update(flatten(v, (*prefix, str(k))))
        return out or {prefix: {}}
    if isinstance(key, list) and key and all(isinstance(v, dict | list) for v in key):
        out = {}
        for i, v in enumerate(key):
            out.update(flatten(v, (*prefix, str(i))))
        return out
    return {prefix: key}


def _name(path: tuple) -> str:
    parts = list(path)
    while len(parts) > 1 and (parts[0] in _STRUCTURE or parts[0].isdigit()):
        parts.pop(0)
    name = ".".join(parts)
    return "version" if name == "v" else name.removesuffix(".v").replace(".v.", ".")


def changed(old: Any, new: Any) -> list[str]:
    """``name: old -> new`` for each value that differs between two keys (added or removed: ``-``)."""
    a, b = flatten(old), flatten(new)
    out: dict[str, None] = {}
    for path in [*a, *(p for p in b if p not in a)]:
        x, y = a.get(path, "-"), b.get(path, "-")
        if x != y:
            x, y = _apart(x, y)
            out[f"{_name(path)}: {_show(x)} -> {_show(y)}"] = None
    return list(out)


def _apart(x: Any, y: Any) -> tuple[Any, Any]:
    """Two long strings without the words they share at their start but the last (a file's path before
    ``sha256 <digest>``), so that what differs is what is shown."""
    if not (isinstance(x, str) and isinstance(y, str)) or max(len(x), len(y)) <= 40:
        return x, y
    same = len(os.path.commonprefix([x, y]))
    cut = x.rfind(" ", 0, max(x.rfind(" ", 0, same), 0)) + 1
    return (x, y) if cut < 8 else ("..." + x[cut:], "..." + y[cut:])


def _show(v: Any) -> str:
    text = "-" if v == "-" else repr(v) if isinstance(v, str) else str(v)
    return text if len(text) <= 40 else text[:37] + "..."


def summary(ids: Iterable[str], records: dict[str, dict]) -> str:
    """``pretrained: <measure>, <measure>; initial-1: <measure>`` (network: measures) for a list of finished results."""
    by_net: dict[str, list[str]] = {}
    for i in ids:
        rec = records.get(i, {})
        by_net.setdefault(str(rec.get("network_label", "?")), []).append(str(rec.get("label", rec.get("measure", "?"))))
    parts = []
    for net, names in by_net.items():
        shown = list(dict.fromkeys(names))
        parts.append(f"{net}: {', '.join(shown[:4])}" + (f" and {len(shown) - 4} more" if len(shown) > 4 else ""))
    return "; ".join(parts)
