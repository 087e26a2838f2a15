"""Progress of ``apply`` in a terminal: rich bars with steps/s and ETA, or plain lines when piped.

Rates and ETAs come from the steps this run has made since its first progress report (a resumed
run does not count the steps it inherited, and model loading before the first step does not
count either). Writing to a closed pipe or a full disk never stops the run: the view goes quiet.
"""

from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn


def eta_text(seconds: float | None) -> str:
    if seconds is None:
        return "-:--:--"
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class ProgressView:
    def __init__(self, quiet: bool = False):
        self.console = Console(stderr=True)
        self.quiet = quiet
        self.live = self.console.is_terminal and not quiet
        self._progress: Progress | None = None
        self._overall: TaskID | None = None
        self._bars: dict[int, dict] = {}
        self._next = 0
        self._total = 0
        self._broken = False

    def start(self, total: int, tasks: int) -> None:
        self._total = total
        self._say(f"running {tasks} task(s)")
        if self.live:
            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[rate]:>10} steps/s"), TimeElapsedColumn(), TextColumn("ETA"),
                TextColumn("{task.fields[eta]}"), console=self.console, refresh_per_second=4,
            )
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
        if bar["step0"] is None:
            bar["step0"], bar["t0"] = step - 1, time.monotonic()
        delta = step - bar["step"]
        bar["step"] = step
        if self._progress is not None:
            rate = self.rate(key)
            eta = (bar["total"] - step) / rate if rate else None
            self._progress.update(bar["id"], completed=step, rate=f"{rate:.1f}", eta=eta_text(eta))
            self._progress.advance(self._overall, max(delta, 0))
            overall = self._progress.tasks[self._overall]
            remaining = overall.total - overall.completed
            self._progress.update(self._overall, rate=f"{rate:.1f}", eta=eta_text(remaining / rate if rate else None))
        elif not self.quiet and step * 4 // bar["total"] > bar["reported"]:
            bar["reported"] = step * 4 // bar["total"]
            self._say(f"  {bar['label']}: step {step}/{bar['total']} ({self.rate(key):.1f} steps/s)")

    def rate(self, key: int) -> float:
        """Steps per second of this run, from its first progress report on."""
        bar = self._bars[key]
        elapsed = time.monotonic() - bar["t0"]
        done = bar["step"] - (bar["step0"] or 0)
        return done / elapsed if elapsed > 0 else 0.0

    def done(self, key: int) -> None:
        self._say(f"done {self._bars[key]['label']}")

    def fail(self, key: int, message: str) -> None:
        self._say(f"FAILED {self._bars[key]['label']}: {message}", always=True)

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
