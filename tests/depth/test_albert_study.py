"""The ALBERT depth-dynamics pipeline end to end on a tiny ALBERT and a local text file."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from tests.runner.helpers import run_cli, write_spec


@pytest.fixture(scope="module")
def tiny_albert(tmp_path_factory):
    from models.tiny import build_tiny_albert

    return build_tiny_albert(tmp_path_factory.mktemp("tiny") / "albert", mlm_steps=10)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    from pydoc_data.topics import topics

    path = tmp_path_factory.mktemp("data") / "docs.txt"
    path.write_text("\n".join(" ".join(t.split()) for t in topics.values()))
    return path


SPEC = """
[experiment]
name = "tiny_albert"
store = "store/tiny_albert.zarr"
seed = 3

[[model]]
name = "pretrained"
source = "path:{model}"

[[model]]
name = "initial"
source = "path:{model}"
init = {{ scheme = "truncated_normal", std = 0.02, clip = 2.0 }}
replicates = 2

[input]
source = "{corpus}"
samples = 12
tokens = 12

[dynamics]
steps = 60
checkpoint_every = 20

[[measure]]
kind = "token_deviation"
every = 2

[[measure]]
kind = "lyapunov"
tau = 5

[[measure]]
kind = "transient_chaos"

[[measure]]
kind = "effective_dimension"
every = 5

[[measure]]
kind = "trajectory"
samples = [0, 3]
tokens = [0, 5, 11]
elements = [0, 7]

[[measure]]
kind = "attention"
samples = [1]
every = 20

[[measure]]
kind = "pca"
samples = [2]
start = 10
stop = 50
every = 2
"""


@pytest.mark.slow
def test_albert_study_end_to_end(tmp_path, tiny_albert, corpus):
    spec = write_spec(tmp_path, SPEC.format(model=tiny_albert, corpus=corpus))
    plan = run_cli("plan", spec, cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert "initial/1" in plan.stdout and "k=(per network) tau=5" in plan.stdout and "init=truncated_normal" in plan.stdout
    result = run_cli("apply", spec, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    chunks = {p: p.stat().st_mtime_ns for p in (tmp_path / "store/tiny_albert.zarr").rglob("c/**/*") if p.is_file()}
    again = run_cli("apply", spec, cwd=tmp_path)
    assert again.returncode == 0 and "nothing to do" in again.stdout
    assert {p: p.stat().st_mtime_ns for p in chunks} == chunks, "a finished spec rewrote data"
    ds = xr.open_zarr(tmp_path / "store/tiny_albert.zarr")  # what a user types: consolidated metadata
    assert ds.sizes["network"] == 3 and list(ds.network.values) == ["pretrained", "initial/0", "initial/1"]
    # no k in the spec: sqrt(unit roundoff) x the RMS norm of each network's states at t = 0 (plan says the
    # rule): far below the paper's k = 1 for states of norm ~ sqrt(tokens x hidden), and one per network
    assert "pretrained, initial/0, initial/1: k=2.4e-04 x RMS ||x_0||" in " ".join(plan.stdout.split())
    assert (ds.lyapunov_k.values < 0.1).all() and (ds.lyapunov_k.values > 2.4e-4).all()

    # every sample is traceable: its text, where it came from, and exactly `tokens` token ids
    assert ds.input_ids.shape == (12, 12) and (ds.input_ids >= 0).all()
    for text, origin in zip(ds.text.values, ds.origin.values):
        assert text and origin and text.split()[0] in corpus.read_text()

    # measures have the strides and shapes the spec asked for
    assert list(ds.deviation_step.values) == list(range(0, 61, 2))
    assert list(ds.lyapunov_step.values) == list(range(0, 60, 5))
    assert ds.trace.shape == (3, 2, 61, 3, 2) and ds.trace.notnull().all()
    assert ds.attention.shape == (3, 1, 4, 4, 12, 12)
    np.testing.assert_allclose(ds.attention.sum("key").values, 1.0, rtol=1e-5)
    assert ds.pca_projection.shape == (3, 1, 21, 2) and ds.pca_projection.notnull().all()
    assert (ds.pca_explained_variance.sum("component") <= 1 + 1e-9).all()
    assert ds.effective_dimension.notnull().all() and (ds.effective_dimension >= 1).all()
    assert ds.lyapunov.notnull().all() and (ds.chaos_length >= 0).all()
    assert ds.sync_offset.dtype == np.float64 and ds.sync_offset.attrs["units"] == "1"
    assert ds.diverged_step.isnull().all()

    # initial networks are re-drawn per replicate, the pretrained one is the checkpoint
    d = ds.deviation.isel(deviation_step=10)
    assert not np.allclose(d.sel(network="initial/0"), d.sel(network="initial/1"))
    assert not np.allclose(d.sel(network="pretrained"), d.sel(network="initial/0"))


def test_hub_model_without_network_is_refused_before_compute(tmp_path):
    spec = write_spec(tmp_path, """
        [experiment]
        name = "hub"
        [[model]]
        name = "pretrained"
        source = "hf:albert-base-v2"
        [input]
        source = "builtin:pydoc-topics"
        [[measure]]
        kind = "lyapunov"
        """)
    result = run_cli("apply", spec, cwd=tmp_path, timeout=120)
    assert result.returncode == 66
    assert "[[model]] #1 (pretrained)" in result.stderr and "albert-base-v2" in result.stderr
    assert "hf download" in result.stderr
    assert not (tmp_path / "store").exists()


def test_a_failed_task_exits_1_and_the_others_still_run(tmp_path, tiny_albert, corpus):
    """A checkpoint whose weights cannot be read: its network's tasks fail (exit 1), the other
    networks finish and are kept, and status names the error."""
    import json
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(tiny_albert, broken)
    (broken / "model.safetensors").write_bytes(b"not safetensors")
    spec = write_spec(tmp_path, f"""
        [experiment]
        name = "failing"
        [[model]]
        name = "good"
        source = "path:{tiny_albert}"
        [[model]]
        name = "broken"
        source = "path:{broken}"
        [input]
        source = "{corpus}"
        samples = 4
        tokens = 12
        [dynamics]
        steps = 10
        [[measure]]
        kind = "token_deviation"
        """)
    result = run_cli("apply", spec, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "failed: " in result.stderr and "broken" in result.stderr and "Traceback" not in result.stderr
    status = json.loads(run_cli("status", spec, "--json", cwd=tmp_path).stdout)
    states = {t["network_label"]: t["state"] for t in status["tasks"]}
    assert states == {"good": "done", "broken": "failed"} and status["state"] == "failed"
    assert next(t for t in status["tasks"] if t["state"] == "failed")["error"]
