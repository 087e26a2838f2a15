"""The monitor driven headless (``App.run_test``) against stores written by real ``runner apply`` runs."""

from __future__ import annotations

import json
import signal
import time

import pytest

from runner.storage.events import EventReader
from runner.core.layout import internal
from runner.read.status import fold_status, load_status
from runner.tui import app as app_module
from runner.tui.app import HelpScreen, MonitorApp
from runner.tui.reader import StoreWatcher, read_summaries
from runner.tui.state import RunState, fmt_duration
from runner.tui.widgets import StoreDetails, SummaryPlot, TaskDetail, TaskTable

from .conftest import FROZEN


async def settle(pilot, cond, timeout: float = 60.0) -> None:
    """Wait for a state of the app (the timeout only bounds a failure; a busy machine is slow)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        await pilot.pause(0.05)


def loaded(app):
    return lambda: app.run_state is not None and app.data is not None and not app._reading


def table_states(app) -> dict[str, str]:
    return {t.id: t.state for t in app.run_state.tasks}


def static_text(widget) -> str:
    return str(widget.render())


# ---------------------------------------------------------------------- no Textual: state and reader


def test_state_matches_runner_status(tiny_root, monkeypatch):
    monkeypatch.chdir(tiny_root)
    w = StoreWatcher("store/tiny.zarr")
    w.poll()
    rs = RunState.build(w.status(), time.time(), w.run_started())
    status = load_status("store/tiny.zarr")
    # a task that does not apply is finished for the monitor, whose row says n/a from not_applicable
    assert [(t.id, t.state) for t in rs.tasks] == [(t["id"], "done" if t["state"] == "n/a" else t["state"])
                                                    for t in status["tasks"]]
    assert rs.state == status["state"] == "done" and rs.fraction == 1.0
    assert len(rs.tasks) == 8 and rs.summary_line() == "8/8 done"


def test_watcher_reads_only_new_bytes_and_holds_partial_lines(tiny_root, tmp_path):
    log = tmp_path / "events.jsonl"
    log.write_text(json.dumps({"ts": 1, "event": "run_started", "run": "r", "tasks": []}) + "\n" + '{"ts": 2, "ev')
    r = EventReader(log)
    assert [e["event"] for e in r.read_new()] == ["run_started"]
    with open(log, "a") as f:
        f.write('ent": "run_finished", "run": "r", "status": "done"}\n')
    assert [e["event"] for e in r.read_new()] == ["run_finished"]
    assert r.read_new() == [] and r.offset == log.stat().st_size


def test_watcher_asks_for_a_reread_only_on_new_results(done_root, monkeypatch):
    monkeypatch.chdir(done_root)
    w = StoreWatcher("store/tiny.zarr")
    assert w.poll().new_results  # first look
    assert w.segment == 50
    quiet = w.poll()
    assert not quiet.changed and not quiet.new_results
    log = done_root / "store" / "tiny.runner" / "events.jsonl"
    base = {"run": "x", "pid": 1, "network": 0, "task": ["a"], "total_steps": 200}
    with open(log, "a") as f:
        f.write(json.dumps({**base, "ts": 1, "event": "progress", "step": 10}) + "\n")
    assert w.poll().new_results  # a new segment (0)
    with open(log, "a") as f:
        f.write(json.dumps({**base, "ts": 2, "event": "progress", "step": 20}) + "\n")
    p = w.poll()
    assert p.changed and not p.new_results  # same segment: nothing new in the store
    with open(log, "a") as f:
        f.write(json.dumps({**base, "ts": 3, "event": "progress", "step": 60}) + "\n")
    assert w.poll().new_results


def test_summaries_use_store_labels_and_skip_nan(tiny_root):
    data = read_summaries(tiny_root / "store" / "tiny.zarr")
    assert data.networks == ["chaotic", "calm"]
    lam = data.series["lyapunov_per_step"]
    assert lam.long_name == "local Lyapunov exponent per step" and lam.units == "1"
    assert lam.mean[0][:-1].mean() > 0 > lam.mean[1][:-1].mean()  # g = 2 chaotic, g = 0.5 contracting
    assert data.series["chaos_length"].values[0].size == 8
    assert data.series["deviation"].units.startswith("log10")
    # every plot's x label says its unit, steps (the coordinates' long_names alone, "step t", did not)
    assert {k: s.x_label for k, s in data.series.items()} == {
        "lyapunov_per_step": "interval start t (steps)", "effective_dimension": "step t (steps)",
        "deviation": "step t (steps)", "chaos_length": "transient chaos length (steps)"}
    assert "spec_toml" in internal(data.attrs)


def test_fmt_duration():
    assert [fmt_duration(x) for x in (None, 0.44, 12, 185, 3725)] == ["-", "0.4s", "12s", "3m05s", "1h02m"]


# ---------------------------------------------------------------------- the app


async def test_finished_store_table_plots_and_keys(done_root, monkeypatch):
    monkeypatch.chdir(done_root)
    app = MonitorApp("store/tiny.zarr", clock=lambda: FROZEN)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, loaded(app))
        table = app.query_one(TaskTable)
        assert table.row_count == 8
        assert set(table_states(app).values()) == {"done"}
        header = static_text(app.query_one("#run-header"))
        assert "done" in header and "100.0%" in header and "8/8 done" in header
        # plots: variables and networks are a key away
        assert app.variable == "lyapunov_per_step" and app.network is None
        await pilot.press("2")
        assert app.query_one("TabbedContent").active == "plots"
        plot = app.query_one(SummaryPlot)
        assert plot.series.name == "lyapunov_per_step"
        await pilot.press("v")
        assert app.variable == "effective_dimension" and plot.series.name == "effective_dimension"
        await pilot.press("v", "v")
        assert app.variable == "chaos_length"
        await pilot.press("v")
        assert app.variable == "lyapunov_per_step"
        await pilot.press("V")
        assert app.variable == "chaos_length"
        await pilot.press("n")
        assert app.network == 0 and plot.network == 0
        assert "chaotic" in static_text(app.query_one("#plot-bar"))
        await pilot.press("n")
        assert app.network == 1
        await pilot.press("n")
        assert app.network is None
        await pilot.press("N")
        assert app.network == 1
        await pilot.press("a")
        assert app.network is None
        # store details: dims, variables, provenance
        await pilot.press("3")
        details = static_text(app.query_one(StoreDetails).query_one("#details-text"))
        for word in ("dimensions", "lyapunov_per_step", "local Lyapunov exponent per step", "provenance",
                     "versions", "numpy", "[experiment]", "device"):
            assert word in details
        # help and theme
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        assert app.theme == "textual-dark"
        await pilot.press("t")
        assert app.theme == "textual-light"
        await pilot.press("t")
        assert app.theme == "textual-dark"
        await pilot.press("1")
        assert app.query_one("TabbedContent").active == "tasks"
        await pilot.press("q")
    assert app.return_code == 0


async def test_a_change_while_the_store_is_read_is_read_again(done_root, monkeypatch):
    """A store event during a read is not dropped: the read under way finishes, then the store is read once more."""
    monkeypatch.chdir(done_root)
    app = MonitorApp("store/tiny.zarr", clock=lambda: FROZEN)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, loaded(app))
        applied, apply_data = [], app._apply_data
        app._apply_data = lambda data, error: (applied.append(error), apply_data(data, error))
        app.load_data()
        app.load_data()  # before the first read can report: it runs on this loop, which the test holds
        assert app._reading and app._reread
        await settle(pilot, lambda: len(applied) == 2 and not app._reading)
        assert applied == [None, None] and not app._reread and app.data is not None


async def test_monitor_from_spec_path(done_root, monkeypatch):
    monkeypatch.chdir(done_root)
    from .conftest import write_spec

    write_spec(done_root, "tiny")
    app = MonitorApp("tiny.toml")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, loaded(app))
        assert app.watcher.path.as_posix() == "store/tiny.zarr"
        assert app.run_state.state == "done"


async def test_failed_task_shows_its_error(failed_root, monkeypatch):
    monkeypatch.chdir(failed_root)
    app = MonitorApp("store/tiny.zarr", clock=lambda: FROZEN)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, loaded(app))
        states = [t.state for t in app.run_state.tasks]
        # network 1's pass failed (its two step measures); what derives from it and its not-applicable task wait
        assert states.count("failed") == 2 and states.count("done") == 4 and states.count("pending") == 2
        assert app.run_state.state == "failed"
        assert "FloatingPointError" not in static_text(app.query_one(TaskDetail))
        failed_row = next(i for i, t in enumerate(app.run_state.tasks) if t.state == "failed")
        table = app.query_one(TaskTable)
        for _ in range(failed_row):
            await pilot.press("down")
        await pilot.pause()
        detail = static_text(app.query_one(TaskDetail))
        assert "failed" in detail and "FloatingPointError: state diverged at step 121 (test)" in detail
        assert table.selected_id() == app.run_state.tasks[failed_row].id
        assert "failed" in static_text(app.query_one("#run-header"))


async def test_live_run_in_another_process(live_run, monkeypatch):
    root, proc = live_run
    monkeypatch.chdir(root)
    app = MonitorApp("store/live.zarr", poll_s=0.2)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, lambda: app.run_state is not None and app.run_state.state == "running", 120)
        # a task just started has no rate yet (not one step over microseconds); a second later it has
        await settle(pilot, lambda: any(t.state == "running" and t.steps_per_s for t in app.run_state.tasks), 120)
        running = [t for t in app.run_state.tasks if t.state == "running" and t.steps_per_s]
        assert running and all(0 < t.step < t.steps for t in running)
        assert running[0].eta_s is not None
        assert 0 < app.run_state.fraction < 1 and app.run_state.eta_s is not None
        assert "running" in static_text(app.query_one("#run-header"))
        step = running[0].step
        await settle(pilot, lambda: app.run_state.task(running[0].id).step > step, 120)
        # the plot shows what the store holds so far (NaN beyond is skipped)
        await settle(pilot, lambda: app.data is not None and app.data.series["lyapunov_per_step"].has_data(0), 120)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130
        await settle(pilot, lambda: app.run_state.state == "interrupted", 120)
        assert any(t.state == "interrupted" for t in app.run_state.tasks)
        await pilot.press("q")


def test_apply_with_monitor_stops_apply_with_sigint(tmp_path, monkeypatch, capsys):
    from .conftest import write_spec

    write_spec(tmp_path, "live", steps=400_000, every=500)
    monkeypatch.chdir(tmp_path)
    seen = {}

    def fake_run(self):  # the user watches until a task runs, then presses q
        deadline = time.monotonic() + 300  # bounds a failure only
        while time.monotonic() < deadline:
            self.watcher.poll()
            st = self.watcher.status()
            if st["state"] == "running" and any(t.get("step") for t in st["tasks"]):
                seen["running"], seen["store"] = True, st["store"]
                break
            time.sleep(0.1)

    monkeypatch.setattr(MonitorApp, "run", fake_run)
    # run with an override, as `runner apply live.toml --set ... --monitor` does: the monitor watches the
    # store the overridden spec writes, and the hint to resume keeps the override
    other = tmp_path / "store" / "other.zarr"
    code = app_module.run_apply_with_monitor(tmp_path / "live.toml", overrides=['experiment.name="other"'], store=other)
    assert seen.get("running") and code == 130 and seen["store"] == str(other)
    err = capsys.readouterr().err
    assert "SIGINT" in err and "resume" in err and "--set 'experiment.name=\"other\"'" in err
    assert load_status(other)["state"] == "interrupted" and not (tmp_path / "store" / "live.zarr").exists()


def test_fold_status_accepts_a_liveness_probe(done_root):
    events = list(EventReader(done_root / "store" / "tiny.runner" / "events.jsonl").read_new())
    started = [e for e in events if e["event"] not in ("run_finished", "task_done")]
    st = fold_status(done_root / "store" / "tiny.zarr", started, {}, is_alive=lambda pid: True)
    assert st["state"] == "running"
    st = fold_status(done_root / "store" / "tiny.zarr", started, {}, is_alive=lambda pid: False)
    assert st["state"] == "interrupted"


async def test_monitor_waits_for_a_store_that_does_not_exist_yet(tmp_path, monkeypatch):
    """`runner monitor store/x.zarr` before the apply starts: it waits, then shows the run."""
    import subprocess

    from .conftest import apply_cmd, env, write_spec

    monkeypatch.chdir(tmp_path)
    app = MonitorApp("store/later.zarr", poll_s=0.2)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, lambda: app.run_state is not None)
        assert app.run_state.state == "absent" and "waiting" in static_text(app.query_one("#run-header"))
        spec = write_spec(tmp_path, "later")
        subprocess.run(apply_cmd(spec), cwd=tmp_path, env=env(), check=True, capture_output=True, timeout=300)
        await settle(pilot, lambda: app.run_state.state == "done" and app.data is not None, 60)
        assert len(app.run_state.tasks) == 8
        await pilot.press("q")


def test_a_run_that_is_preparing_is_shown_from_its_first_second(done_root):
    """apply writes run_preparing as soon as it holds the lock: status and the monitor say so while
    inputs are drawn and models built (before the run's tasks are known)."""
    import os

    log = done_root / "store" / "tiny.runner" / "events.jsonl"
    events = list(EventReader(log).read_new())
    new = {"ts": events[-1]["ts"] + 1, "event": "run_preparing", "run": "newrun01", "pid": os.getpid(),
           "stage": "drawing inputs"}
    st = fold_status(done_root / "store" / "tiny.zarr", [*events, new], {}, is_alive=lambda pid: True)
    assert st["state"] == "preparing" and "drawing inputs" in st["message"]
    st = fold_status(done_root / "store" / "tiny.zarr", [*events, new], {}, is_alive=lambda pid: False)
    assert st["state"] == "interrupted"


def test_a_training_run_has_a_header_eta_from_its_train_tasks():
    from runner.tui.state import TaskRow

    rs = RunState("store/t.zarr", state="running", started=0.0)
    rs.tasks = [TaskRow("a", 0, "lm", "train", "train", "running", step=50, steps=200, steps_per_s=10.0),
                TaskRow("b", 0, "lm", "svcca", "svcca", "done", elapsed_s=2.0),
                TaskRow("c", 0, "lm", "svcca", "svcca", "pending")]
    rs._progress(now=10.0)
    assert rs.fraction == 50 / 200  # by steps
    assert rs.eta_s == (200 - 50) / 10.0 + 1 * 2.0  # the steps left, and the measure task left at the mean so far


def test_the_header_eta_counts_the_groups_left_not_their_tasks():
    """Measures of one checkpoint run as one group and share its seconds: four tasks of a group left
    cost one group's time, not four."""
    from runner.tui.state import TaskRow

    def measures(epoch, state, seconds=None):
        return [TaskRow(f"{k}{epoch}", 0, "tj", k, k, state, elapsed_s=seconds, group=f"measures:0:{epoch}")
                for k in ("distances", "entropy", "experts", "isomap")]

    rs = RunState("store/t.zarr", state="running", started=0.0)
    rs.tasks = [TaskRow("t", 0, "tj", "train", "train", "done", steps=3, elapsed_s=1.0),
                *measures(0, "done", 0.5), *measures(1, "done", 0.7), *measures(2, "pending"), *measures(3, "pending")]
    rs._progress(now=10.0)
    assert rs.eta_s == pytest.approx(2 * (0.5 + 0.7) / 2)
    rs.tasks = [TaskRow("t", 0, "tj", "train", "train", "running", step=1, steps=3, steps_per_s=0.5),
                *measures(0, "pending"), *measures(1, "pending")]
    rs._progress(now=10.0)
    assert rs.eta_s == pytest.approx(2 / 0.5)  # no group has run yet: the steps only



async def test_q_quits_while_the_help_is_open(done_root, monkeypatch):
    """The help lists q as quit; it quits from the help too (escape and ? close the help)."""
    monkeypatch.chdir(done_root)
    app = MonitorApp("store/tiny.zarr", clock=lambda: FROZEN)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, loaded(app))
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("q")
        await settle(pilot, lambda: not app.is_running, timeout=10)
    assert app.return_code == 0


async def test_ctrl_c_quits_as_q_does(done_root, monkeypatch):
    """Ctrl-C quits the monitor (with ``apply --monitor``, that stops the apply), not Textual's toast."""
    monkeypatch.chdir(done_root)
    app = MonitorApp("store/tiny.zarr", clock=lambda: FROZEN)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, loaded(app))
        await pilot.press("question_mark")  # from the help too
        await pilot.press("ctrl+c")
        await settle(pilot, lambda: not app.is_running, timeout=10)
    assert app.return_code == 0
