"""The plots view on a training store written by a real tiny ``runner apply`` (2 LSTM LMs, 2 epochs)."""

from __future__ import annotations

import json

import numpy as np

from runner.tui.app import MonitorApp
from runner.tui.reader import StoreWatcher, read_summaries
from runner.tui.curves import lines
from runner.tui.widgets import CurvePlot, SummaryPlot

from .conftest import FROZEN
from .test_monitor import loaded, settle, static_text


def test_training_store_is_read_with_its_labels(train_root):
    data = read_summaries(train_root / "store" / "train.zarr")
    assert data.series == {} and data.plots == list(data.curves)  # curves only: no summaries
    assert data.networks == ["lm", "lm_b"]  # the network index
    assert list(data.curves)[:9] == ["train_loss", "val_loss", "val_perplexity", "svcca_final", "pwcca_final",
                                     "cka_final", "chi_mean:activation", "chi_mean:gradient", "lca"]
    loss = data.curves["train_loss"]
    # the x label says the unit of a count of steps or epochs (the name alone, "optimizer step", did not)
    assert (loss.long_name, loss.units, loss.x_label) == ("training loss (nats per token)", "1",
                                                          "optimizer step (steps)")
    assert np.isfinite(loss.y).all() and loss.y.shape == (2, loss.x.size)
    assert loss.overlay.x.tolist() == [20.0, 40.0]  # validation loss at each epoch's last step
    assert data.curves["val_loss"].x_label == "epoch (epochs)"
    sv = data.curves["svcca_final"]
    assert sv.x.tolist() == [0.0, 5.0, 20.0, 40.0]  # the checkpoints' `step`
    assert sv.groups == ["embedding", "lstm1", "lstm2", "logits"] and sv.long_name == "SVCCA vs final"
    assert np.allclose(sv.y[:, :3, -1], 1.0)  # the final checkpoint against itself
    lca = data.curves["lca"]
    assert lca.group_dim == "parameter group" and np.isnan(lca.y[:, :, 0]).all()  # no previous checkpoint


def test_lines_per_layer_or_per_network_and_nan_skipped(train_root):
    data = read_summaries(train_root / "store" / "train.zarr")
    lca = data.curves["lca"]
    what, ls = lines(lca, None, None)  # all networks, all groups: per group, first network with values
    assert what == "lm, per parameter group" and [ln.label for ln in ls] == lca.groups
    assert all(ln.x.tolist() == [5.0, 20.0, 40.0] for ln in ls)  # checkpoint 0 (NaN) skipped
    what, ls = lines(lca, None, "lstm1")
    assert what == "lstm1, per network" and [ln.label for ln in ls] == ["lm", "lm_b"]
    what, ls = lines(lca, 1, "lstm1")
    assert what == "lm_b, lstm1" and len(ls) == 1
    what, ls = lines(data.curves["train_loss"], 1, None)
    assert [ln.label for ln in ls] == ["lm_b", "lm_b validation loss (nats per token)"]
    sv = data.curves["svcca_final"]
    sv.y[:, :, 2:] = np.nan  # unfinished checkpoints
    _, ls = lines(sv, 0, None)
    assert [ln.x.tolist() for ln in ls[:3]] == [[0.0, 5.0]] * 3


def test_watcher_rereads_on_checkpoints_not_progress(train_done, monkeypatch):
    monkeypatch.chdir(train_done)
    w = StoreWatcher("store/train.zarr")
    assert w.poll().new_results and w.segment is None  # nothing plotted per step
    log = train_done / "store" / "train.runner" / "events.jsonl"
    base = {"run": "x", "pid": 1, "network": 0, "task": ["a"]}
    with open(log, "a") as f:
        for i, step in enumerate((3, 9, 17)):
            f.write(json.dumps({**base, "ts": i, "event": "progress", "step": step, "total_steps": 40}) + "\n")
    p = w.poll()
    assert p.changed and not p.new_results
    with open(log, "a") as f:
        f.write(json.dumps({**base, "ts": 5, "event": "checkpoint", "checkpoint": 2, "step": 20}) + "\n")
    assert w.poll().new_results


async def test_training_plots_and_keys(train_done, monkeypatch):
    monkeypatch.chdir(train_done)
    app = MonitorApp("store/train.zarr", clock=lambda: FROZEN)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, loaded(app))
        await pilot.press("2")
        plot = app.query_one(CurvePlot)
        assert plot.display and not app.query_one(SummaryPlot).display
        assert app.variable == "train_loss" and plot.curves.key == "train_loss"
        bar = lambda: static_text(app.query_one("#plot-bar"))  # noqa: E731
        assert "train_loss" in bar() and "lm_b" in bar()
        await pilot.press("v")
        assert plot.curves.key == "val_loss"
        await pilot.press("v", "v")
        assert plot.curves.key == "svcca_final" and plot.group is None
        assert "layer: all" in bar()
        await pilot.press("l")
        assert app.layer == "embedding" and plot.group == "embedding" and "layer: embedding" in bar()
        await pilot.press("L", "L")
        assert app.layer == "logits"
        await pilot.press("n")
        assert app.network == 0 and plot.network == 0
        await pilot.press("v", "v", "v", "v")
        assert plot.curves.key == "chi_mean:gradient" and plot.group == "logits"
        await pilot.press("v")  # lca: groups are parameter groups; "logits" is not one of them
        assert plot.curves.key == "lca" and plot.group is None and "parameter group: all" in bar()
        await pilot.press("a")
        assert app.network is None and plot.network is None
        n = len(app.data.curves)
        await pilot.press(*["v"] * (n - 8))
        assert app.variable == "train_loss"
        await pilot.press("V")
        assert app.variable == list(app.data.curves)[-1]
        await pilot.press("q")
    assert app.return_code == 0
