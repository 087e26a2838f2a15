"""apply's progress display: what stays whole at 80 columns, and the run's overall rate and ETA."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from runner.progress import ProgressView, Work, rate_text

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


@pytest.mark.parametrize("width", [80, 72])
def test_counts_elapsed_and_eta_are_never_cut_at_80_columns(width):
    label = "pretrained-albert-large-v2/replicate-3 with a long name (6 measures)"
    lines = render(width, label, 1_200_000, 1_199_999)[-2:]
    overall, task = lines
    assert overall.startswith("all")
    assert "1199999/1203456" in overall and "1199999/1200000" in task  # totals whole
    for line in lines:
        assert len(line) <= width
        assert len(CLOCK.findall(line)) + line.count("-:--:--") == 2, line  # elapsed and ETA whole
        assert "steps/s" in line
    assert "…" in task and task.startswith("pretr")  # only the label gives way


def test_the_overall_eta_counts_the_groups_without_steps():
    work = Work(steps_total=1000, stepless_total=4, t0=0.0, steps_done=250, stepless_done=1, stepless_seconds=5.0)
    # 250 steps in the 25 s not spent on the measure group: 0.1 s/step; 3 groups left at 5 s each
    assert work.eta(now=30.0) == pytest.approx(750 * 0.1 + 3 * 5.0)
    assert work.rate(now=30.0) == pytest.approx(250 / 30)  # the run's rate, not the last task's
    assert Work(steps_total=10, stepless_total=2, t0=0.0, steps_done=5).eta(now=5.0) is None  # measures not timed yet
    assert Work(steps_total=10, t0=0.0, steps_done=5).eta(now=5.0) == pytest.approx(5.0)
    assert Work(steps_total=0, stepless_total=3, t0=0.0, stepless_done=1, stepless_seconds=2.0).eta(now=2.0) == 4.0


def test_rates_fit_six_characters():
    assert [rate_text(r) for r in (0.25, 18.34, 123.4, 9999, 12_345, 3_400_000)] == \
        ["0.25", "18.3", "123", "9999", "12.3k", "3.4M"]


def test_status_orders_revisions_and_steps_by_their_numbers():
    from runner.status import _order

    tasks = [{"network": None, "network_label": f"pythia@step{n}", "measure": f"svcca@{n}"} for n in (10, 2, 143000, 1)]
    assert [t["measure"] for t in sorted(tasks, key=_order)] == ["svcca@1", "svcca@2", "svcca@10", "svcca@143000"]
    same = [{"network": 0, "network_label": "lm", "measure": m} for m in ("probe step10", "probe step9", "cka")]
    assert [t["measure"] for t in sorted(same, key=_order)] == ["cka", "probe step9", "probe step10"]
