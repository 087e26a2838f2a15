"""A plot of one variable summarised over samples, per network (textual-plotext).

Only prepared arrays reach it (:class:`runner.tui.reader.Series`): drawing re-runs on every resize,
reading the store happens in a worker. NaN (not yet written) is skipped.
"""

from __future__ import annotations

import numpy as np

from runner.tui.reader import Series
from runner.tui.curves import with_units
from runner.tui.widgets.plot import COLORS, Plot


class SummaryPlot(Plot):
    @property
    def series(self) -> Series | None:
        return self.data

    def show(self, series: Series | None, network: int | None, note: str = "") -> None:
        self.data, self.network, self.note = series, network, note
        self.draw()

    def plot(self, plt, s: Series) -> None:
        nets = range(len(s.networks)) if self.network is None else [self.network]
        band = self.network is not None
        drawn = 0
        if s.kind == "histogram":
            for i in nets:
                if s.has_data(i):
                    plt.hist(s.values[i].tolist(), bins=20, label=s.networks[i], color=COLORS[i % len(COLORS)])
                    drawn += 1
            plt.xlabel(s.x_label)
            plt.ylabel("samples")
            title = f"{with_units(s.long_name, s.units)}, histogram over samples"
        else:
            for i in nets:
                if not s.has_data(i):
                    continue
                color = COLORS[i % len(COLORS)]
                m = s.mean[i]
                ok = np.isfinite(m)
                x = s.x[ok].tolist()
                if band and i in s.lo:
                    for edge in (s.lo[i], s.hi[i]):
                        e_ok = ok & np.isfinite(edge)
                        plt.plot(s.x[e_ok].tolist(), edge[e_ok].tolist(), color=color, marker="dot")
                plt.plot(x, m[ok].tolist(), color=color, marker="braille", label=s.networks[i])
                drawn += 1
            plt.xlabel(s.x_label)
            plt.ylabel("" if s.units == "1" else s.units)
            title = with_units(s.long_name, s.units)
            if s.spread:
                title += f", {s.spread} over samples" if band else f", {s.spread.split(',')[0]} over samples"
        if not drawn:
            why = {s.not_applicable[i] for i in nets if i in s.not_applicable}
            title += f": not applicable ({'; '.join(sorted(why))})" if why and len(why) == len(
                [i for i in nets if i in s.not_applicable]) == len(list(nets)) else ": no values yet"
        plt.title(title)
