"""The Ray executor on a local cluster of 2 CPU workers (expensive on a 2-core machine: each apply
starts a cluster, about 5 s, and each worker imports torch, about 5 s; marked ``ray`` and ``slow``)."""

from __future__ import annotations

import json
import os
import signal

import pytest
import xarray as xr

from tests.runner.helpers import maps_spec, popen_cli, run_cli, wait_for, write_spec

pytest.importorskip("ray", reason="the Ray executor's tests need ray: pip install -e '.[ray]'")
pytestmark = [pytest.mark.ray, pytest.mark.slow]

RAY = {"TRANSIENT_RAY_CPUS": "2"}


def _data(path):
    return xr.open_zarr(path).drop_attrs()


def test_a_killed_worker_is_retried_from_its_durable_point_and_equals_a_local_run(tmp_path):
    for name in ("ray", "local"):
        write_spec(tmp_path, maps_spec(name, steps=60, checkpoint_every=10, samples=8), f"{name}.toml")
    state = tmp_path / "store/ray.runner"
    marker = state / "stalled"
    proc = popen_cli("apply", "ray.toml", "--executor", "ray", "-q", cwd=tmp_path, RUNNER_TEST_STALL="tanh@25", **RAY)
    try:
        wait_for(marker.exists, proc, timeout=240)  # tanh's worker, past its durable point at step 20
        killed = int(marker.read_text().split()[0])
        assert killed != proc.pid and list((state / "checkpoints").glob("*.safetensors"))
        os.kill(killed, signal.SIGKILL)
        # Ray retries the task in a new worker; it resumes at step 20 and stalls at 25 again
        wait_for(lambda: marker.exists() and int(marker.read_text().split()[0]) != killed, proc, timeout=240)
        marker.unlink()
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    local = run_cli("apply", "local.toml", "-q", cwd=tmp_path)
    assert local.returncode == 0, local.stderr
    records = json.loads(xr.open_zarr(tmp_path / "store/ray.zarr").attrs["runner_tasks"])
    resumed = {r["network_label"]: r["resumed_from"] for r in records.values() if r["kind"] == "iterate"}
    assert resumed == {"logistic": 0, "tanh": 20}
    assert len(records) == len(json.loads(xr.open_zarr(tmp_path / "store/local.zarr").attrs["runner_tasks"]))
    xr.testing.assert_equal(_data(tmp_path / "store/ray.zarr"), _data(tmp_path / "store/local.zarr"))
    assert not list((state / "checkpoints").glob("*.safetensors"))


NO_TWINS = """
        [[measure]]
        kind = "effective_dimension"
        every = 5

        [[measure]]
        kind = "token_deviation"
        """


def test_sample_shards_on_ray_equal_a_local_unsharded_run(tmp_path):
    for name in ("shards", "whole"):
        write_spec(tmp_path, maps_spec(name, steps=40, checkpoint_every=10, samples=9, measures=NO_TWINS),
                   f"{name}.toml")
    result = run_cli("apply", "shards.toml", "--executor", "ray", "--shards", "2", "-q", cwd=tmp_path, **RAY)
    assert result.returncode == 0, result.stderr
    assert run_cli("apply", "whole.toml", "-q", cwd=tmp_path).returncode == 0
    xr.testing.assert_allclose(_data(tmp_path / "store/shards.zarr"), _data(tmp_path / "store/whole.zarr"),
                               rtol=1e-6, atol=0)
    assert not list((tmp_path / "store/shards.runner/shards").iterdir())
