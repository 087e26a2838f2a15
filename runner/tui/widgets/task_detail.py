"""The selected task: its id, measure, progress, and its error when it failed."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from runner.tui.state import TaskRow, fmt_duration, fmt_rate
from runner.tui.widgets.run_header import STATE_STYLE


class TaskDetail(Static):
    def show(self, t: TaskRow | None) -> None:
        if t is None:
            self.update(Text("no task selected", "dim"))
            return
        text = Text.assemble(("task ", "dim"), (t.id, "bold"), "  ", (t.network_label, "bold"), " · ", t.measure,
                             f" ({t.kind})  ", (t.state, STATE_STYLE.get(t.state, "")))
        if t.not_applicable:
            text.append(f"\nnot applicable: {t.not_applicable} (its values are NaN)", "dim")
        line = []
        if t.steps:
            line.append(f"step {t.step if t.state != 'done' else t.steps}/{t.steps}")
        if t.steps_per_s:
            line.append(f"{fmt_rate(t.steps_per_s)} steps/s")
        if t.elapsed_s is not None:
            line.append(f"elapsed {fmt_duration(t.elapsed_s)}")
        if t.eta_s is not None and t.state == "running":
            line.append(f"ETA {fmt_duration(t.eta_s)}")
        if line:
            text.append("\n" + "  ".join(line))
        if t.error:
            text.append("\nerror: ", "bold red")
            text.append(t.error, "red")
        elif t.state == "interrupted":
            text.append("\nstopped before it finished: `runner apply` resumes it from its last segment", "dim")
        self.update(text)
