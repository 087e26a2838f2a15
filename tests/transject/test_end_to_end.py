"""The tiny TransJect spec through the real CLI: its results, show's table, figures, the monitor,
kill -9 and resume, and measuring a saved checkpoint without training."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest
import xarray as xr

from runner.run.apply import apply
from runner.run.prepare import prepare
from runner.cli import main
from runner.studies.transject.data.classification import labelled_splits
from runner.plugin.recipes import recipes
from runner.read.status import load_status
from runner.storage.store import read_tasks

from .conftest import RUNNER, env, tiny_spec

TRANSJECT = ["transject-s0", "transject-s1"]


@pytest.fixture(scope="module")
def ds(tiny_store):
    return xr.open_zarr(tiny_store, consolidated=False)


def test_tiny_results_have_the_known_answers(ds):
    assert {"network", "checkpoint", "layer", "train_step", "training_epoch", "quantile", "pair", "expert",
            "encoder_layer", "token", "component"} <= set(ds.dims)
    assert list(ds["model"].values[:2]) == ["transject", "transject"] and list(ds["replicate"].values[:2]) == [0, 1]
    assert ds.sizes["checkpoint"] == 4 and ds.sizes["train_step"] == 3 * 6  # 96 examples / batch 16
    for name in ("train_loss", "test_loss", "test_accuracy", "accuracy", "euclidean_ratio", "layer_entropy",
                 "isomap", "pair_cosine"):
        assert np.isfinite(ds[name].values).all(), name
    assert ((ds.accuracy >= 0) & (ds.accuracy <= 1)).all() and (ds.stopped_epoch == 3).all()
    assert (ds.checkpoint_path.values != "").all() and (ds.export_path.values != "").all()
    best = ds.best_epoch.values
    np.testing.assert_allclose(ds.accuracy.values, [ds.test_accuracy.values[i, int(b) - 1] for i, b in enumerate(best)])
    # distances relative to layer 0 are 1 at layer 0; TransJect's per-layer ratio stays within Theorem 2's
    # (1 + 1/L)^2 and above App. A.7's (1 - 1/L)^2 (L = 2)
    np.testing.assert_allclose(ds.euclidean_ratio.sel(layer="embedding").values, 1.0)
    tj = ds.bound_quantile.sel(network=TRANSJECT, layer=["layer1", "layer2"])
    assert (tj.sel(quantile=1.0) <= 2.25).all() and (tj.sel(quantile=0.0) >= 0.25).all()
    assert np.isnan(ds.bound_quantile.sel(layer="embedding").values).all()
    # expert weights are convex (Eq. 5); the baselines have none, but heads with an entropy
    w = ds.expert_weight.sel(network=TRANSJECT)
    np.testing.assert_allclose(w.sum("expert").values, 1.0, rtol=1e-6)
    assert np.isnan(ds.expert_weight.sel(network="transformer-s0").values).all()
    assert np.isfinite(ds.expert_entropy.sel(network="transformer-s0").values).all()
    _, test = labelled_splits("listops:", seed=0, options=dict(train=96, test=32, max_depth=3, max_args=4,
                                                               min_length=4, max_length=40))
    assert list(ds.token_text.values) == test.tokens[0]  # the analysis sentence: ListOps' first test sequence


def test_show_prints_the_accuracy_table(tiny_store, capsys):
    assert main(["show", str(tiny_store)]) == 0
    out = capsys.readouterr().out
    table = out[out.index("test accuracy, mean ± s.d. over seeds (Tables 2-3):"):].splitlines()
    ds = xr.open_zarr(tiny_store, consolidated=False)
    for model, line in zip(("transject", "entropic-transject", "transformer", "transformer-rezero"), table[2:6]):
        acc = ds.accuracy.values[ds["model"].values == model]
        assert line.split()[0] == model and line.split()[-1] == "2"
        assert f"{acc.mean():8.4f} ± {acc.std(ddof=1):7.4f}" in line


def test_figures_are_drawn_from_the_stored_values(tiny_store, tmp_path):
    assert main(["figures", str(tiny_store), "--out", str(tmp_path)]) == 0
    manifest = json.loads((tmp_path / "figures.json").read_text())
    drawn = {f["id"]: f for f in manifest["figures"]}
    assert set(drawn) == set(recipes("transject")) == {"fig1", "fig4", "fig5a", "fig5b", "fig5c", "fig6",
                                                     "ch4_fig3"}  # SVCCA's, the kit's figure
    assert all(f["status"] == "drawn" for f in drawn.values()), drawn
    assert all((tmp_path / f"{k}.png").stat().st_size > 0 for k in drawn)
    ds = xr.open_zarr(tiny_store, consolidated=False)
    fig = recipes("transject")["fig4"].draw(ds)
    # each model's losses: the mean over its seeds (it drew the first seed alone), n in the label
    train, test = ({line.get_gid(): line for line in ax.lines} for ax in fig.axes)
    seeds = ds.train_loss.sel(network=["transject-s0", "transject-s1"]).values
    np.testing.assert_allclose(train["transject"].get_ydata(), seeds.mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(test["transject"].get_ydata(),
                               ds.test_loss.sel(network=["transject-s0", "transject-s1"]).values.mean(axis=0), rtol=1e-6)
    # two seeds: the band is their range (runner.plugin.plotting.MIN_INTERVAL_N)
    assert train["transject"].get_label() == "transject (n=2, band: range)" and "mean over seeds" in \
        fig.axes[0].get_legend().get_title().get_text()
    fig = recipes("transject")["fig1"].draw(ds)
    first = fig.axes[0].lines[0]
    pair = str(ds.pair.values[0])
    np.testing.assert_array_equal(first.get_ydata(), ds.pair_euclidean.sel(network="transject-s0", pair=pair)
                                  .isel(checkpoint=-1).values)


def test_the_monitor_shows_the_curves(tiny_store):
    from runner.tui.reader import read_summaries

    data = read_summaries(tiny_store)
    assert data.curves and not data.series and data.networks[0] == "transject-s0"
    keys = list(data.curves)
    assert keys[:3] == ["train_loss", "test_loss", "test_accuracy"]
    assert {"euclidean_ratio", "cosine_distance_mean", "bound_max", "layer_entropy", "expert_weight:layer1"} <= set(keys)
    loss = data.curves["train_loss"]
    assert loss.y.shape == (8, 18) and np.isfinite(loss.y).all()
    assert loss.overlay is not None and loss.overlay.x.tolist() == [6.0, 12.0, 18.0]  # test loss at epoch ends
    ent = data.curves["layer_entropy"]
    assert ent.groups == ["embedding", "layer1", "layer2"] and ent.x.tolist() == [0.0, 6.0, 12.0, 18.0]


async def test_the_monitor_app_plots_them(tiny_store, monkeypatch):
    from runner.tui.app import MonitorApp
    from runner.tui.widgets import CurvePlot
    from tests.runner.tui.test_monitor import loaded, settle, static_text

    monkeypatch.chdir(tiny_store.parent)
    app = MonitorApp(tiny_store.name, clock=lambda: 1_800_000_000.0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, loaded(app))
        await pilot.press("2")
        plot = app.query_one(CurvePlot)
        assert plot.display and plot.curves.key == "train_loss"
        await pilot.press("v")
        assert plot.curves.key == "test_loss"
        await pilot.press("v")
        assert plot.curves.key == "test_accuracy" and "test_accuracy" in static_text(app.query_one("#plot-bar"))
        await pilot.press("q")
    assert app.return_code == 0


@pytest.mark.slow
def test_kill_9_mid_training_then_resume_equals_the_uninterrupted_run(tiny_store, tmp_path):
    spec = tiny_spec(tmp_path, "killed")
    # epoch 2, step 9 of the fourth network (entropic draws and Adam state in flight); its last durable point
    # is the end of epoch 1
    proc = subprocess.Popen([*RUNNER, "apply", "-q", str(spec)], cwd=tmp_path,
                            env=env(RUNNER_TEST_STALL="entropic-transject-s1@9"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    marker = None
    deadline = time.monotonic() + 240  # bounds a failure only
    while marker is None and time.monotonic() < deadline:
        found = list((tmp_path / "killed.runner" / "checkpoints").glob("*/*/stalled"))
        marker = found[0] if found else None
        if marker is None:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
    assert marker is not None, "the run never reached the stall step"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    marker.unlink()

    tasks = load_status(spec)["tasks"]  # what `runner status` prints
    assert any(t["state"] == "done" for t in tasks) and any(t["state"] != "done" for t in tasks)
    resumed = subprocess.run([*RUNNER, "apply", "-q", str(spec)], cwd=tmp_path, env=env(), capture_output=True,
                             text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    out = apply(prepare(spec), quiet=True)  # finished: nothing runs
    assert not out.ran and not out.failed

    a = xr.open_zarr(tiny_store, consolidated=False)
    b = xr.open_zarr(tmp_path / "killed.zarr", consolidated=False)
    records = read_tasks(tmp_path / "killed.zarr")
    killed = next(r for r in records.values() if r["kind"] == "train" and r["network_label"] == "entropic-transject-s1")
    assert killed["resumed_from"] == 1
    for name in a.data_vars:
        if name in ("checkpoint_path", "export_path"):
            assert [p.replace(f"{tiny_store.stem}.", "killed.") for p in a[name].values.ravel()] == list(b[name].values.ravel())
            continue
        np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)


def test_a_saved_checkpoint_is_measured_without_training(tiny_store, tmp_path, monkeypatch):
    ds = xr.open_zarr(tiny_store, consolidated=False)
    export = tiny_store.parent / str(ds.export_path.sel(network="transject-s0").values)
    assert (export / "config.json").is_file() and (export / "vocab.json").is_file()
    text = tiny_spec(tmp_path, "saved").read_text()
    text = text[: text.index("[[model]]")] + f"""
[[model]]
name = "saved"
checkpoint = "{export}"

[[measure]]
kind = "distances"

[[measure]]
kind = "activation_bound"
max_pairs = 64
"""
    spec = tmp_path / "saved.toml"
    spec.write_text(text)
    p = prepare(spec)
    assert [t.kind for t in p.tasks] == ["load", "distances", "activation_bound"] and p.labels == ["saved"]
    out = apply(p, quiet=True)
    assert not out.failed and len(out.ran) == 3
    s = xr.open_zarr(tmp_path / "saved.zarr", consolidated=False)
    best = int(ds.best_epoch.sel(network="transject-s0"))
    assert float(s.accuracy.sel(network="saved")) == pytest.approx(float(ds.accuracy.sel(network="transject-s0")))
    assert not bool(s.trained.values[0]) and np.isnan(s.pair_euclidean.isel(checkpoint=1).values).all()
    np.testing.assert_allclose(s.pair_euclidean.sel(network="saved").isel(checkpoint=0).values,
                               ds.pair_euclidean.sel(network="transject-s0").isel(checkpoint=best).values, rtol=1e-5)
    np.testing.assert_allclose(s.bound_quantile.sel(network="saved").isel(checkpoint=0).values,
                               ds.bound_quantile.sel(network="transject-s0").isel(checkpoint=best).values, rtol=1e-5)

    # a hub checkpoint with the hub off: plan names it as an unmet requirement, apply refuses
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec.write_text(text.replace(f'checkpoint = "{export}"', 'checkpoint = "someone/transject-listops"'))
    p = prepare(spec)
    assert len(p.unmet) == 1 and "someone/transject-listops" in p.unmet[0]
    assert main(["apply", "-q", str(spec)]) == 66
