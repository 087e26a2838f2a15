"""A measure, a model family and a study, each defined entirely in a test file (tests/plugins/), plan,
apply, resume after ``kill -9``, show their results and appear in the monitor, through the real
CLI, without any engine code knowing them (docs/extending.md)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import xarray as xr

from runner.run.provenance import read_full
from runner.tui.reader import read_summaries
from tests.runner import launcher
from tests.runner.helpers import cli_env, write_spec

ROOT = Path(__file__).resolve().parents[3]
PLUGINS = "tests.plugins.toy_measure,tests.plugins.toy_map,tests.plugins.toy_study"

MAPS = """
[experiment]
name = "plugins"

[[model]]
name = "rotation"
source = "map:rotation"
params = { angle = 0.3 }

[[model]]
name = "tanh"
source = "map:tanh"
params = { g = 0.5, n = 16 }

[input]
samples = 16

[dynamics]
steps = 3000
precision = "fp64"
checkpoint_every = 500

[[measure]]
kind = "lyapunov"
k = 1e-8
tau = 1

[[measure]]
kind = "state_rms"
every = 10
"""

WALK = """
[experiment]
name = "walks"
seed = 3

[walk]
walkers = 20000
steps = 400
segment = 100

[[measure]]
kind = "msd"
"""


def runner(*args, cwd: Path, **env) -> subprocess.CompletedProcess:
    return launcher.run(args, cwd=cwd, timeout=600,
                        env=cli_env(cwd, **{"TRANSIENT_PLUGINS": PLUGINS, "PYTHONPATH": str(ROOT), **env}))


def killed_and_resumed(root: Path, text: str, store: str, stall: str, plugins: str = PLUGINS) -> xr.Dataset:
    """Apply ``text`` in ``root``, kill -9 it where the stall hook pauses it, apply again; the store."""
    spec = write_spec(root, text)
    proc = launcher.popen(["apply", str(spec), "-q"], cwd=root,
                          env=cli_env(root, TRANSIENT_PLUGINS=plugins, PYTHONPATH=str(ROOT), RUNNER_TEST_STALL=stall))
    state = root / "store" / f"{store}.runner"  # the marker: there, or in a checkpoint folder under it (the kit's loop)
    deadline = time.monotonic() + 300  # bounds a failure only
    while (marker := next(state.glob("**/stalled"), None)) is None:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    marker.unlink()
    resumed = runner("apply", spec, cwd=root, TRANSIENT_PLUGINS=plugins)
    assert resumed.returncode == 0, resumed.stderr
    events = [json.loads(x) for x in (state / "events.jsonl").read_text().splitlines()]
    assert max(e.get("resumed_from", 0) for e in events if e["event"] == "task_done") > 0, "restarted from scratch"
    return xr.open_zarr(root / "store" / f"{store}.zarr").load()


def test_a_measure_and_a_model_family_from_plugins(tmp_path):
    ref = tmp_path / "ref"
    ref.mkdir()
    spec = write_spec(ref, MAPS)
    plan = runner("plan", spec, cwd=ref)
    assert plan.returncode == 0, plan.stderr
    assert "state_rms" in plan.stdout and "map:rotation" in plan.stdout
    assert runner("apply", spec, cwd=ref).returncode == 0
    ds = xr.open_zarr(ref / "store/plugins.zarr").load()
    # known answers: a rotation keeps every norm and has Lyapunov exponent 0
    np.testing.assert_allclose(ds.state_rms.sel(network="rotation"), 1 / math.sqrt(2), rtol=1e-12)
    assert abs(float(ds.lyapunov_per_step.sel(network="rotation").mean())) < 1e-9
    assert float(ds.lyapunov_per_step.sel(network="tanh").mean()) < 0
    # the plugin measure has no citation of its own: it cites none, not the study's paper
    assert "reference" not in ds.state_rms.attrs and "Inoue" in ds.lyapunov_per_step.attrs["reference"]
    # the recorded code identity covers the plugin's source file, wherever it lives
    plugin_file = ROOT / "tests/plugins/toy_measure.py"
    code = read_full(ref / "store/plugins.zarr")["code_files"]  # the file list beside the store
    assert code["tests/plugins/toy_measure.py"] == hashlib.sha256(plugin_file.read_bytes()).hexdigest()
    show = runner("show", ref / "store/plugins.zarr", cwd=ref)
    assert "mean state RMS" in show.stdout and "rotation=0.7071" in show.stdout
    assert "state_rms" in read_summaries(ref / "store/plugins.zarr").series  # the monitor plots it

    resumed = killed_and_resumed(tmp_path, MAPS, "plugins", stall="tanh@1700")
    xr.testing.assert_equal(resumed.drop_attrs(), ds.drop_attrs())


def test_a_study_from_a_plugin(tmp_path):
    ref = tmp_path / "ref"
    ref.mkdir()
    spec = write_spec(ref, WALK)
    plan = runner("plan", spec, "--json", cwd=ref)
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["study"] == "walk"  # inferred from its [walk] table
    apply = runner("apply", spec, cwd=ref)
    assert apply.returncode == 0, apply.stderr
    assert "nothing to do" in runner("apply", spec, cwd=ref).stdout
    ds = xr.open_zarr(ref / "store/walks.zarr").load()
    t = ds.msd_step.values
    # known answer: E[x_t^2] = t; the standard error of the mean of x_t^2 is t sqrt(2 / walkers)
    assert (np.abs(ds.msd.sel(network="walkers").values - t) < 5 * t * math.sqrt(2 / 20000)).all()
    show = runner("show", ref / "store/walks.zarr", cwd=ref)
    assert "MSD at the end" in show.stdout
    status = json.loads(runner("status", spec, "--json", cwd=ref).stdout)
    assert status["state"] == "done"
    assert "msd" in read_summaries(ref / "store/walks.zarr").series

    resumed = killed_and_resumed(tmp_path, WALK, "walks", stall="walkers@250")
    xr.testing.assert_equal(resumed.drop_attrs(), ds.drop_attrs())


CHAIN = """
[experiment]
name = "chain"
study = "chain"
seed = 5

[chain]
epochs = 3
steps_per_epoch = 10

[[measure]]
kind = "svcca"
layers = ["hidden", "act"]

[[measure]]
kind = "entropy"

[[measure]]
kind = "distances"
"""


def test_a_checkpointed_study_from_a_plugin_gets_the_kits_measures_for_its_model_loss_and_data(tmp_path):
    """tests/plugins/toy_checkpointed.py: at most 90 lines (a model, its loss and data); the kit plans, trains,
    checkpoints and measures it: SVCCA, entropy and layer distances across its checkpoints, read through the
    hook points of the model's named children. A checkpoint compared with itself has SVCCA, PWCCA and CKA 1;
    the embedding's distances relative to the embedding's are 1."""
    source = ROOT / "tests" / "plugins" / "toy_checkpointed.py"
    assert len(source.read_text().splitlines()) <= 90
    ref = tmp_path / "ref"
    ref.mkdir()
    spec = write_spec(ref, CHAIN)
    out = launcher.run(["apply", str(spec), "-q"], cwd=ref, timeout=600,
                       env=cli_env(ref, TRANSIENT_PLUGINS="tests.plugins.toy_checkpointed", PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr
    checked = launcher.run(["verify", str(ref / "store" / "chain.zarr")], cwd=ref, timeout=600,
                           env=cli_env(ref, TRANSIENT_PLUGINS="tests.plugins.toy_checkpointed", PYTHONPATH=str(ROOT)))
    assert checked.returncode == 0, checked.stdout  # one writing task per chunk: a fresh store verifies whole
    ds = xr.open_zarr(ref / "store" / "chain.zarr").load().sel(network="chain")
    assert list(ds["step"].values) == [0, 10, 20, 30]  # the initial network and each epoch end
    assert list(ds["layer"].values) == ["embedding", "hidden", "act", "logits"]
    compared = ds.sel(layer=["hidden", "act"])
    for stat in ("svcca", "pwcca", "cka"):
        np.testing.assert_allclose(compared[f"{stat}_final"].isel(checkpoint=-1).values, 1.0, atol=1e-6)
        assert np.all((compared[f"{stat}_final"].values > 0) & (compared[f"{stat}_final"].values <= 1 + 1e-6)), stat
    assert np.all(compared["cka_final"].isel(checkpoint=0).values < 0.999)  # training moved the layers
    assert np.isfinite(ds["layer_entropy"].values).all() and ds["layer_entropy"].shape == (4, 4)
    quantiles = ds["entropy_quantile"].values
    assert np.all(np.diff(quantiles, axis=-1) >= 0)  # quantiles in order
    np.testing.assert_allclose(ds["euclidean_ratio"].sel(layer="embedding").values, 1.0)
    assert np.all(ds["pair_euclidean"].sel(layer="hidden").values >= 0)
    assert np.isfinite(ds["cosine_distance_mean"].values).all()
    assert ds.train_loss.values[-1] < ds.train_loss.values[0]  # gradient descent on the cross-entropy: it falls

    resumed = killed_and_resumed(tmp_path, CHAIN, "chain", stall="chain@15", plugins="tests.plugins.toy_checkpointed")
    xr.testing.assert_equal(resumed.drop_attrs(), xr.open_zarr(ref / "store" / "chain.zarr").load().drop_attrs())


def events_of(store_runner: Path) -> list[dict]:
    return [json.loads(x) for x in (store_runner / "events.jsonl").read_text().splitlines()]


def test_an_executor_from_a_plugin(tmp_path):
    """tests/plugins/toy_executor.py runs groups in a pool of threads, only submitting and polling:
    ``runner apply --executor threads`` writes the store the local executor writes, and the engine
    records every task of it."""
    stores = {}
    for name, how in (("local", ()), ("threads", ("--executor", "threads"))):
        root = tmp_path / name
        root.mkdir()
        spec = write_spec(root, MAPS)
        out = runner("apply", spec, "-q", *how, cwd=root, TRANSIENT_PLUGINS=PLUGINS + ",tests.plugins.toy_executor")
        assert out.returncode == 0, out.stderr
        stores[name] = xr.open_zarr(root / "store/plugins.zarr").load()
        events = events_of(root / "store/plugins.runner")
        finished = [e for e in events if e["event"] == "task_done"]
        ran_in = [e for e in events if e["event"] == "ran_in"]
        planned = json.loads(runner("plan", spec, "--json", cwd=root).stdout)["tasks"]
        assert {i for e in finished for i in e["task"]} == {t["id"] for t in planned}  # all recorded
        assert all(e["state"] == "done" for e in json.loads(runner("plan", spec, "--json", cwd=root).stdout)["tasks"])
        if name == "threads":
            assert len(ran_in) == len(finished) and all(e["thread"].startswith("toy-executor") for e in ran_in)
        else:
            assert ran_in == []
    xr.testing.assert_equal(stores["threads"].drop_attrs(), stores["local"].drop_attrs())


def installed_package(site: Path, entry_points: str) -> Path:
    """A package installed in ``site`` as pip would (its .dist-info), declaring ``entry_points``."""
    dist = site / "toy_executors-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-executors\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(entry_points)
    return site


def test_an_executor_from_an_installed_packages_entry_point(tmp_path):
    """An executor found only through the ``transient.executors`` entry-point group (no plugin module
    registers it) is offered by name and runs the spec."""
    site = installed_package(tmp_path / "site", "[transient.executors]\npool = tests.plugins.toy_executor:ThreadExecutor\n")
    env = {"TRANSIENT_PLUGINS": "tests.plugins.toy_study", "PYTHONPATH": f"{ROOT}{os.pathsep}{site}"}
    spec = write_spec(tmp_path, WALK)
    unknown = runner("apply", spec, "--executor", "nope", cwd=tmp_path, **env)
    assert unknown.returncode == 2 and "pool" in unknown.stderr, unknown.stderr
    out = runner("apply", spec, "-q", "--executor", "pool", cwd=tmp_path, **env)
    assert out.returncode == 0, out.stderr
    events = events_of(tmp_path / "store/walks.runner")
    assert [e["thread"].startswith("toy-executor") for e in events if e["event"] == "ran_in"] == [True]
    ds = xr.open_zarr(tmp_path / "store/walks.zarr").load()
    t = ds.msd_step.values  # the known answer, as in test_a_study_from_a_plugin
    assert (np.abs(ds.msd.sel(network="walkers").values - t) < 5 * t * math.sqrt(2 / 20000)).all()


def test_a_figure_recipe_from_a_plugin(tmp_path):
    """tests/plugins/toy_figures.py adds a figure to the walk study without touching it: ``runner
    figures`` draws it from the store, and without the plugin the store gets only fallback plots."""
    spec = write_spec(tmp_path, WALK)
    assert runner("apply", spec, "-q", cwd=tmp_path, TRANSIENT_PLUGINS="tests.plugins.toy_study").returncode == 0
    store = tmp_path / "store/walks.zarr"
    without = runner("figures", store, "--json", "--out", tmp_path / "without", cwd=tmp_path,
                     TRANSIENT_PLUGINS="tests.plugins.toy_study")
    assert without.returncode == 0, without.stderr
    assert "walk_msd" not in {d["id"] for d in json.loads(without.stdout)["figures"]}
    drawn = runner("figures", store, "--json", "--out", tmp_path / "with", cwd=tmp_path,
                   TRANSIENT_PLUGINS="tests.plugins.toy_study,tests.plugins.toy_figures")
    assert drawn.returncode == 0, drawn.stderr
    (fig,) = [d for d in json.loads(drawn.stdout)["figures"] if d["id"] == "walk_msd"]
    assert fig["status"] == "drawn" and fig["reads"] == ["msd"]
    assert {Path(f).suffix for f in fig["files"]} == {".png", ".svg"}
    assert all((tmp_path / "with" / f).stat().st_size > 0 for f in fig["files"])
    manifest = json.loads((tmp_path / "with" / "figures.json").read_text())
    assert manifest["study"] == "walk" and not manifest["fallback"]
