"""apply's progress display: what stays whole at 80 columns, and the run's overall rate and ETA."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from runner.core.progress import ProgressView, Work, layout, rate_text

CLOCK = re.compile(r"\d+:\d\d:\d\d")


def render(width: int, label: str, total: int, done: int) -> list[str]:
    view = ProgressView()
    view.console = Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)
    view.live = True
    view.start(total=total + 3456, tasks=3, stepless=2)
    bar = view.add(label, total)
    view.update(bar, 1)
    view.update(bar, done)
    view._progress.refresh()
    view.stop()
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", view.console.file.getvalue())
    return [ln for ln in text.splitlines() if ln.strip() and "task(s)" not in ln]


@pytest.mark.parametrize("width", [80, 72, 60])
def test_counts_elapsed_and_eta_are_never_cut(width):
    label = "pretrained-albert-large-v2/replicate-3 with a long name (6 measures)"
    lines = render(width, label, 1_200_000, 1_199_999)[-2:]
    overall, task = lines
    assert overall.startswith("all")
    assert "1199999/1203456" in overall and "1199999/1200000" in task  # totals whole
    for line in lines:
        assert len(line) <= width
        assert len(CLOCK.findall(line)) + line.count("-:--:--") == 2, line  # elapsed and ETA whole
        assert re.search(r"ETA (\d+:\d\d:\d\d|-:--:--)$", line), line
        assert "/s" in line
    assert "…" in task and task.startswith("pretr")  # only the label gives way


@pytest.mark.parametrize("width, digits, kind", [(80, 7, "full"), (80, 4, "full"), (72, 7, "compact"),
                                                 (60, 7, "compact"), (60, 4, "compact"), (50, 7, "minimal")])
def test_the_layout_drops_the_bar_then_the_rate_before_the_label_gets_short(width, digits, kind):
    assert layout(width, digits) == kind


def test_below_every_layout_only_the_label_is_cut():
    lines = render(40, "a-network-with-a-long-name (svcca)", 1200, 1200)[-2:]
    assert "1200/4656" in lines[0] and "1200/1200" in lines[1]
    assert all(len(line) <= 40 and line.endswith("0:00:00") for line in lines[1:]), lines


def test_the_overall_eta_counts_the_groups_without_steps():
    work = Work(steps_total=1000, stepless_total=4, t0=0.0, steps_done=250, stepless_done=1, stepless_seconds=5.0)
    # 250 steps in the 25 s not spent on the measure group: 0.1 s/step; 3 groups left at 5 s each
    assert work.eta(now=30.0) == pytest.approx(750 * 0.1 + 3 * 5.0)
    assert work.rate(now=30.0) == pytest.approx(250 / 30)  # the run's rate, not the last task's
    assert Work(steps_total=10, stepless_total=2, t0=0.0, steps_done=5).eta(now=5.0) is None  # measures not timed yet
    assert Work(steps_total=10, t0=0.0, steps_done=5).eta(now=5.0) == pytest.approx(5.0)
    assert Work(steps_total=0, stepless_total=3, t0=0.0, stepless_done=1, stepless_seconds=2.0).eta(now=2.0) == 4.0


def test_a_training_run_eta_counts_the_measures_between_its_epochs():
    """Two epochs of 100 steps at 0.1 s/step, each followed by a 4 s measure group: the run ends at
    28 s, and once a measure group is timed the ETA says so (a rate of steps alone would say 10 s at 14 s)."""
    work = Work(steps_total=200, stepless_total=2, t0=0.0)
    work.steps_done = 100
    assert work.eta(now=10.0) is None  # how long a measure takes is not known yet
    work.stepless_done, work.stepless_seconds = 1, 4.0  # the first measure group ran from 10 s to 14 s
    assert work.eta(now=14.0) == pytest.approx(28.0 - 14.0)
    work.steps_done = 150
    assert work.eta(now=19.0) == pytest.approx(28.0 - 19.0)
    assert work.rate(now=19.0) == pytest.approx(150 / 19)  # measure time counts in the run's rate
    work.steps_done = 200
    assert work.eta(now=24.0) == pytest.approx(28.0 - 24.0)
    work.stepless_done, work.stepless_seconds = 2, 8.0
    assert work.eta(now=28.0) == 0.0


def test_rates_fit_six_characters():
    rates = (0.25, 18.34, 123.4, 9999, 12_345, 99_960, 457_000, 999_600, 3_400_000, 4.4e10, 1e14)
    assert [rate_text(r) for r in rates] == \
        ["0.25", "18.3", "123", "9999", "12.3k", "100k", "457k", "1.0M", "3.4M", "44.0G", ">999G"]


def test_status_orders_revisions_and_steps_by_their_numbers():
    from runner.read.status import _order

    tasks = [{"network": None, "network_label": f"pythia@step{n}", "measure": f"svcca@{n}"} for n in (10, 2, 143000, 1)]
    assert [t["measure"] for t in sorted(tasks, key=_order)] == ["svcca@1", "svcca@2", "svcca@10", "svcca@143000"]
    same = [{"network": 0, "network_label": "lm", "measure": m} for m in ("probe step10", "probe step9", "cka")]
    assert [t["measure"] for t in sorted(same, key=_order)] == ["cka", "probe step9", "probe step10"]


def test_status_lists_revisions_in_their_numbers_order(tmp_path):
    from runner.read.status import fold_status, render_status

    infos = [{"id": f"t{c}", "network": 0, "network_label": "pythia-70m", "measure": f"svcca@{c}", "kind": "svcca",
              "checkpoint": c, "steps": 0} for c in (10, 2, 1, 143)]
    events = [{"ts": 1.0, "event": "run_started", "run": "r", "pid": 1, "tasks": infos},
              {"ts": 2.0, "event": "run_finished", "run": "r", "status": "done"}]
    records = {"t10": {"seconds": 1.0}, "t2": {"seconds": 2.0}}
    status = fold_status(tmp_path, events, records, is_alive=lambda pid: False)
    assert [t["measure"] for t in status["tasks"]] == ["svcca@1", "svcca@2", "svcca@10", "svcca@143"]
    rows = [line.split()[0] for line in render_status(status).splitlines() if re.match(r"t\d+ ", line)]
    assert rows == ["t1", "t2", "t10", "t143"]
    # from the completion records alone (no event log): the same order
    alone = fold_status(tmp_path, [], {f"t{c}": {"network": 0, "network_label": "lm", "measure": "cka", "checkpoint": c,
                                                  "seconds": 1.0} for c in (10, 2, 1)})
    assert [t["id"] for t in alone["tasks"]] == ["t1", "t2", "t10"]


def test_a_resumed_task_counts_only_this_runs_steps():
    """A pass resumed at step 300 of 400 (issue 53): the whole run's bar counts the 100 steps this
    run makes, never the 300 an earlier run made."""
    view = ProgressView()
    view.console = Console(file=io.StringIO(), width=80, force_terminal=True, color_system=None)
    view.live = True
    view.start(total=400 + 50, tasks=2)
    resumed, fresh = view.add("resumed", 400), view.add("fresh", 50)
    view.update(resumed, 301)
    view.update(fresh, 1)
    assert (view._work.steps_done, view._work.steps_total) == (2, 150)
    for step in range(302, 401):
        view.update(resumed, step)
    overall = view._progress.tasks[0]
    assert (overall.completed, overall.total) == (100 + 1, 150)  # and the fresh one's first step
    view.stop()


def test_a_task_just_started_has_no_rate_yet():
    """One step over the first microseconds is no rate (it said 12,401 steps/s and an ETA of 0 s);
    the rate is known once RATE_STEPS steps are timed."""
    from runner.core.progress import RATE_STEPS

    view = ProgressView(quiet=True)
    view.start(total=1000, tasks=1)
    key = view.add("net", 1000)
    view.update(key, 1)
    view.update(key, 2)
    assert view.rate(key) is None
    view.update(key, 1 + RATE_STEPS)
    assert view.rate(key) > 0
