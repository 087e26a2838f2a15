"""SVG snapshots of the monitor's main views (pytest-textual-snapshot; ``--snapshot-update`` after
eyeballing the report). Kept apart: pytest-textual-snapshot pins syrupy 4.8 and so pytest < 9.

Deterministic: the store comes from a real tiny run, then its timestamps, durations and device are
fixed (``normalise``) and the monitor's clock is frozen.
"""

from __future__ import annotations

import time

import pytest

from runner.tui.app import MonitorApp

from .conftest import FROZEN, normalise


def _app(root, monkeypatch) -> MonitorApp:
    normalise(root)
    monkeypatch.chdir(root)
    return MonitorApp("store/tiny.zarr", clock=lambda: FROZEN, poll_s=3600)


async def _loaded(pilot) -> None:
    app = pilot.app
    deadline = time.monotonic() + 10
    while app.run_state is None or app.data is None or app._reading:
        assert time.monotonic() < deadline
        await pilot.pause(0.05)
    await pilot.pause()


def test_tasks_80x24(done_root, monkeypatch, snap_compare):
    assert snap_compare(_app(done_root, monkeypatch), terminal_size=(80, 24), run_before=_loaded)


def test_failed_task_selected_80x24(failed_root, monkeypatch, snap_compare):
    assert snap_compare(_app(failed_root, monkeypatch), terminal_size=(80, 24), run_before=_loaded,
                        press=["down"] * 4)


def test_plot_all_networks_80x24(done_root, monkeypatch, snap_compare):
    assert snap_compare(_app(done_root, monkeypatch), terminal_size=(80, 24), run_before=_loaded, press=["2"])


@pytest.mark.parametrize("keys", [["v", "v", "n"], ["V", "a"]], ids=["deviation-one-network", "chaos-histogram"])
def test_plots_120x40(done_root, monkeypatch, snap_compare, keys):
    assert snap_compare(_app(done_root, monkeypatch), terminal_size=(120, 40), run_before=_loaded, press=keys)


def test_help_80x24(done_root, monkeypatch, snap_compare):
    assert snap_compare(_app(done_root, monkeypatch), terminal_size=(80, 24), run_before=_loaded, press=["?"])


def test_light_theme_tasks_120x40(failed_root, monkeypatch, snap_compare):
    assert snap_compare(_app(failed_root, monkeypatch), terminal_size=(120, 40), run_before=_loaded, press=["t"])


def test_training_svcca_80x24(train_done, monkeypatch, snap_compare):
    normalise(train_done, "train")
    monkeypatch.chdir(train_done)
    app = MonitorApp("store/train.zarr", clock=lambda: FROZEN, poll_s=3600)
    assert snap_compare(app, terminal_size=(80, 24), run_before=_loaded, press=["2", "v", "v", "v"])
