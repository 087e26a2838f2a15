"""At which optimizer steps a training run keeps its checkpoints, its train task and the tasks that measure its
checkpoints; pure (no I/O, no torch)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from runner.core.plan import Task, task_id


def checkpoint_steps(steps_per_epoch: int, epochs: int, *, initial: bool = True, every_epoch: bool = True,
                     steps: Iterable[int] = (), log_spaced: tuple[int, int | None, int] | None = None) -> list[int]:
    """Sorted optimizer steps at which checkpoints are kept (0 = the initial network): ``initial``, each
    epoch end, the given ``steps`` within training, ``log_spaced = (start, stop, count)`` steps evenly spaced
    in log step (stop None: the last step), and always the final step (measures against it need it)."""
    total = steps_per_epoch * epochs
    out: set[int] = {0} if initial else set()
    if every_epoch:
        out |= {steps_per_epoch * e for e in range(1, epochs + 1)}
    out |= {s for s in steps if 0 <= s <= total}
    if log_spaced:
        start, stop, count = log_spaced
        stop = min(stop or total, total)
        if stop >= start:
            a, b = math.log(start), math.log(stop)
            out |= {round(math.exp(a + (b - a) * k / (count - 1))) for k in range(count)}
    out.add(total)
    return sorted(out)


def by_step(steps: list[int]) -> dict[int, list[int]]:
    """Checkpoint indices per step (``steps[k]``: the step of checkpoint k; several may share a step)."""
    out: dict[int, list[int]] = {}
    for k, s in enumerate(steps):
        out.setdefault(s, []).append(k)
    return out


def checkpoint_resource(network: int, checkpoint: int) -> str:
    """What a training task provides as each checkpoint is saved, and what measures of it need."""
    return f"checkpoint:{network}:{checkpoint}"


def train_task(network: int, payload: dict[str, Any], seed: int, n_checkpoints: int, steps: int) -> Task:
    """The task that trains ``network`` (its id hashes ``payload``): ``steps`` for progress, and each
    checkpoint's resource provided as it is saved."""
    return Task(task_id(payload), "train", "train", network, "train", steps=steps,
                produces=tuple(checkpoint_resource(network, c) for c in range(n_checkpoints)),
                params={"seed": seed}, key=payload)


def measure_task(measure: str, network: int, checkpoint: int, payload: dict[str, Any], params: dict[str, Any], *,
                 reads: Iterable[tuple[int, int]] = (), deps: Sequence[str] = (), group: str | None = None,
                 name: str | None = None) -> Task:
    """The task of ``measure`` at checkpoint ``checkpoint`` of ``network`` (its id hashes ``payload``): it
    runs once the checkpoints it ``reads`` ((network, index) pairs) are saved, after the tasks ``deps``
    (shown by ``plan``), with the ready tasks of its ``group``; ``name``: what the plan calls it (the
    measure's kind unless it comes in modes)."""
    return Task(task_id(payload), measure, measure, network, name or measure, deps=tuple(deps), checkpoint=checkpoint,
                needs=tuple(checkpoint_resource(*k) for k in dict.fromkeys(reads)), group=group, params=params,
                key=payload)
