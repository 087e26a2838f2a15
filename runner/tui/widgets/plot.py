"""What the monitor's plots share (textual-plotext): they keep what :meth:`Plot.show` gave them and
redraw it on mount and on every resize; with nothing to draw they say why."""

from __future__ import annotations

from typing import Any

from textual_plotext import PlotextPlot

COLORS = ("cyan", "orange", "green", "magenta", "blue", "red", "yellow", "gray")


class Plot(PlotextPlot):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.data: Any = None
        self.network: int | None = None  # None: all networks
        self.note = ""

    def on_mount(self) -> None:
        self.draw()

    def draw(self) -> None:
        self.plt.clear_figure()
        if self.data is None:
            self.plt.title(self.note or "no data yet")
        else:
            self.plot(self.plt, self.data)
        self.refresh()

    def plot(self, plt, data) -> None:
        """Draw ``data`` (prepared arrays only: this runs on every resize)."""
        raise NotImplementedError
