"""The Ray executor on one local cluster of 2 CPU workers, shared by the tests of this module.

Expensive on a 2-core machine (marked ``ray`` and ``slow``): starting the cluster takes about 5 s
and each worker imports torch once (about 5 s). The driver runs in this process (the real CLI
entry point); the worker that is killed is a real process of the cluster.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
import xarray as xr

from runner.storage.store import read_tasks
from tests.runner.helpers import maps_spec, write_spec

ray = pytest.importorskip("ray", reason="the Ray executor's tests need ray: pip install -e '.[ray]'")
pytestmark = [pytest.mark.ray, pytest.mark.slow]

STALL = "tanh@25"
"""The workers' stall hook (``runner.core.interrupt.stall_point``): tanh's pass waits after step 25."""


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False,
             configure_logging=False, runtime_env={"env_vars": {"RUNNER_TEST_STALL": STALL, "OMP_NUM_THREADS": "1"}})
    yield
    ray.shutdown()


def _data(path):
    return xr.open_zarr(path).drop_attrs()


def _pid(marker):
    try:
        return int(marker.read_text().split()[0])
    except (OSError, IndexError, ValueError):  # not there, or being written
        return None


def _kill_the_stalled_worker_once(marker, found: dict, timeout: float = 240.0) -> None:
    """Wait for the stalled worker, kill it, wait for its retry to stall too, then let it go on."""
    deadline = time.monotonic() + timeout
    try:
        while _pid(marker) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        found["killed"] = _pid(marker)
        found["durable"] = list((marker.parent / "checkpoints").glob("*.safetensors"))
        os.kill(found["killed"], signal.SIGKILL)
        while _pid(marker) in (None, found["killed"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        found["retried"] = _pid(marker)
    finally:
        marker.unlink(missing_ok=True)  # never leave the run waiting


def test_a_killed_worker_is_retried_from_its_durable_point_and_equals_a_local_run(cluster, in_process, tmp_path):
    for name in ("ray", "local"):
        write_spec(tmp_path, maps_spec(name, steps=60, checkpoint_every=10, samples=8), f"{name}.toml")
    state = tmp_path / "store/ray.runner"
    found: dict = {}
    killer = threading.Thread(target=_kill_the_stalled_worker_once, args=(state / "stalled", found))
    killer.start()
    code, _, err = in_process("apply", "ray.toml", "--executor", "ray", "-q")
    killer.join()
    assert code == 0, err
    assert found["killed"] != os.getpid() and found["durable"]  # a worker, past its durable point at step 20
    assert found["retried"] not in (None, found["killed"])  # Ray retried the task in another worker
    assert in_process("apply", "local.toml", "-q")[0] == 0
    records = read_tasks(tmp_path / "store/ray.zarr")
    resumed = {r["network_label"]: r["resumed_from"] for r in records.values() if r["kind"] == "iterate"}
    assert resumed == {"logistic": 0, "tanh": 20}
    assert records.keys() == read_tasks(tmp_path / "store/local.zarr").keys()
    xr.testing.assert_equal(_data(tmp_path / "store/ray.zarr"), _data(tmp_path / "store/local.zarr"))
    assert not list((state / "checkpoints").glob("*.safetensors"))


NO_TWINS = """
        [[measure]]
        kind = "effective_dimension"
        every = 5

        [[measure]]
        kind = "token_deviation"
        """


def test_sample_shards_on_ray_equal_a_local_unsharded_run(cluster, in_process, tmp_path):
    for name in ("shards", "whole"):  # 20 steps: tanh never reaches the stall hook's step
        write_spec(tmp_path, maps_spec(name, steps=20, checkpoint_every=10, samples=9, measures=NO_TWINS),
                   f"{name}.toml")
    code, _, err = in_process("apply", "shards.toml", "--executor", "ray", "--shards", "2", "-q")
    assert code == 0, err
    assert in_process("apply", "whole.toml", "-q")[0] == 0
    xr.testing.assert_allclose(_data(tmp_path / "store/shards.zarr"), _data(tmp_path / "store/whole.zarr"),
                               rtol=1e-6, atol=0)
    assert not list((tmp_path / "store/shards.runner/shards").iterdir())


def test_an_extension_on_ray_writes_into_the_next_version_and_equals_a_fresh_local_run(cluster, in_process, tmp_path):
    """Issue 51: the workers of a longer run write into the next version the driver holds (they find
    it beside the store), and the switched-in store equals a fresh local run of the new length."""
    spec = write_spec(tmp_path, maps_spec("ray", steps=10, checkpoint_every=10, samples=8, measures=NO_TWINS), "ray.toml")
    write_spec(tmp_path, maps_spec("local", steps=20, checkpoint_every=10, samples=8, measures=NO_TWINS), "local.toml")
    assert in_process("apply", "ray.toml", "--executor", "ray", "-q")[0] == 0
    spec.write_text(spec.read_text().replace("steps = 10", "steps = 20"))
    code, _, err = in_process("apply", "ray.toml", "--executor", "ray", "-q")
    assert code == 0, err
    assert in_process("apply", "local.toml", "-q")[0] == 0
    resumed = {r["network_label"]: r["resumed_from"] for r in read_tasks(tmp_path / "store/ray.zarr").values()
               if r["kind"] == "iterate"}
    assert resumed == {"logistic": 10, "tanh": 10}
    xr.testing.assert_equal(_data(tmp_path / "store/ray.zarr"), _data(tmp_path / "store/local.zarr"))
    assert not (tmp_path / "store/ray.runner/next.zarr").exists()
