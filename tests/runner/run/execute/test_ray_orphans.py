"""A killed driver of ``apply --executor ray`` leaves no cluster and no writer behind.

The driver is the real CLI in a subprocess that starts its own local cluster of 2 CPUs; its worker
stalls at a known step (``RUNNER_TEST_STALL``), then the driver gets ``kill -9`` and the store is
applied again at once, here, with the local executor. Marked ``ray`` and ``slow``: a cluster and
a worker importing torch take 10-20 s on 2 cores.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
import xarray as xr

from tests.runner.helpers import maps_spec, popen_cli, run_cli, wait_for, write_spec

pytest.importorskip("ray", reason="the Ray executor's tests need ray: pip install -e '.[ray]'")
psutil = pytest.importorskip("psutil")
pytestmark = [pytest.mark.ray, pytest.mark.slow]

STALL = "tanh@25"  # with checkpoint_every = 10: tanh's next write is at step 30


def _start(tmp_path, **env):
    for name in ("ray", "local"):
        write_spec(tmp_path, maps_spec(name, steps=60, checkpoint_every=10, samples=8), f"{name}.toml")
    state = tmp_path / "store/ray.runner"
    driver = popen_cli("apply", "ray.toml", "--executor", "ray", "-q", cwd=tmp_path, RUNNER_TEST_STALL=STALL,
                       TRANSIENT_RAY_CPUS="2", **env)
    wait_for(lambda: (state / "stalled").exists() and (state / "ray_cluster.json").exists(), driver, timeout=240)
    # logistic's tasks run beside the stalled tanh; once they are recorded only tanh's worker can write, so
    # no write checked before the kill can land after it (the one race the lease leaves open)
    from runner.run.prepare import prepare

    plan = prepare(tmp_path / "ray.toml")
    others = {t.id for t in plan.tasks if plan.labels[t.network] != "tanh"}
    wait_for(lambda: others <= {f.stem for f in (state / "records").glob("*.json")}, driver, timeout=240)
    cluster = psutil.Process(driver.pid).children(recursive=True)  # gcs_server, raylet, workers, the reaper
    worker = int((state / "stalled").read_text().split()[0])
    assert worker in {p.pid for p in cluster}
    return driver, state, cluster, worker


def _kill(driver) -> None:
    os.kill(driver.pid, signal.SIGKILL)
    driver.communicate()


def _alive(procs) -> list:
    return [p for p in procs if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def _files(*folders) -> dict:
    return {str(f): f.stat().st_mtime_ns for d in folders for f in d.rglob("*") if f.is_file()}


def _equals_a_local_run(tmp_path) -> None:
    assert run_cli("apply", "local.toml", "-q", cwd=tmp_path).returncode == 0
    xr.testing.assert_equal(xr.open_zarr(tmp_path / "store/ray.zarr").drop_attrs(),
                            xr.open_zarr(tmp_path / "store/local.zarr").drop_attrs())


@pytest.mark.timeout(300)
def test_a_killed_driver_takes_its_cluster_with_it_and_the_resume_equals_a_local_run(tmp_path):
    driver, state, cluster, _ = _start(tmp_path)
    _kill(driver)
    t_kill = time.monotonic()
    resume = popen_cli("apply", "ray.toml", "-q", cwd=tmp_path)  # at once, the local executor
    deadline = t_kill + 20
    while _alive(cluster) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = _alive(cluster)
    print(f"{len(cluster)} processes of the cluster; all gone {time.monotonic() - t_kill:.2f} s after the kill")
    assert not left, [p.name() for p in left]
    out, err = resume.communicate(timeout=240)
    assert resume.returncode == 0, err
    assert not (state / "ray_cluster.json").exists()
    _equals_a_local_run(tmp_path)


@pytest.mark.timeout(300)
def test_a_worker_whose_driver_is_gone_writes_nothing_and_the_resume_stops_its_cluster(tmp_path):
    refused = tmp_path / "refused.log"
    driver, state, cluster, worker = _start(tmp_path, RUNNER_TEST_NO_REAPER="1", RUNNER_TEST_FENCE_LOG=str(refused))
    _kill(driver)
    files = _files(tmp_path / "store")
    (state / "stalled").unlink()  # the orphaned worker goes on to its next write (step 30)
    # Ray ends the worker a second or two after its raylet (which follows the driver); until then
    # it goes on, and its next write is refused (tests/runner/run/execute/test_lease.py: a worker that lives on)
    def worker_ended() -> bool:
        try:
            return not _alive([psutil.Process(worker)])
        except psutil.Error:
            return True

    deadline = time.monotonic() + 120
    while not refused.exists() and not worker_ended() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert refused.exists() or worker_ended()
    if refused.exists():
        assert "refused: the apply that holds the store" in refused.read_text()
    print("the orphaned worker's write was refused" if refused.exists() else "Ray ended the orphaned worker first")
    del files[str(state / "stalled")]
    assert _files(tmp_path / "store") == files  # nothing written, nothing made, after the kill
    assert _alive(cluster)  # without the reaper the cluster outlives its driver...
    resume = run_cli("apply", "ray.toml", "-q", cwd=tmp_path)
    assert resume.returncode == 0, resume.stderr
    deadline = time.monotonic() + 20  # ...until an apply of the same store takes the lock
    while _alive(cluster) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(cluster), [p.name() for p in _alive(cluster)]
    _equals_a_local_run(tmp_path)

