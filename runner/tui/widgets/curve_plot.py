"""A plot of one curve variable (plot hint ``curve``, textual-plotext): one line per network, or per
group (a layer, a parameter group) of one network.

Only prepared arrays reach it (:class:`runner.tui.curves.Curves`); which lines to draw for the
selected network and group is :func:`runner.tui.curves.lines`. NaN (unfinished) is skipped.
"""

from __future__ import annotations

from runner.tui.curves import Curves, lines
from runner.tui.widgets.plot import COLORS, Plot


class CurvePlot(Plot):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.group: str | None = None

    @property
    def curves(self) -> Curves | None:
        return self.data

    def show(self, curves: Curves | None, network: int | None, group: str | None, note: str = "") -> None:
        self.data, self.network, self.group, self.note = curves, network, group, note
        self.draw()

    def plot(self, plt, c: Curves) -> None:
        what, drawn = lines(c, self.network, self.group)
        drawn = [ln for ln in drawn if ln.x.size]
        for ln in drawn:
            kw = dict(color=COLORS[ln.color % len(COLORS)], marker=ln.marker, label=ln.label)
            if ln.x.size == 1 or ln.marker == "dot":
                plt.scatter(ln.x.tolist(), ln.y.tolist(), **kw)
            else:
                plt.plot(ln.x.tolist(), ln.y.tolist(), **kw)
        plt.xlabel(c.x_label)
        plt.ylabel(c.units)
        title = f"{c.long_name} [{c.units}], {what}"
        plt.title(title if drawn else f"{title}: no values yet")
