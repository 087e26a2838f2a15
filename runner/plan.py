"""Spec + networks -> tasks with stable ids; pure (no I/O, no torch).

There is one ``iterate`` task per (network, measure computed along the trajectory) and one
``derive`` task per (network, measure computed from another measure's results, e.g. the
transient-chaos length from the exponent series). A task's id hashes every resolved value its
results depend on, plus the measure's code version, so changing one measure's parameter changes
only that measure's task ids. Pending iterate tasks of one network run together in one pass over
the trajectory (see :mod:`runner.tasks.iterate`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from runner.resolve import Network
from runner.spec import Spec

#: Bump a measure's version when its code changes what it writes; its tasks then rerun.
MEASURE_VERSIONS = {
    "token_deviation": 1, "lyapunov": 1, "effective_dimension": 1, "transient_chaos": 1,
    "trajectory": 1, "attention": 1, "pca": 1,
}
DERIVED = {"transient_chaos": "lyapunov"}


@dataclass(frozen=True)
class Task:
    id: str
    kind: str  # "iterate" | "derive"
    network: int
    measure: str
    params: dict[str, Any]
    deps: tuple[str, ...] = ()
    steps: int = 0

    @property
    def label(self) -> str:
        return f"{self.measure}@{self.network}"


@dataclass(frozen=True)
class Plan:
    spec: Spec
    networks: list[Network]
    tasks: list[Task] = field(default_factory=list)

    def for_network(self, index: int) -> list[Task]:
        return [t for t in self.tasks if t.network == index]


def trajectory_key(spec: Spec, net: Network) -> dict[str, Any]:
    """Everything the reference trajectory x_t of a network depends on."""
    kinds = {m.kind for m in spec.measure}
    model = net.model.model_dump(mode="json", exclude={"name", "replicates"})
    return {
        "model": model,
        "name": net.model.name,
        "replicate": net.replicate,
        "experiment_seed": spec.experiment.seed,
        "input": spec.input.model_dump(mode="json", exclude={"streaming"}) if not net.model.is_map
        else {"samples": spec.input.samples},
        "steps": spec.dynamics.steps,
        "precision": net.precision,
        "implementation": spec.dynamics.implementation if not net.model.is_map else None,
        "batch_size": spec.dynamics.batch_size,
        # x_t is always iterated beside its perturbed twin when the spec has a Lyapunov measure,
        # so the batch (and thus every GEMM's shape) is the same in every pass.
        "with_perturbation": "lyapunov" in kinds,
    }


def task_id(payload: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


def make_plan(spec: Spec, networks: list[Network]) -> Plan:
    tasks: list[Task] = []
    measures = spec.measures()
    for net in networks:
        key = trajectory_key(spec, net)
        ids: dict[str, str] = {}
        for kind, m in measures.items():
            if kind in DERIVED:
                continue
            params = m.params()
            ids[kind] = task_id({"trajectory": key, "measure": kind, "params": params, "v": MEASURE_VERSIONS[kind]})
            tasks.append(Task(ids[kind], "iterate", net.index, kind, params, steps=spec.dynamics.steps))
        for kind, source in DERIVED.items():
            if kind in measures:
                params = measures[kind].params()
                tid = task_id({"from": ids[source], "measure": kind, "params": params, "v": MEASURE_VERSIONS[kind]})
                tasks.append(Task(tid, "derive", net.index, kind, params, deps=(ids[source],)))
    return Plan(spec, networks, tasks)
