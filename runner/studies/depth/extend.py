"""A longer run continues a finished one (issue 37): ``steps = 60`` -> ``80`` iterates 20 steps more.

A pass keeps, when it finishes, its state before the last step's observation (x_T and the twins,
the divergence steps, each measure's ``state_dict``, the early-exit state) in
``<store>.runner/final/<hash of its task ids>.safetensors``: exactly what a resume at step T of a
longer run loads. When the spec changes only ``[dynamics] steps``, upwards, its passes start there:
the store's arrays grow along their step axes with the old values in place
(:func:`runner.storage.store.plan_reshape`), and the pass writes steps T.. and, at the new end, what
a measure computes at the last step (orbit classes, censoring, a PCA, ...), as a fresh run does.
Derived measures (the transient-chaos length) are recomputed from the stored values. The store then
equals a fresh run of the new length bit for bit (tested on this machine's CPU), provided the
extension's durable segments are a fresh run's: T must be a multiple of the new run's segment.

A measure declares that it can be continued (``StepTags(extends=True)``, default: no, with an
``extend_note`` of what it computes again at the new end) and says how its kept state becomes a
longer run's (``StepMeasure.extend_state``: the orbit's window moves on, a PCA's window ending at the
last step gets room). Otherwise, and for a pass without a kept state (a run
from before this, one sharded, or one whose measures ran in separate passes), plan says the run is
recomputed and why.

Disk: one file per finished pass, the size of a resume checkpoint (the batch of x and its twins,
plus the measures' states: the orbit's window, PCA's points), removed when a later pass of the
network supersedes it.
"""

from __future__ import annotations

import json
from typing import Any

from runner.plugin.measures import measures
from runner.plugin.study import Extension, Prepared, plain_key
from runner.storage import kept
from runner.storage.location import Location, location
from runner.storage.store import runner_dir
from runner.studies.depth.layout import segment_length
from runner.studies.depth.shards import pass_key

FINAL = "final"


def final_path(state_dir: Location, ids: list[str]) -> Location:
    """Where the pass of the tasks ``ids`` keeps its state at the end."""
    return location(state_dir) / FINAL / f"{pass_key(ids)}.safetensors"


def lengthened(old: Any, new: Any) -> int | None:
    """The old run's steps when task key ``new`` is ``old`` with only the trajectory's steps raised."""
    old, new = plain_key(old), plain_key(new)
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return None
    a, b = old.get("trajectory"), new.get("trajectory")
    if not (isinstance(a, dict) and isinstance(b, dict)) or {**old, "trajectory": 0} != {**new, "trajectory": 0}:
        return None
    steps = a.get("steps")
    if not isinstance(steps, int) or not isinstance(b.get("steps"), int) or steps >= b["steps"]:
        return None
    return steps if {**a, "steps": b["steps"]} == b else None


def extensions(p: Prepared, replaced: dict[str, list[str]], records: dict[str, dict]) -> dict[str, Extension]:
    """:meth:`runner.plugin.study.Extends.extensions` for the depth study (see the module docstring)."""
    out: dict[str, Extension] = {}
    passes: dict[str, list] = {}
    for t in p.tasks:
        if t.kind == "iterate":
            passes.setdefault(t.group or t.id, []).append(t)
    continued: dict[str, list[str]] = {}
    for tasks in passes.values():
        said = _pass(p, tasks, replaced, records)
        for t in tasks:
            if t.id in said:
                out[t.id] = said[t.id]
                if said[t.id].extends:
                    continued[t.id] = replaced[t.id]
    for t in p.tasks:
        if t.id not in replaced or t.kind == "iterate":
            continue
        olds = [records[i].get("key") for i in replaced[t.id]]
        if t.kind == "derive":
            source = t.deps[0] if t.deps else None
            key = plain_key(t.key)
            same = all(isinstance(o, dict) and {**o, "from": 0} == {**key, "from": 0} and o.get("from") in
                       continued.get(source, []) for o in map(plain_key, olds))
            if source in continued and same:
                out[t.id] = Extension("recomputed from the stored values")
        elif all(lengthened(o, t.key) is not None for o in olds):
            out[t.id] = Extension("marked not applicable again") if t.kind == "skip" else \
                Extension("a network measure runs on the network again", extends=False)
    return out


def _pass(p: Prepared, tasks: list, replaced: dict[str, list[str]], records: dict[str, dict]) -> dict[str, Extension]:
    """What a longer run does with the finished pass of ``tasks`` (one network's trajectory measures)."""
    from runner.storage.checkpoint import read_metadata  # lazy: torch

    steps = {t.id: {lengthened(records[i].get("key"), t.key) for i in replaced.get(t.id, [])} for t in tasks}
    longer = [t for t in tasks if steps[t.id] and None not in steps[t.id]]
    if not longer:
        return {}
    others = [t.measure for t in tasks if t.id not in {u.id for u in longer}]

    def no(why: str) -> dict[str, Extension]:
        return {t.id: Extension(why, extends=False) for t in longer}

    if others:
        return no(f"the pass also runs {', '.join(others)} from t = 0 (new, or changed otherwise)")
    old_steps = {s for t in longer for s in steps[t.id]}
    if len(old_steps) != 1:
        return no("its measures were run to different lengths")
    (old,) = old_steps
    new = p.spec.dynamics.steps
    ids = sorted(i for t in longer for i in replaced[t.id])
    final = final_path(runner_dir(p.store_path), ids)
    meta = read_metadata(final)
    if meta is None or json.loads(meta.get("tasks", "null")) != ids:
        return no(f"no state was kept at step {old} (a run from before extensions, a sharded one, or measures "
                  "run in separate passes)")
    damaged = kept.problem(final)
    if damaged:
        return no(f"its state kept at step {old}, {final}, {damaged}")
    segment = segment_length(p.spec)
    if old % segment:
        chosen = "[dynamics] checkpoint_every" if p.spec.dynamics.checkpoint_every else \
            "by default, about 1% of the run and at least 1000 steps"
        return no(f"{old} is not a multiple of the new run's durable segment ({segment} steps, {chosen}); "
                  + segment_fix(old, new, p.spec.stride_lcm()))
    registry = measures("depth")
    notes = {}
    for t in longer:
        if not registry[t.measure].tags.step.extends:
            return no(f"{t.measure}: it does not say it can continue a finished run")
        params = next(m for m in p.spec.measure if m.kind == t.measure)
        notes[t.id] = registry[t.measure](params).extend_note(old, new)
    return {t.id: Extension(f"continued from step {old}" + (f"; {notes[t.id]}" if notes[t.id] else ""))
            for t in longer}


def segment_fix(old: int, new: int, stride: int) -> str:
    """How a spec continues a finished run of ``old`` steps: a durable segment that divides ``old``
    and that every measure's stride (their lcm ``stride``) divides, the largest near a default's size."""
    fits = [c for c in range(stride, old + 1, stride) if old % c == 0]
    if not fits:
        return f"{old} is not a multiple of the measures' strides (their lcm is {stride}), so no segment ends there"
    target = min(new, max(1000, new // 100))
    best = max((c for c in fits if c <= target), default=fits[0])
    return f"set [dynamics] checkpoint_every = {best} (or --set dynamics.checkpoint_every={best}) to continue it"


def supersede(state_dir: Location, label: str, ids: list[str]) -> None:
    """Remove the states kept by earlier passes of the network ``label`` (a pass of it just finished
    with ``ids``): a later extension starts from the newest."""
    from runner.storage.checkpoint import read_metadata  # lazy: torch

    folder = location(state_dir) / FINAL
    keep = final_path(state_dir, ids)
    for path in sorted(folder.glob("*.safetensors"), key=lambda p: p.name) if folder.is_dir() else []:
        meta = read_metadata(path)  # (object storage keeps final states too; its paths do not order)
        if path != keep and meta is not None and json.loads(meta.get("meta", "{}")).get("network") == label:
            path.unlink(missing_ok=True)
