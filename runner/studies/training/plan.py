"""Training study -> checkpoint schedule and tasks with stable ids; pure (no I/O, no torch).

Tasks: one ``train`` task per network, and one measure task per (measure, network, checkpoint)
(``lca``: per pair of consecutive checkpoints). A measure task ``needs`` the checkpoints it reads,
as (network, checkpoint index) pairs, and runs as soon as they exist; one against the final
checkpoint waits for it. A task id hashes everything its results depend on: the corpus and
training settings, the network, its seed, the checkpoint schedule, the measure's parameters and
code version.
"""

from __future__ import annotations

from typing import Any

from runner.checkpointed.schedule import measure_task, train_task
from runner.checkpointed.schedule import checkpoint_steps as schedule_steps
from runner.plugin.measures import measures
from runner.core.plan import Task
from runner.studies.training.spec import CheckpointSpec, TrainingStudySpec

#: Bump when the training code changes what it writes; its tasks then rerun (measures: their ``version``).
TRAIN_VERSION = 1


def checkpoint_steps(schedule: CheckpointSpec, steps_per_epoch: int, epochs: int) -> list[int]:
    """Sorted optimizer steps at which checkpoints are kept (0 = the initial network), from ``[checkpoints]``."""
    ls = schedule.log_spaced
    return schedule_steps(steps_per_epoch, epochs, initial=schedule.initial, every_epoch=schedule.every_epoch,
                          steps=schedule.steps, log_spaced=(ls.start, ls.stop, ls.count) if ls else None)


def task_label(kind: str, params: dict[str, Any]) -> str:
    """``svcca:final``, ``svcca:layers`` ...: measures that come in modes are told apart."""
    return f"{kind}:{params['compare']}" if "compare" in params else kind


def make_tasks(study: TrainingStudySpec, steps_per_epoch: int, corpus_key: str) -> tuple[list[int], list[Task]]:
    """The checkpoint steps and the tasks; ``corpus_key`` identifies the preprocessed corpus."""
    steps = checkpoint_steps(study.checkpoints, steps_per_epoch, study.training.epochs)
    last = len(steps) - 1
    total = steps_per_epoch * study.training.epochs
    registry = measures("training")
    tasks: list[Task] = []
    train_ids: dict[int, str] = {}
    names = {n.name: i for i, n in enumerate(study.model)}
    for i, net in enumerate(study.model):
        payload = {"corpus": corpus_key, "training": study.training.model_dump(mode="json", exclude={"device"}),
                   "network": net.key(), "seed": study.network_seed(i),
                   "steps": steps, "v": TRAIN_VERSION}
        tasks.append(train_task(i, payload, study.network_seed(i), len(steps), total))
        train_ids[i] = tasks[-1].id
    for m in study.measure:
        params = m.params()
        reg = registry[m.kind](m)
        for name in study.measured(m):
            n = names[name]
            refs = [names[r] for r in registry[m.kind].tags.named(m, "references")]
            for c in range(len(steps)):
                needs = reg.needs(n, c, last, refs)
                if needs is None:
                    continue
                deps = tuple(sorted({train_ids[k] for k, _ in needs}))
                payload = {"measure": m.kind, "params": params, "deps": deps, "checkpoint": c,
                           "steps": [steps[k] for _, k in needs], "network": n,
                           "analysis_tokens": study.corpus.analysis_tokens, "v": reg.version}
                if study.corpus.analysis_split != "valid":  # ids of the default stay
                    payload["analysis_split"] = study.corpus.analysis_split
                tasks.append(measure_task(m.kind, n, c, payload, params, reads=needs, deps=deps,
                                          name=task_label(m.kind, params)))
    return steps, tasks


def suite_tasks(study: TrainingStudySpec, identities: list[list[dict]], corpus_key: str) -> list[Task]:
    """The measure tasks of a spec of checkpoint suites (nothing to train), checkpoint by checkpoint so that
    each checkpoint is loaded once for all its measures. ``identities[n][c]`` names what network ``n``'s
    checkpoint ``c`` is (source, revision, how words are read); the ids hash those of the checkpoints read."""
    registry = measures("training")
    names = {n.name: i for i, n in enumerate(study.model)}
    last = len(identities[0]) - 1
    tasks: list[Task] = []
    for n, net in enumerate(study.model):
        for c in range(last + 1):
            for m in study.measure:
                if net.name not in study.measured(m):
                    continue
                params, reg = m.params(), registry[m.kind](m)
                needs = reg.needs(n, c, last, [names[r] for r in registry[m.kind].tags.named(m, "references")])
                if needs is None:
                    continue
                payload = {"measure": m.kind, "params": params, "checkpoint": c, "corpus": corpus_key,
                           "suite": [identities[k][j] for k, j in needs], "network": n,
                           "analysis_tokens": study.corpus.analysis_tokens, "analysis_split": study.corpus.analysis_split,
                           "v": reg.version}
                tasks.append(measure_task(m.kind, n, c, payload, params, name=task_label(m.kind, params)))
    return tasks
