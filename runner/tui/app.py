"""``runner monitor``: the Textual app, its screens and key bindings.

Data flow: every ``poll_s`` seconds a thread worker reads the bytes appended to the store's event log
(:class:`~runner.tui.reader.StoreWatcher`), folds them like ``runner status`` does
(:func:`runner.read.status.fold_status`) into a :class:`~runner.tui.state.RunState` and hands it to the UI
thread. Only when the log shows new results (a segment crossed, a task done, the run finished) does a
second thread worker re-read the plotted variables from the store. Which variables are plotted, in
which order and how, the store says (its variables' plot hints): the app names no study.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Static, TabbedContent, TabPane

from runner.core.commandline import command, hint, program
from runner.storage.location import location
from runner.tui.reader import StoreData, StoreWatcher, read_summaries
from runner.tui.state import RunState
from runner.tui.widgets import CurvePlot, RunHeader, StoreDetails, SummaryPlot, TaskDetail, TaskTable

HELP = """\
[b]runner monitor[/b]: a store's tasks, live plots and provenance (read only).

  [b]1[/b]      tasks: state, progress, steps/s, elapsed, ETA of every task
  [b]↑ ↓[/b]    select a task; a failed task shows its error below the table
  [b]2[/b]      plots: the variables the store asks to plot, per network
  [b]v[/b] [b]V[/b]    next / previous variable, in the store's order
  [b]n[/b] [b]N[/b]    next / previous network (one network also shows the spread)
  [b]a[/b]      all networks
  [b]l[/b] [b]L[/b]    curves per layer or group: next / previous one (all: one line each)
  [b]3[/b]      store: dimensions, variables, provenance and the spec
  [b]r[/b]      re-read the store now
  [b]t[/b]      light / dark theme
  [b]?[/b]      this help (esc or ? closes it; q quits from it too)
  [b]q[/b]      quit; with `apply --monitor`, stops the apply with SIGINT
         (finished segments are kept: `runner apply` resumes)

Reads the event log beside the store (new bytes, once a second) and the
store's variables when new results land; never takes the store's lock.
"""


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,question_mark", "dismiss", "close"), Binding("q", "app.quit", "quit")]

    def compose(self) -> ComposeResult:
        with Vertical(id="help"):
            yield Static(HELP, id="help-text")

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss()


class MonitorApp(App):
    CSS_PATH = "monitor.tcss"
    TITLE = "runner monitor"
    BINDINGS = [
        Binding("q", "quit", "quit"),
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),  # as q (not Textual's "press ctrl+q" toast)
        Binding("question_mark", "help", "help", key_display="?"),
        Binding("1", "view('tasks')", "tasks", show=False),
        Binding("2", "view('plots')", "plots", show=False),
        Binding("3", "view('store')", "store", show=False),
        Binding("v", "variable(1)", "variable"),
        Binding("V", "variable(-1)", "prev var", show=False),
        Binding("n", "network(1)", "network"),
        Binding("N", "network(-1)", "prev net", show=False),
        Binding("a", "all_networks", "all nets", show=False),
        Binding("l", "layer(1)", "layer", show=False),
        Binding("L", "layer(-1)", "prev layer", show=False),
        Binding("t", "toggle_theme", "theme"),
        Binding("r", "reread", "re-read", show=False),
    ]

    def __init__(self, target: Path, *, poll_s: float = 1.0, clock: Callable[[], float] = time.time,
                 process: subprocess.Popen | None = None, spec: Path | None = None):
        super().__init__()
        self.target = location(target)
        self.poll_s = poll_s
        self.clock = clock
        self.process = process
        self.spec = spec
        self.watcher = StoreWatcher(self.target)
        self.run_state: RunState | None = None
        self.data: StoreData | None = None
        self.variable: str | None = None  # the first plot the store offers, once read
        self.network: int | None = None
        self.layer: str | None = None  # curves per group (a layer): None = one line per group
        self._reading = False
        self._reread = False
        self._polling = False
        self._announced_exit = False

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield RunHeader(id="run-header")
        with TabbedContent(initial="tasks", id="views"):
            with TabPane("1 tasks", id="tasks"):
                yield TaskTable(id="task-table")
                yield TaskDetail(id="task-detail")
            with TabPane("2 plots", id="plots"):
                yield Static("", id="plot-bar")
                yield SummaryPlot(id="plot")
                yield CurvePlot(id="curve-plot")
            with TabPane("3 store", id="store"):
                yield StoreDetails(id="store-details")
        yield Footer()

    def on_mount(self) -> None:
        self.theme = "textual-dark"
        self.sub_title = str(self.watcher.path)
        self.query_one(TaskTable).focus()
        self.poll()
        self._timer = self.set_interval(self.poll_s, self.poll)

    # ------------------------------------------------------------------ reading

    def poll(self) -> None:
        if not self._polling:
            self._polling = True
            self._poll_worker()

    @work(thread=True, exclusive=True, group="poll")
    def _poll_worker(self) -> None:
        try:
            result = self.watcher.poll()
            rs = RunState.build(self.watcher.status(), self.clock(), self.watcher.run_started())
        finally:
            self._polling = False
        self.call_from_thread(self._apply_state, rs, result.new_results)

    def _apply_state(self, rs: RunState, new_results: bool) -> None:
        self.run_state = rs
        self.query_one(RunHeader).show(rs, self._apply_note())
        table = self.query_one(TaskTable)
        table.show(rs)
        self._show_selected()
        if self.process is not None and self.process.poll() is not None and not self._announced_exit:
            self._announced_exit = True
            code = self.process.returncode
            self.notify(f"apply exited with code {code}" + ("" if code == 0 else ": see the task table"),
                        severity="information" if code == 0 else "error", timeout=8)
        if new_results:
            self.load_data()

    def _apply_note(self) -> str:
        if self.process is None:
            return ""
        code = self.process.poll()
        return f"apply pid {self.process.pid} running" if code is None else f"apply exited {code}"

    def load_data(self) -> None:
        if self._reading:
            self._reread = True
            return
        self._reading = True
        self._data_worker()

    @work(thread=True, group="data")
    def _data_worker(self) -> None:
        try:
            data = read_summaries(self.watcher.path, upto=self.watcher.written_upto())
            error = None
        except Exception as err:  # a store being created or rewritten: try again on the next event
            data, error = None, f"{type(err).__name__}: {err}"
        self.call_from_thread(self._apply_data, data, error)

    def _apply_data(self, data: StoreData | None, error: str | None) -> None:
        self._reading = False
        if error:
            self.notify(f"could not read the store: {error}", severity="warning")
        else:
            self.data = data
            self.query_one(StoreDetails).show(data, str(self.watcher.path))
            self._draw()
        if self._reread:
            self._reread = False
            self.load_data()

    # ------------------------------------------------------------------ views

    def _show_selected(self) -> None:
        if self.run_state is None:
            return
        tid = self.query_one(TaskTable).selected_id()
        self.query_one(TaskDetail).show(self.run_state.task(tid) if tid else None)

    @on(DataTable.RowHighlighted)
    def _row_highlighted(self) -> None:
        self._show_selected()

    @property
    def curve(self) -> bool:
        """The selected plot is drawn as curves (plot hint ``curve``)."""
        return self.data is not None and self.variable in self.data.curves

    def _variables(self) -> list[str]:
        return self.data.plots if self.data is not None else []

    def _draw(self) -> None:
        names = self.data.networks if self.data else []
        if self.network is not None and self.network >= len(names):
            self.network = None
        variables = self._variables()
        if variables and self.variable not in variables:
            self.variable = variables[0]
        self.query_one(SummaryPlot).display = not self.curve
        self.query_one(CurvePlot).display = self.curve
        if self.curve:
            return self._draw_curves(names)
        series = self.data.series.get(self.variable) if self.data else None
        note = "" if self.data else "no store yet"
        if self.data and series is None:
            note = "this store has nothing to plot yet"
        self.query_one(SummaryPlot).show(series, self.network, note)
        bar = Text()
        for v in self._variables():
            bar.append(f" {v} ", "reverse bold" if v == self.variable else "dim")
        bar.append("\n")
        bar.append(" networks: ", "dim")
        bar.append("all" if self.network is None else names[self.network], "bold")
        if names:
            bar.append(f"  ({len(names)}: " + ", ".join(names) + ")", "dim")
        bar.truncate(max(self.size.width - 2, 20) * 2, overflow="ellipsis")
        self.query_one("#plot-bar", Static).update(bar)

    def _draw_curves(self, names: list[str]) -> None:
        variables = self._variables()
        curves = self.data.curves[self.variable]
        groups = curves.groups
        layer = self.layer if self.layer in groups else None
        self.query_one(CurvePlot).show(curves, self.network, layer)
        bar = Text()
        bar.append(f" {self.variable} ", "reverse bold")
        bar.append(f" {variables.index(self.variable) + 1}/{len(variables)}", "dim")
        if curves:
            bar.append(f"  {curves.long_name}", "dim")
        bar.append("\n")
        bar.append(" network: ", "dim")
        bar.append("all" if self.network is None else names[self.network], "bold")
        if groups:
            bar.append(f"  {curves.group_dim}: ", "dim")
            bar.append(layer or "all", "bold")
            bar.append(" (l)", "dim")
        if names:
            bar.append(f"  ({len(names)}: " + ", ".join(names) + ")", "dim")
        bar.truncate(max(self.size.width - 2, 20) * 2, overflow="ellipsis")
        self.query_one("#plot-bar", Static).update(bar)

    def action_view(self, view: str) -> None:
        self.query_one(TabbedContent).active = view
        if view == "tasks":
            self.query_one(TaskTable).focus()

    def action_variable(self, delta: int) -> None:
        names = self._variables()
        if names:
            i = names.index(self.variable) if self.variable in names else 0
            self.variable = names[(i + delta) % len(names)]
        self.query_one(TabbedContent).active = "plots"
        self._draw()

    def action_network(self, delta: int) -> None:
        n = len(self.data.networks) if self.data else 0
        if n:
            order = [None, *range(n)]
            self.network = order[(order.index(self.network) + delta) % len(order)]
        self.query_one(TabbedContent).active = "plots"
        self._draw()

    def action_layer(self, delta: int) -> None:
        curves = self.data.curves.get(self.variable) if self.curve else None
        if curves and curves.groups:
            order = [None, *curves.groups]
            i = order.index(self.layer) if self.layer in order else 0
            self.layer = order[(i + delta) % len(order)]
        self.query_one(TabbedContent).active = "plots"
        self._draw()

    def action_all_networks(self) -> None:
        self.network = None
        self.query_one(TabbedContent).active = "plots"
        self._draw()

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.theme == "textual-dark" else "textual-dark"

    def action_reread(self) -> None:
        self.poll()
        self.load_data()

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id == "plots":
            self._draw()


# ---------------------------------------------------------------------- entry points


def run_monitor(target: Path) -> int:
    """Watch a store (or a spec's store); one that does not exist yet is waited for."""
    MonitorApp(location(target)).run()
    return 0


def exit_code(returncode: int) -> int:
    """A child's return code as a shell reports it: 128 + N when it died of signal N."""
    return 128 - returncode if returncode < 0 else returncode


def run_apply_with_monitor(spec_path: Path, device: str | None = None, overrides: list[str] = (),
                           store: Path | None = None) -> int:
    """Run ``runner apply SPEC`` in a subprocess and monitor its store (``store``: where the spec with
    its ``overrides`` writes; default the spec's own); quitting stops it with SIGINT.

    The apply runs in a session of its own, so a Ctrl-C typed into the terminal reaches the monitor
    only; the monitor then stops the apply with one SIGINT (it finishes its step and exits 130)."""
    cmd = [sys.executable, "-m", "runner.cli", "apply", str(spec_path), "--quiet"]
    if device:
        cmd += ["--device", device]
    cmd += [arg for o in overrides for arg in ("--set", o)]
    with tempfile.TemporaryFile(mode="w+") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            MonitorApp(store or Path(spec_path), process=proc, spec=Path(spec_path)).run()
        finally:
            if proc.poll() is None:
                print(f"stopping apply (pid {proc.pid}) with SIGINT…", file=sys.stderr)
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                print(hint("apply interrupted; finished work is kept; to resume, run:",
                           command("apply", spec_path, overrides)), file=sys.stderr)
        log.seek(0)
        out = log.read().strip()
    code = exit_code(proc.returncode)
    if out and code not in (0, 130):
        print(out, file=sys.stderr)
    elif code == 0:
        print(f"apply finished: `{program()} status {spec_path}` for a summary")
    return code
