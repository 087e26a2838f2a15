"""Training study -> checkpoint schedule and tasks with stable ids; pure (no I/O, no torch).

Tasks: one ``train`` task per network, and one measure task per (measure, network, checkpoint)
(``lca``: per pair of consecutive checkpoints). A measure task ``needs`` the checkpoints it reads,
as (network, checkpoint index) pairs, and runs as soon as they exist; one against the final
checkpoint waits for it. A task id hashes everything its results depend on: the corpus and
training settings, the network, its seed, the checkpoint schedule, the measure's parameters and
code version.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from runner.training.spec import SVCCA, CheckpointSpec, TrainingStudy

#: Bump when the code of a task kind changes what it writes; its tasks then rerun.
VERSIONS = {"train": 1, "svcca": 1, "sparsity": 1, "diagnostic": 1, "lca": 2}


def checkpoint_steps(schedule: CheckpointSpec, steps_per_epoch: int, epochs: int) -> list[int]:
    """Sorted optimizer steps at which checkpoints are kept (0 = the initial network)."""
    total = steps_per_epoch * epochs
    steps: set[int] = {0} if schedule.initial else set()
    if schedule.every_epoch:
        steps |= {steps_per_epoch * e for e in range(1, epochs + 1)}
    steps |= {s for s in schedule.steps if 0 <= s <= total}
    if schedule.log_spaced:
        ls = schedule.log_spaced
        stop = min(ls.stop or total, total)
        if stop >= ls.start:
            a, b = math.log(ls.start), math.log(stop)
            steps |= {round(math.exp(a + (b - a) * k / (ls.count - 1))) for k in range(ls.count)}
    steps.add(total)  # the final network is always kept: measures against it need it
    return sorted(steps)


@dataclass(frozen=True)
class Task:
    id: str
    kind: str  # "train" or a measure kind
    network: int
    checkpoint: int = -1
    params: dict[str, Any] = field(default_factory=dict)
    needs: tuple[tuple[int, int], ...] = ()
    """(network, checkpoint) pairs that must exist before the task runs."""
    deps: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        name = task_label(self.kind, self.params)
        return name if self.checkpoint < 0 else f"{name}@{self.checkpoint}"


def task_label(kind: str, params: dict[str, Any]) -> str:
    """``svcca:final``, ``svcca:layers`` ...: measures that come in modes are told apart."""
    return f"{kind}:{params['compare']}" if "compare" in params else kind


@dataclass(frozen=True)
class TrainingPlan:
    study: TrainingStudy
    steps_per_epoch: int
    steps: list[int]
    tasks: list[Task]

    def train_task(self, network: int) -> Task:
        return next(t for t in self.tasks if t.kind == "train" and t.network == network)


def task_id(payload: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


def make_plan(study: TrainingStudy, steps_per_epoch: int, corpus_key: str) -> TrainingPlan:
    """``corpus_key`` identifies the preprocessed corpus (a hash of its streams)."""
    steps = checkpoint_steps(study.checkpoints, steps_per_epoch, study.training.epochs)
    last = len(steps) - 1
    tasks: list[Task] = []
    train_ids: dict[int, str] = {}
    names = {n.name: i for i, n in enumerate(study.network)}
    for i, net in enumerate(study.network):
        payload = {"corpus": corpus_key, "training": study.training.model_dump(mode="json", exclude={"device"}),
                   "network": net.model_dump(mode="json", exclude={"name"}), "seed": study.network_seed(i),
                   "steps": steps, "v": VERSIONS["train"]}
        train_ids[i] = task_id(payload)
        tasks.append(Task(train_ids[i], "train", i, params={"seed": study.network_seed(i)}))
    for m in study.measure:
        params = m.params()
        for name in study.measured(m):
            n = names[name]
            refs = [names[r] for r in getattr(m, "reference", [])]
            for c in range(len(steps)):
                if m.kind == "lca" and c == 0:
                    continue
                if isinstance(m, SVCCA):
                    needs = {"final": [(n, c), (n, last)], "seed": [(n, c)] + [(r, c) for r in refs],
                             "layers": [(n, c)], "tagger": [(n, c)] + [(r, c) for r in refs]}[m.compare]
                elif m.kind == "lca":
                    needs = [(n, c - 1), (n, c)]
                else:
                    needs = [(n, c)]
                deps = tuple(sorted({train_ids[k] for k, _ in needs}))
                tid = task_id({"measure": m.kind, "params": params, "deps": deps, "checkpoint": c,
                               "steps": [steps[k] for _, k in needs], "network": n,
                               "analysis_tokens": study.corpus.analysis_tokens, "v": VERSIONS[m.kind]})
                tasks.append(Task(tid, m.kind, n, c, params, tuple(dict.fromkeys(needs)), deps))
    return TrainingPlan(study, steps_per_epoch, steps, tasks)
