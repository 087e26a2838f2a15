"""Checkpoint suites measured by the training study, through the real CLI: tiny GPT-NeoX and BERT series saved
at several steps into folders laid out like hub revisions; plan, apply, kill -9 and resume, show, monitor;
an absent hub suite and a missing revision offline; bad suite specs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import torch
import pytest
import xarray as xr

from suite_helpers import STEPS, build_suite
from training_helpers import CORPUS, ROOT

sys.path.insert(0, str(ROOT))
from tests.runner.helpers import wait_for  # noqa: E402

RUNNER = [sys.executable, "-m", "runner.cli"]
LAYERS = '["embedding", "layer1", "layer2"]'


@pytest.fixture(scope="module")
def suites(tmp_path_factory):
    root = tmp_path_factory.mktemp("suites")
    build_suite(root / "neox", "gpt_neox")
    for seed in (0, 1):
        build_suite(root / f"bert_seed{seed}", "bert", seed=seed, steps=STEPS[:3])
    return root


def spec_text(suites, name: str, store, models: str, measures: str | None = None) -> str:
    return f"""[experiment]
name = "{name}"
seed = 0
store = "{store}"

[corpus]
source = "{CORPUS}"
min_count = 1
drop_rare_sentences = false
analysis_tokens = 150

{models}

{measures if measures is not None else MEASURES}
"""


NEOX = """[[model]]
name = "neox"
kind = "suite"
source = "{root}/neox"
"""
BERT = """[[model]]
name = "bert"
kind = "suite"
source = "{root}/bert_seed{seed}"
seeds = [0, 1]
revisions = ["step0", "step10", "step100"]
"""
MEASURES = f"""[[measure]]
kind = "svcca"
compare = "final"
layers = {LAYERS}

[[measure]]
kind = "svcca"
compare = "layers"
layers = {LAYERS}

[[measure]]
kind = "diagnostic"
tagsets = ["upos"]
layers = ["layer2"]
epochs = 2

[[measure]]
kind = "loss"

[[measure]]
kind = "sparsity"
layers = {LAYERS}
frequent_words = 5
min_count = 2
"""


def write_spec(tmp_path, suites, name: str, models: str, measures: str | None = None):
    path = tmp_path / f"{name}.toml"
    path.write_text(spec_text(suites, name, tmp_path / f"{name}.zarr", models.replace("{root}", str(suites)), measures))
    return path


def env(**extra) -> dict:
    e = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    e.pop("RUNNER_TEST_STALL", None)
    e.update(extra)
    return e


@pytest.fixture(scope="module")
def neox_store(suites, tmp_path_factory):
    """An uninterrupted run of the GPT-NeoX suite (the reference of the resumed one)."""
    from runner.run.apply import apply
    from runner.run.prepare import prepare

    tmp = tmp_path_factory.mktemp("neox_run")
    out = apply(prepare(write_spec(tmp, suites, "neox", NEOX)), quiet=True)
    assert not out.failed and len(out.ran) == 5 * len(STEPS)
    return tmp / "neox.zarr"


def test_plan_lists_the_series_and_nothing_to_fetch(suites, tmp_path, in_process):
    code, out, err = in_process("plan", write_spec(tmp_path, suites, "neox", NEOX))
    assert code == 0, err
    assert f"{len(STEPS)} checkpoints (revisions) at steps {list(STEPS)}" in out
    assert "downloads  0 checkpoint(s) to fetch, 0.00 GB; 4 local or cached" in out
    assert "layers     embedding, layer1, layer2" in out
    code, out, _ = in_process("plan", write_spec(tmp_path, suites, "neox", NEOX), "--json")
    plan = json.loads(out)
    assert plan["checkpoint_steps"] == list(STEPS) and plan["downloads"]["checkpoints"] == 0
    assert {t["kind"] for t in plan["tasks"]} == {"svcca", "diagnostic", "loss", "sparsity"}  # nothing to train


def test_measures_of_a_suite_have_the_known_answers(neox_store):
    ds = xr.open_zarr(neox_store)
    assert ds.step.values.tolist() == list(STEPS) and np.isnan(ds.epoch.values).all()
    assert ds.revision.values.tolist() == [f"step{s}" for s in STEPS]
    assert ds.layer.values.tolist() == ["embedding", "layer1", "layer2"]
    final = ds.sel(network="neox").isel(checkpoint=-1)
    for stat in ("svcca", "pwcca", "cka"):  # a checkpoint against itself: 1
        np.testing.assert_allclose(final[f"{stat}_final"].values, 1.0, atol=1e-6)
        diag = np.diagonal(ds[f"{stat}_layers"].values, axis1=-2, axis2=-1)
        np.testing.assert_allclose(diag, 1.0, atol=1e-6)
    cka = ds.cka_final.sel(network="neox").values
    assert ((cka > 0) & (cka <= 1 + 1e-9)).all()
    acc = ds.probe_accuracy.sel(layer="layer2").values
    assert np.isfinite(acc).all() and ((acc >= 0) & (acc <= 1)).all()
    assert np.isnan(ds.probe_accuracy.sel(layer="embedding").values).all()  # not asked for
    loss = ds.analysis_loss.values
    assert np.isfinite(loss).all() and (loss > 0).all()
    chi = ds.chi_mean.values  # ||v||_2 / ||v||_1 lies in [1/sqrt(d), 1], d = 16
    assert np.isfinite(chi).all() and ((chi >= 0.25) & (chi <= 1)).all()
    assert ds.word.size == 5 and np.isfinite(ds.rho_target.sel(word_class_split="all").values).all()


def test_seeds_are_replicates_and_compared_per_step(suites, tmp_path, in_process):
    measures = f"""[[measure]]
kind = "svcca"
compare = "seed"
networks = ["bert-s1"]
reference = ["bert-s0"]
layers = {LAYERS}

[[measure]]
kind = "loss"
"""
    spec = write_spec(tmp_path, suites, "bert", BERT, measures)
    code, out, err = in_process("apply", "-q", spec)
    assert code == 0, err
    ds = xr.open_zarr(tmp_path / "bert.zarr")
    assert ds.network.values.tolist() == ["bert-s0", "bert-s1"]
    assert ds.model.values.tolist() == ["bert", "bert"] and ds.replicate.values.tolist() == [0, 1]
    assert ds.source.values.tolist() == [str(suites / "bert_seed0"), str(suites / "bert_seed1")]
    cka = ds.cka_seed.sel(network="bert-s1").values
    assert np.isfinite(cka).all() and (cka < 0.999).all()  # two random inits are not the same network
    assert np.isnan(ds.cka_seed.sel(network="bert-s0").values).all()
    assert np.isfinite(ds.analysis_loss.values).all()  # the masked-LM loss of every seed and step


def test_kill_9_then_apply_resumes_and_equals_the_uninterrupted_run(suites, neox_store, tmp_path, in_process):
    spec = write_spec(tmp_path, suites, "killed", NEOX)
    marker = tmp_path / "killed.runner" / "stalled"
    proc = subprocess.Popen([*RUNNER, "apply", "-q", str(spec)], cwd=tmp_path, env=env(RUNNER_TEST_STALL="neox@100"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(marker.exists, proc, timeout=120)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    marker.unlink()
    code, out, err = in_process("status", "--json", spec)
    states = [t["state"] for t in json.loads(out)["tasks"]]
    assert states.count("done") == 10 and len(states) == 20  # steps 0 and 10 measured, 100 and 1000 not
    code, out, err = in_process("apply", "-q", spec)
    assert code == 0, err
    assert "ran 10 task(s), 10 already done" in out
    a, b = xr.open_zarr(neox_store), xr.open_zarr(tmp_path / "killed.zarr")
    assert set(a.data_vars) == set(b.data_vars)
    for name in a.data_vars:
        np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)


def test_show_and_the_monitor_read_a_suite_store(neox_store, in_process):
    code, out, err = in_process("show", neox_store)
    assert code == 0, err
    assert "SVCCA first vs final ckpt" in out
    from runner.tui.reader import read_summaries

    data = read_summaries(neox_store)
    assert data.curves and not data.series and data.networks == ["neox"]
    sv = data.curves["svcca_final"]
    assert sv.x.tolist() == [float(s) for s in STEPS] and sv.groups == ["embedding", "layer1", "layer2"]
    np.testing.assert_allclose(sv.y[0, :, -1], 1.0, atol=1e-6)


async def test_the_monitor_app_plots_a_suite(neox_store, monkeypatch):
    from runner.tui.app import MonitorApp
    from runner.tui.widgets import CurvePlot
    from tests.runner.tui.test_monitor import loaded, settle

    monkeypatch.chdir(neox_store.parent)
    app = MonitorApp(neox_store.name, clock=lambda: 1_800_000_000.0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, loaded(app))
        await pilot.press("2")
        plot = app.query_one(CurvePlot)
        assert plot.display and plot.curves.key == "svcca_final"
        await pilot.press("q")
    assert app.return_code == 0


def test_an_absent_hub_suite_offline_is_unmet_and_named(suites, tmp_path, in_process):
    models = """[[model]]
name = "pythia"
kind = "suite"
source = "nobody-here/absent-suite"
revisions = "step{0..2000:1000}"
"""
    spec = write_spec(tmp_path, suites, "absent", models)
    code, out, err = in_process("plan", spec)
    assert code == 0, err
    assert ("[[model]] pythia nobody-here/absent-suite: 3 checkpoints (step0, step1000, step2000): not in the "
            "Hugging Face cache") in " ".join(out.split())  # alike but for the revision: one line
    assert "downloads  0 checkpoint(s) to fetch" in out
    code, out, err = in_process("apply", spec)
    assert code == 66 and "step1000" in out + err
    assert not (tmp_path / "absent.zarr").exists()


def test_a_missing_local_revision_is_unmet_and_named(suites, tmp_path, in_process):
    spec = write_spec(tmp_path, suites, "missing", NEOX + 'revisions = ["step0", "step20"]\n')
    code, out, err = in_process("apply", spec)
    assert code == 66 and "step20" in out + err


@pytest.mark.parametrize("models, measures, message", [
    (NEOX + '[[model]]\nname = "lm"\n', None, "either measures checkpoint suites or trains networks"),
    (NEOX, '[[measure]]\nkind = "svcca"\n', "name the suite's layers to measure"),
    (NEOX, '[[measure]]\nkind = "svcca"\nlayers = ["layer9"]\n', "neox has no layer ['layer9']"),
    (NEOX, '[[measure]]\nkind = "lca"\n', "lca needs networks this runner trains"),
    (BERT, '[[measure]]\nkind = "sparsity"\nlayers = ["layer1"]\n', "are masked language models"),
    (NEOX, '[[measure]]\nkind = "svcca"\nlayers = ["lstm1"]\n', "a suite's layers are embedding, layer1 .. layerN"),
    (BERT.replace("seeds = [0, 1]\n", ""), None, "seeds and a source holding {seed} go together"),
    ('[[model]]\nname = "lm"\n', '[[measure]]\nkind = "svcca"\nlayers = ["layer1"]\n', "belong to checkpoint suites"),
    (NEOX, '[[measure]]\nkind = "svcca"\nlayers = ["block1"]\n', "'block1' is no layer"),
    (NEOX.replace('kind = "suite"', 'kind = "lm"'), None, "source apply to kind = \"suite\" only"),
    (NEOX.replace('{root}/neox', '{root}/nowhere'), None, "no such checkpoint directory"),
    ('[[model]]\nname = "p"\nkind = "suite"\nsource = "org/suite"\n', None, "a hub series (org/suite) needs revisions"),
])
def test_bad_suite_specs_are_refused_before_compute(suites, tmp_path, in_process, models, measures, message):
    code, out, err = in_process("plan", write_spec(tmp_path, suites, "bad", models, measures))
    assert code == 65 and message in err, err
    assert "Traceback" not in err and "bad.toml:" in err


def test_figures_of_a_suite_run_over_training_steps(neox_store):
    from runner.studies.training.figures import versus_final

    ds = xr.open_zarr(neox_store)
    fig = versus_final(ds)
    line = fig.axes[0].lines[0]
    assert line.get_xdata().tolist() == list(STEPS) and fig.axes[0].get_xlabel() == "training step"
    np.testing.assert_array_equal(line.get_ydata(), ds.svcca_final.sel(network="neox", layer="embedding").values)


@pytest.mark.requires_gpu
def test_a_suite_measured_on_cuda_equals_the_cpu_run(suites, neox_store, tmp_path, in_process):
    code, out, err = in_process("apply", "-q", "--device", "cuda", write_spec(tmp_path, suites, "cuda", NEOX))
    assert code == 0, err
    a, b = xr.open_zarr(neox_store), xr.open_zarr(tmp_path / "cuda.zarr")
    for name in ("svcca_final", "cka_final", "cka_layers", "analysis_loss", "chi_mean"):
        np.testing.assert_allclose(b[name].values, a[name].values, rtol=1e-3, atol=1e-4, err_msg=name)


@pytest.fixture
def hub_cache(suites, tmp_path, monkeypatch):
    """A Hugging Face cache holding revisions step0 and step10 of the tiny GPT-NeoX suite as the hub id
    ``org/tiny-suite`` (branches -> commits -> snapshots, as ``huggingface_hub`` lays it out)."""
    import shutil

    import huggingface_hub.constants

    repo = tmp_path / "hf" / "models--org--tiny-suite"
    (repo / "refs").mkdir(parents=True)
    for revision, commit in (("step0", "a" * 40), ("step10", "b" * 40)):
        (repo / "refs" / revision).write_text(commit)
        shutil.copytree(suites / "neox" / revision, repo / "snapshots" / commit)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    return repo


def test_a_hub_suite_is_measured_offline_from_the_cache(hub_cache, suites, neox_store, tmp_path, in_process):
    models = '[[model]]\nname = "neox"\nkind = "suite"\nsource = "org/tiny-suite"\n'
    spec = write_spec(tmp_path, suites, "hub", models + 'revisions = ["step0", "step10", "step100"]\n')
    code, out, err = in_process("plan", spec)
    assert code == 0 and "2 local or cached; 1 neither here nor to be had now" in out
    assert "[[model]] neox org/tiny-suite revision step100: not in the Hugging Face cache" in out
    spec = write_spec(tmp_path, suites, "hub", models + 'revisions = "step{0..10:10}"\n')
    code, out, err = in_process("apply", "-q", spec)
    assert code == 0, err
    a, b = xr.open_zarr(neox_store).isel(checkpoint=[0, 1]), xr.open_zarr(tmp_path / "hub.zarr")
    assert b.revision.values.tolist() == ["step0", "step10"] and b.source.values.tolist() == ["org/tiny-suite"]
    for name in ("cka_layers", "svcca_layers", "analysis_loss", "chi_mean"):  # the same weights as the local run
        np.testing.assert_array_equal(b[name].values, a[name].values, err_msg=name)
