"""What apply does with finished results (runner/run/changes.py): a longer run the study continues
is an extension (no consent, its records forgotten and its results continued); one it cannot
continue stays a replacement that says why."""

from __future__ import annotations

from runner.core.plan import Task
from runner.plugin.study import Extension
from runner.run.changes import compare


def _task(tid: str, steps: int, measure: str = "m") -> Task:
    return Task(tid, "iterate", measure, 0, measure, key={"steps": steps, "measure": measure})


RECORDS = {old: {"network_label": "net", "measure": m, "label": m, "key": {"steps": 60, "measure": m}}
           for old, m in (("old-a", "a"), ("old-b", "b"), ("old-c", "c"))}
TASKS = [_task("new-a", 80, "a"), _task("new-b", 80, "b"), _task("new-c", 80, "c")]


def test_extensions_need_no_consent_and_the_others_say_why_not():
    seen = {}

    def study(replaced):
        seen.update(replaced)
        return {"new-a": Extension("continued from step 60"), "new-b": Extension("kept", keep=True),
                "new-c": Extension("its window grows", extends=False)}

    out = compare(TASKS, ["net"], RECORDS, study)
    assert seen == {"new-a": ["old-a"], "new-b": ["old-b"], "new-c": ["old-c"]}
    assert [r.task.id for r in out.extend] == ["new-a", "new-b"] and out.extend[0].how == "continued from step 60"
    assert [r.task.id for r in out.replace] == ["new-c"]
    assert out.replace[0].changes == ["steps: 60 -> 80", "not extended: its window grows"]
    assert out.needs_consent and sorted(out.lost()) == ["old-a", "old-b", "old-c"]
    assert out.sources() == {"new-a": ("old-a",)}  # a kept result runs nothing
    taken = out.taken_over(["net"])
    assert list(taken) == ["new-b"] and taken["new-b"]["taken_over_from"] == "old-b"
    assert taken["new-b"]["key"] == {"steps": 80, "measure": "b"}


def test_without_a_study_every_change_replaces():
    out = compare(TASKS, ["net"], RECORDS)
    assert not out.extend and len(out.replace) == 3 and out.needs_consent
