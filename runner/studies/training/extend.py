"""More epochs continue a finished training run (issue 37): ``epochs = 3`` -> ``5`` trains 2 more.

The thesis' recipe (Saphra 2021, Ch. 4: SGD, the learning rate divided on a validation plateau, no
early stop, batches in corpus order) depends on the number of epochs only through the loop's
bound, and the loop's resume file at the last epoch end holds everything a longer run has there
(weights, optimizer buffers, rate, best loss, RNG, curves). So when a spec changes only
``[training] epochs``, upwards, and the checkpoint schedule of the shorter run is the first part of
the longer one's, the longer run takes the finished run's checkpoints and resume file as its own
(:func:`runner.checkpointed.files.adopt`, a copy with its task id) and trains the epochs added;
its store equals a fresh run's bit for bit on this machine (tested). A measure of checkpoints
the shorter run kept (the same weights, the same parameters) keeps its result: its record is taken
over under the new task id (which names the training task), nothing runs; one that reads a
checkpoint the longer run moves (its final one) is recomputed.

Not extended (plan says why and replaces, with consent): a schedule that moves with the run's
length (``log_spaced`` without ``stop``: its steps spread over the whole run), a run without its
resume file, any other change.
"""

from __future__ import annotations

from typing import Any

from runner.storage import kept
from runner.plugin.study import Extension, Prepared, plain_key
from runner.storage.store import runner_dir


def _without(key: dict, *names: str) -> dict:
    out = {k: v for k, v in key.items() if k not in names}
    if isinstance(out.get("training"), dict):
        out["training"] = {k: v for k, v in out["training"].items() if k != "epochs"}
    return out


def extensions(p: Prepared, replaced: dict[str, list[str]], records: dict[str, dict]) -> dict[str, Extension]:
    """:meth:`runner.plugin.study.Extends.extensions` for the training study (see the module docstring)."""
    out: dict[str, Extension] = {}
    continued: dict[str, str] = {}  # new train id -> the finished one it continues
    for t in p.tasks:
        if t.kind == "train" and len(replaced.get(t.id, [])) == 1:
            old_id = replaced[t.id][0]
            said = _train(p, t, old_id, records[old_id].get("key"))
            if said is not None:
                out[t.id] = said
                if said.extends:
                    continued[t.id] = old_id
    for t in p.tasks:
        if t.kind == "train" or not replaced.get(t.id) or not any(d in continued for d in t.deps):
            continue
        new = plain_key(t.key)
        olds = [plain_key(records[i].get("key")) for i in replaced[t.id]]
        deps = sorted(continued.get(d, d) for d in t.deps)
        if all(isinstance(o, dict) and _without(o, "deps", "steps") == _without(new, "deps", "steps")
               and sorted(o.get("deps") or []) == deps for o in olds):
            if all(o.get("steps") == new.get("steps") for o in olds):  # the same checkpoints: the same values
                out[t.id] = Extension("kept: the same checkpoints", keep=True)
            else:
                out[t.id] = Extension("recomputed on the new run's checkpoints")
    return out


def _train(p: Prepared, t, old_id: str, old_key: Any) -> Extension | None:
    """What a longer run does with the finished training ``old_id`` (None: not a longer run)."""
    from runner.checkpointed.files import RESUME, checkpoint_dir, read_resume  # lazy: torch

    old, new = plain_key(old_key), plain_key(t.key)
    if not (isinstance(old, dict) and isinstance(new, dict)) or _without(old, "steps") != _without(new, "steps"):
        return None
    e0, e1 = (k.get("training", {}).get("epochs") for k in (old, new))
    if not (isinstance(e0, int) and isinstance(e1, int) and e0 < e1):
        return None
    a, b = old.get("steps") or [], new.get("steps") or []
    if b[: len(a)] != a or not a or any(s <= a[-1] for s in b[len(a):]):
        return Extension("its checkpoint steps move with the run's length ([checkpoints] log_spaced without "
                         "stop, or a last step that is no epoch end)", extends=False)
    folder = checkpoint_dir(runner_dir(p.store_path), p.labels[t.network], old_id)
    resume = read_resume(folder / RESUME, old_id)
    if resume is None or not resume.done:
        return Extension(f"no resume state of the {e0}-epoch run was kept", extends=False)
    for path, what in kept.damaged(folder):  # the longer run continues from them all: none may be altered
        return Extension(f"{path} {what}", extends=False)
    if resume.epoch != e0:
        return Extension(f"the {e0}-epoch run stopped early, at epoch {resume.epoch}", extends=False)
    return Extension(f"continued from epoch {e0}")
