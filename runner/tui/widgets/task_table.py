"""The plan's tasks, one row each, updated cell by cell (no clearing, so no flicker)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from runner.tui.state import RunState, TaskRow, fmt_duration, fmt_rate
from runner.tui.widgets.run_header import STATE_STYLE

COLUMNS = (("network", "network"), ("measure", "measure"), ("state", "state"), ("progress", "progress"),
           ("rate", "steps/s"), ("elapsed", "elapsed"), ("eta", "ETA"))


def cells(t: TaskRow) -> tuple:
    label = t.network_label if len(t.network_label) <= 14 else t.network_label[:13] + "…"
    pct = f"{t.fraction * 100:.0f}%" if (t.steps or t.state == "done") else "-"
    return (label, t.measure, Text(t.state, STATE_STYLE.get(t.state, "")), Text(pct, justify="right"),
            Text(fmt_rate(t.steps_per_s), justify="right"), Text(fmt_duration(t.elapsed_s), justify="right"),
            Text(fmt_duration(t.eta_s) if t.state == "running" else "", justify="right"))


class TaskTable(DataTable):
    def __init__(self, **kw):
        super().__init__(cursor_type="row", zebra_stripes=True, **kw)
        self._shown: dict[str, tuple] = {}

    def on_mount(self) -> None:
        for key, label in COLUMNS:
            self.add_column(label, key=key)

    def show(self, rs: RunState) -> None:
        ids = [t.id for t in rs.tasks]
        if list(self._shown) != ids:  # a new plan (first read or a new run): rebuild once
            self.clear()
            self._shown = {}
            for t in rs.tasks:
                self._shown[t.id] = cells(t)
                self.add_row(*self._shown[t.id], key=t.id)
            return
        for t in rs.tasks:
            new = cells(t)
            old = self._shown[t.id]
            for (key, _), a, b in zip(COLUMNS, old, new):
                if str(a) != str(b) or getattr(a, "style", None) != getattr(b, "style", None):
                    self.update_cell(t.id, key, b, update_width=True)
            self._shown[t.id] = new

    def selected_id(self) -> str | None:
        if not self.row_count:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:
            return None
