"""Progress of ``apply`` in a terminal: rich bars with steps/s and ETA, or plain lines when piped.

Rates and ETAs come from the steps this run has made since its first progress report (a resumed
run does not count the steps it inherited, and model loading before the first step does not
count either). Writing to a closed pipe or a full disk never stops the run: the view goes quiet.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TaskID, TextColumn
from rich.table import Column
from rich.text import Text


def eta_text(seconds: float | None) -> str:
    if seconds is None:
        return "-:--:--"
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


@dataclass
class Work:
    """The whole run's work, for its overall rate and ETA: steps, and the groups without steps.

    Measured as the run goes, not from the plan's estimate (a calibration on another load): the
    steps at their own rate, and a group without steps at the mean duration of those that ran."""

    steps_total: int = 0
    stepless_total: int = 0
    t0: float = 0.0
    steps_done: int = 0
    stepless_done: int = 0
    stepless_seconds: float = 0.0

    def rate(self, now: float) -> float:
        """Steps per second over the whole run so far (not the current task's)."""
        return self.steps_done / (now - self.t0) if now > self.t0 else 0.0

    def eta(self, now: float) -> float | None:
        """Seconds left: the steps left at the steps' own rate (time spent in groups without steps
        taken out), plus the groups without steps left at their mean duration so far. None until
        both rates are known (or not needed)."""
        steps_left = self.steps_total - self.steps_done
        stepless_left = self.stepless_total - self.stepless_done
        stepping = now - self.t0 - self.stepless_seconds
        if steps_left > 0 and (self.steps_done == 0 or stepping <= 0):
            return None
        if stepless_left > 0 and self.stepless_done == 0:
            return None
        eta = steps_left * stepping / self.steps_done if steps_left > 0 else 0.0
        return eta + (stepless_left * self.stepless_seconds / self.stepless_done if stepless_left > 0 else 0.0)


#: A task's rate is known once this many steps, or this many seconds of its steps, are timed.
RATE_STEPS = 10
RATE_SECONDS = 0.5

#: The narrowest the label may get before a narrower layout drops the bar (then the word "steps").
MIN_LABEL = 12
CLOCK = 8
"""Characters of an elapsed time or ETA, up to 99:59:59."""


def layout(width: int, total_digits: int) -> str:
    """Which columns fit ``width`` with a label of at least ``MIN_LABEL`` characters: "full" (bar and
    "steps/s"), "compact" (no bar, "/s"), or "minimal" (no rate). Counts of ``total_digits`` digits,
    elapsed time and ETA are always whole; only the label gives way."""
    counts = 2 * total_digits + 1
    fixed = counts + CLOCK + 4 + CLOCK  # counts, elapsed, "ETA " and its clock
    if MIN_LABEL + 12 + fixed + len("123456 steps/s") + 5 <= width:
        return "full"
    if MIN_LABEL + fixed + len("123456/s") + 4 <= width:
        return "compact"
    return "minimal"


def columns(kind: str = "full") -> list:
    """The bars' columns of a ``layout``: only the label shrinks (with an ellipsis) on a narrow
    terminal; counts, rate, elapsed time and ETA keep their full width."""
    fixed = dict(no_wrap=True, overflow="ignore")
    label = [_Label(table_column=Column(ratio=1))]
    bar = [BarColumn(bar_width=12, table_column=Column(no_wrap=True))] if kind == "full" else []
    rate = {"full": [TextColumn("{task.fields[rate]:>6} steps/s", table_column=Column(**fixed))],
            "compact": [TextColumn("{task.fields[rate]:>6}/s", table_column=Column(**fixed))]}.get(kind, [])
    return label + bar + [MofNCompleteColumn(table_column=Column(**fixed))] + rate + [
        _Elapsed(table_column=Column(**fixed)), TextColumn("ETA {task.fields[eta]}", table_column=Column(**fixed))]


class _Progress(Progress):
    """rich's Progress, with the layout chosen for the console's width at each refresh (a terminal
    can be resized while a run goes on)."""

    def __init__(self, console: Console, **kwargs):
        self.layouts = {kind: columns(kind) for kind in ("full", "compact", "minimal")}
        self.screen = console
        super().__init__(*self.layouts["full"], console=console, **kwargs)

    def make_tasks_table(self, tasks):
        tasks = list(tasks)
        digits = max((len(str(int(t.total))) for t in tasks if t.total is not None), default=1)
        self.columns = tuple(self.layouts[layout(self.screen.width, digits)])
        return super().make_tasks_table(tasks)


class _Elapsed(ProgressColumn):
    """Time since the task started, as h:mm:ss like the ETA (hours past 24 too)."""

    def render(self, task) -> Text:
        elapsed = task.finished_time if task.finished else task.elapsed
        return Text(eta_text(elapsed), style="progress.elapsed")


class _Label(ProgressColumn):
    """The task's label on one line, cut with an ellipsis where the terminal is narrow (its table
    column is the only one that wraps, so rich narrows it first)."""

    def render(self, task) -> Text:
        return Text(task.description, no_wrap=True, overflow="ellipsis")


def rate_text(rate: float) -> str:
    """Steps per second in at most 6 characters: 0.25, 18.3, 1234, 12.3k, 457k, 3.4M."""
    if rate < 10_000:
        return f"{rate:.0f}" if rate >= 100 else f"{rate:.2g}" if rate < 1 else f"{rate:.1f}"
    for scale, unit in ((1e3, "k"), (1e6, "M"), (1e9, "G")):
        value = rate / scale
        if value < 999.5:
            return (f"{value:.1f}" if value < 99.95 else f"{value:.0f}") + unit
    return ">999G"


class ProgressView:
    def __init__(self, quiet: bool = False):
        self.console = Console(stderr=True)
        self.quiet = quiet
        self.live = self.console.is_terminal and not quiet
        self._progress: Progress | None = None
        self._overall: TaskID | None = None
        self._bars: dict[int, dict] = {}
        self._next = 0
        self._work = Work(t0=time.monotonic())
        self._broken = False

    def start(self, total: int, tasks: int, stepless: int = 0) -> None:
        """``total`` steps over ``tasks`` groups, ``stepless`` of which report no steps (measures of
        a checkpoint, fine-tuning, ...): the overall ETA counts them at their mean duration so far."""
        self._work = Work(steps_total=total, stepless_total=stepless, t0=time.monotonic())
        self._say(f"running {tasks} task(s)")
        if self.live:
            self._progress = _Progress(console=self.console, refresh_per_second=4)
            self._guard(self._progress.start)
            if self._progress is not None:
                self._overall = self._progress.add_task("all", total=max(total, 1), rate="", eta=eta_text(None))

    def add(self, label: str, total: int) -> int:
        key = self._next
        self._next += 1
        bar = {"label": label, "total": total, "t0": time.monotonic(), "step0": None, "step": 0, "reported": 0}
        if self._progress is not None:
            bar["id"] = self._progress.add_task(label, total=total, rate="", eta=eta_text(None))
        self._bars[key] = bar
        self._say(f"started {label}")
        return key

    def update(self, key: int, step: int) -> None:
        bar = self._bars[key]
        if bar["step0"] is None:  # the first step of this run: those before it were an earlier run's
            bar["step0"], bar["t0"] = step - 1, time.monotonic()
            bar["step"] = step - 1
            self._work.steps_total = max(self._work.steps_total - (step - 1), self._work.steps_done)
            if self._progress is not None:
                self._guard(self._progress.update, self._overall, total=max(self._work.steps_total, 1))
        delta = max(step - bar["step"], 0)
        bar["step"] = step
        self._work.steps_done += delta
        if self._progress is not None:
            rate = self.rate(key)
            eta = (bar["total"] - step) / rate if rate else None
            self._progress.update(bar["id"], completed=step, rate=rate_text(rate) if rate else "", eta=eta_text(eta))
            self._progress.advance(self._overall, delta)
            self._show_overall()
        elif not self.quiet and step * 4 // bar["total"] > bar["reported"]:
            bar["reported"] = step * 4 // bar["total"]
            rate = self.rate(key)
            self._say(f"  {bar['label']}: step {step}/{bar['total']}" + (f" ({rate:.1f} steps/s)" if rate else ""))

    def rate(self, key: int) -> float | None:
        """Steps per second of this run, from its first progress report on; None until
        :data:`RATE_STEPS` steps or :data:`RATE_SECONDS` are timed (one step over the first
        microseconds said 12,401 steps/s and an ETA of 0 s)."""
        bar = self._bars[key]
        elapsed = time.monotonic() - bar["t0"]
        done = bar["step"] - (bar["step0"] or 0)
        if elapsed <= 0 or done <= 0 or (done < RATE_STEPS and elapsed < RATE_SECONDS):
            return None
        return done / elapsed

    def done(self, key: int) -> None:
        self._say(f"done {self._bars[key]['label']}")

    def finished(self, seconds: float, steps: int) -> None:
        """A group ended after ``seconds``; a group without steps counts toward the overall ETA."""
        if steps == 0:
            self._work.stepless_done += 1
            self._work.stepless_seconds += seconds
            if self._progress is not None:  # the overall ETA knows the groups' duration now
                self._show_overall()

    def _show_overall(self) -> None:
        now = time.monotonic()
        self._guard(self._progress.update, self._overall, rate=rate_text(self._work.rate(now)),
                    eta=eta_text(self._work.eta(now)))

    def fail(self, key: int, message: str) -> None:
        self._say(f"FAILED {self._bars[key]['label']}: {message}", always=True)

    def note(self, message: str) -> None:
        """A line of what the run is doing (a first-use build's progress), above the bars; none when quiet."""
        self._say(message)

    def warn(self, message: str) -> None:
        self._say(f"warning: {message}", always=True)

    def stop(self) -> None:
        if self._progress is not None:
            self._guard(self._progress.stop)
            self._progress = None

    def _say(self, text: str, always: bool = False) -> None:
        if (self.quiet and not always) or self._broken:
            return
        if self._progress is not None:
            self._guard(self._progress.console.print, text)
        else:
            self._guard(print, text, file=sys.stderr, flush=True)

    def _guard(self, fn, *args, **kwargs) -> None:
        """A closed pipe or a full disk on stderr must not stop the run: go quiet instead."""
        try:
            fn(*args, **kwargs)
        except OSError:  # BrokenPipeError included
            self._broken = True
            self._progress = None
