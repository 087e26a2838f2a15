"""Progress of ``apply`` in a terminal: rich bars with steps/s and ETA, or plain lines when piped."""

from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)


class ProgressView:
    def __init__(self, quiet: bool = False):
        self.console = Console(stderr=True)
        self.quiet = quiet
        self.live = self.console.is_terminal and not quiet
        self._progress: Progress | None = None
        self._overall: TaskID | None = None
        self._bars: dict[int, dict] = {}
        self._next = 0

    def start(self, total: int, tasks: int) -> None:
        self._say(f"running {tasks} task(s)")
        if self.live:
            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[rate]:>10} steps/s"), TimeElapsedColumn(), TextColumn("ETA"),
                TimeRemainingColumn(), console=self.console, refresh_per_second=4,
            )
            self._progress.start()
            self._overall = self._progress.add_task("all", total=max(total, 1), rate="")

    def add(self, label: str, total: int) -> int:
        key = self._next
        self._next += 1
        bar = {"label": label, "total": total, "t0": time.monotonic(), "step0": None, "step": 0, "reported": 0}
        if self._progress is not None:
            bar["id"] = self._progress.add_task(label, total=total, rate="")
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
            self._progress.update(bar["id"], completed=step, rate=f"{self.rate(key):.1f}")
            self._progress.advance(self._overall, max(delta, 0))
            overall = self._progress.tasks[self._overall]
            if overall.speed:
                self._progress.update(self._overall, rate=f"{overall.speed:.1f}")
        elif not self.quiet and step * 4 // bar["total"] > bar["reported"]:
            bar["reported"] = step * 4 // bar["total"]
            self._say(f"  {bar['label']}: step {step}/{bar['total']} ({self.rate(key):.1f} steps/s)")

    def rate(self, key: int) -> float:
        bar = self._bars[key]
        elapsed = time.monotonic() - bar["t0"]
        done = bar["step"] - (bar["step0"] or 0)
        return done / elapsed if elapsed > 0 else 0.0

    def done(self, key: int) -> None:
        self._say(f"done {self._bars[key]['label']}")

    def fail(self, key: int, message: str) -> None:
        self._say(f"FAILED {self._bars[key]['label']}: {message}")

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def _say(self, text: str) -> None:
        if self.quiet:
            return
        if self._progress is not None:
            self._progress.console.print(text)
        else:
            print(text, file=sys.stderr, flush=True)
