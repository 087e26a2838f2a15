"""Two lines on top: the store and its run's state, then the whole run's progress bar and ETA."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from runner.tui.state import RunState, fmt_duration

STATE_STYLE = {"running": "bold yellow", "done": "bold green", "failed": "bold red", "interrupted": "bold magenta", "incomplete": "bold magenta",
               "absent": "dim", "unknown": "dim", "pending": "dim", "preparing": "bold cyan"}


def bar(fraction: float, width: int) -> Text:
    width = max(width, 4)
    full = int(round(fraction * width))
    return Text.assemble(("━" * full, "green"), ("━" * (width - full), "grey37"))


class RunHeader(Static):
    def __init__(self, **kw):
        super().__init__("", **kw)
        self.run_state: RunState | None = None
        self.apply_note = ""

    def show(self, rs: RunState, apply_note: str = "") -> None:
        self.run_state, self.apply_note = rs, apply_note
        self.update(self._render_text())

    def on_resize(self) -> None:
        if self.run_state is not None:
            self.update(self._render_text())

    def _render_text(self) -> Text:
        rs = self.run_state
        width = max(self.size.width, 40)
        top = Text.assemble(("store ", "dim"), (rs.store, "bold"), "  ", (rs.state, STATE_STYLE.get(rs.state, "")))
        if rs.device:
            top.append(f"  on {rs.device}", "dim")
        if self.apply_note:
            top.append(f"  {self.apply_note}", "italic")
        top.truncate(width, overflow="ellipsis")
        tail = f" {rs.fraction * 100:5.1f}%  {rs.summary_line()}"
        if rs.elapsed_s is not None:
            tail += f"  elapsed {fmt_duration(rs.elapsed_s)}"
        if rs.state == "running":
            tail += f"  ETA {fmt_duration(rs.eta_s)}"
        if rs.message:
            tail = f" {rs.message}"
        line = bar(rs.fraction, min(30, width - len(tail) - 1))
        line.append(tail)
        line.truncate(width, overflow="ellipsis")
        return Text("\n").join([top, line])
