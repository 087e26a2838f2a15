"""The plan's tasks, one row each, updated cell by cell (no clearing, so no flicker)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from runner.tui.state import RunState, TaskRow, fmt_duration, fmt_rate
from runner.tui.widgets.run_header import STATE_STYLE

COLUMNS = (("network", "network"), ("measure", "measure"), ("state", "state"), ("progress", "progress"),
           ("rate", "steps/s"), ("elapsed", "elapsed"), ("eta", "ETA"))
#: widths of the columns whose content changes while a run goes on; fixed, so that cell updates
#: never resize a column (resizing left stale, truncated rows on screen)
FIXED = {"state": 11, "progress": 8, "rate": 7, "elapsed": 7, "eta": 7}


def cells(t: TaskRow) -> tuple:
    label = t.network_label if len(t.network_label) <= 14 else t.network_label[:13] + "…"
    pct = f"{t.fraction * 100:.0f}%" if (t.steps or t.state == "done") else "-"
    def right(text: str) -> Text:  # the trailing space separates it from the next column
        return Text(text + " ", justify="right")

    if t.not_applicable and t.state == "done":  # nothing was computed: say so, not "done 100%"
        return (label, t.measure, Text("n/a", "dim"), right("-"), right("-"), right("-"), right(""))
    return (label, t.measure, Text(t.state, STATE_STYLE.get(t.state, "")), right(pct), right(fmt_rate(t.steps_per_s)),
            right(fmt_duration(t.elapsed_s)), right(fmt_duration(t.eta_s) if t.state == "running" else ""))


class TaskTable(DataTable):
    def __init__(self, **kw):
        # no padding: each column is one cell wider than its content instead, so 80 columns suffice
        super().__init__(cursor_type="row", zebra_stripes=True, cell_padding=0, **kw)
        self._shown: dict[str, tuple] = {}

    def show(self, rs: RunState) -> None:
        ids = [t.id for t in rs.tasks]
        if list(self._shown) != ids:  # a new plan (first read or a new run): rebuild once
            self.clear(columns=True)
            rows = {t.id: cells(t) for t in rs.tasks}
            for i, (key, label) in enumerate(COLUMNS):
                width = FIXED.get(key) or max([len(label)] + [len(str(r[i])) for r in rows.values()])
                self.add_column(label, key=key, width=width + 1)
            self._shown = {}
            for t in rs.tasks:
                self._shown[t.id] = rows[t.id]
                self.add_row(*rows[t.id], key=t.id)
            return
        for t in rs.tasks:
            new = cells(t)
            old = self._shown[t.id]
            for (key, _), a, b in zip(COLUMNS, old, new):
                if str(a) != str(b) or getattr(a, "style", None) != getattr(b, "style", None):
                    self.update_cell(t.id, key, b)
            self._shown[t.id] = new

    def selected_id(self) -> str | None:
        if not self.row_count:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:
            return None
