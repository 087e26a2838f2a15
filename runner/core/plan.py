"""Tasks and their ids; the plan is a dry run of the scheduler that ``apply`` uses.

A :class:`Task` is the unit of work the engine schedules, records and resumes. Its id hashes every
resolved value its results depend on (the study decides which: the model, inputs, parameters,
the measure's version), so changing one parameter changes only the ids of the tasks it affects,
and a finished task is never recomputed.

Dependencies are *resources*: a task ``needs`` resource names and runs once they all exist. A
finished task provides ``task:<id>``; a running task may provide more while it runs (a training
task provides ``checkpoint:<network>:<index>`` as each checkpoint is saved), which it declares in
``produces`` so that the dry run knows them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any


def task_id(payload: dict[str, Any]) -> str:
    """A stable 16-hex id of everything a task's results depend on."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Task:
    id: str
    kind: str
    """What runs it: a study's task kind (``iterate``, ``derive``, ``train``, or a measure kind)."""
    measure: str
    """The measure whose variables it writes (``train`` for training itself)."""
    network: int
    name: str
    """What the plan and the monitor call it (the measure's kind, ``<kind>:<variant>`` for a variant)."""
    deps: tuple[str, ...] = ()
    """Ids of the tasks whose results it needs (shown by ``plan``)."""
    needs: tuple[str, ...] | None = None
    """Resources it needs; by default ``task:<id>`` of each dependency."""
    produces: tuple[str, ...] = ()
    """Resources it provides while it runs, besides ``task:<its id>``."""
    group: str | None = None
    """Ready tasks of one group run together (one pass over a network's trajectory)."""
    steps: int = 0
    """Steps it advances (for progress and ETA); 0 for a task without steps."""
    checkpoint: int = -1
    params: dict[str, Any] = field(default_factory=dict, compare=False)
    skip: str | None = None
    """Why its measure does not apply to this network (``plan`` says so; running it only records
    that, its values stay NaN)."""
    key: dict[str, Any] | None = field(default=None, compare=False)
    """The resolved values its id hashes (``task_id(key)``), kept in its completion record so that
    ``plan`` can name what changed when a finished result would be replaced."""
    extends: tuple[str, ...] = field(default=(), compare=False)
    """Ids of the finished tasks it continues rather than recomputes (a longer run: set by ``apply``
    from the study's :meth:`~runner.plugin.study.Extends.extensions`); empty for a task run from the start."""

    @property
    def requires(self) -> tuple[str, ...]:
        return self.needs if self.needs is not None else tuple(f"task:{d}" for d in self.deps)

    @property
    def label(self) -> str:
        return self.name if self.checkpoint < 0 else f"{self.name}@{self.checkpoint}"


def plan_rows(tasks: list[Task], states: dict[str, str], labels: list[str]) -> list[dict]:
    """One row per task, in the study's order: what ``plan --json`` prints."""
    return [{"id": t.id or None, "network": labels[t.network], "kind": t.kind, "measure": t.name,
             "deps": list(t.deps) if t.id else None, "checkpoint": t.checkpoint if t.checkpoint >= 0 else None,
             "state": states.get(t.id, "unresolved") if t.id else "unresolved",
             **({"not_applicable": t.skip} if t.skip else {})} for t in tasks]
