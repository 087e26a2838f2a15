"""The store's lease: a worker's write is refused once its driver is gone or another apply holds the store.

A driver and a worker are real processes on a real store (laid out by the CLI): the driver takes
the lock and the lease as ``apply`` does, the worker attaches with the lease check installed and
writes a region when told to. Without Ray, so that the worker outlives its driver for sure.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from runner.run.execute import lease
from tests.runner.helpers import cli_env, maps_spec, run_cli, write_spec

pytest.importorskip("psutil")

DRIVER = """
import sys, time
from runner.run.execute import lease
from runner.storage.store import Store
store = Store(sys.argv[1])
store.lock()
print(lease.take(store.state_dir), flush=True)
time.sleep(600)
"""

WORKER = """
import sys, time
from pathlib import Path
import numpy as np
from runner.run.execute import lease
from runner.storage.store import Store, guard_writes
store = Store(sys.argv[1])
guard_writes(lease.checker(store.state_dir, sys.argv[2]))
store.attach()
print("attached", flush=True)
while not Path(sys.argv[3]).exists():
    time.sleep(0.02)
try:
    store.write("diverged_step", (0, slice(None)), np.full(store.group["diverged_step"].shape[1], 7.0))
    print("written", flush=True)
except lease.LeaseLost as err:
    print("refused:", err, flush=True)
"""


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished store, laid out and filled by the CLI once for the module."""
    root = tmp_path_factory.mktemp("leased")
    write_spec(root, maps_spec("leased", steps=20, samples=4))
    assert run_cli("apply", "spec.toml", "-q", cwd=root).returncode == 0
    return root / "store"


@pytest.fixture
def store(finished, tmp_path):
    """The finished store and its run folder, copied for one test (the worker writes into it)."""
    shutil.copytree(finished, tmp_path / "store")
    return tmp_path / "store/leased.zarr"


def _python(code: str, *args, cwd) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)], cwd=cwd, env=cli_env(cwd),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _files(path) -> dict:
    return {str(f): f.stat().st_mtime_ns for f in path.parent.rglob("*") if f.is_file()}


def _worker_writes_after(store, tmp_path, between) -> str:
    """Start a driver, a worker on its lease, do ``between(driver)``, then let the worker write."""
    driver = _python(DRIVER, store, cwd=tmp_path)
    token = driver.stdout.readline().strip()
    worker = _python(WORKER, store, token, tmp_path / "go", cwd=tmp_path)
    try:
        assert worker.stdout.readline().strip() == "attached", worker.stderr.read()
        between(driver)
        (tmp_path / "go").touch()
        out, err = worker.communicate(timeout=60)
        assert worker.returncode == 0, err
        return out.strip()
    finally:
        for p in (driver, worker):
            if p.poll() is None:
                p.kill()
                p.communicate()


@pytest.mark.timeout(120)
def test_a_worker_writes_while_its_driver_holds_the_store(store, tmp_path):
    assert _worker_writes_after(store, tmp_path, lambda driver: None) == "written"


def _kill(driver) -> None:
    os.kill(driver.pid, signal.SIGKILL)
    driver.communicate()


@pytest.mark.timeout(120)
def test_a_worker_whose_driver_was_killed_writes_nothing(store, tmp_path):
    before = {}
    out = _worker_writes_after(store, tmp_path, lambda driver: (_kill(driver), before.update(_files(store))))
    assert out.startswith("refused:") and "the apply that holds the store (pid" in out and "is gone" in out, out
    assert _files(store) == before


@pytest.mark.timeout(120)
def test_a_worker_of_an_earlier_apply_is_fenced_out_by_the_next_one(store, tmp_path):
    successors = []

    def take_over(driver):
        _kill(driver)
        successors.append(_python(DRIVER, store, cwd=tmp_path))  # takes the lock and a new lease, and lives
        successors[0].stdout.readline()

    try:
        out = _worker_writes_after(store, tmp_path, take_over)
    finally:
        for p in successors:
            p.kill()
            p.communicate()
    assert out.startswith("refused: ") and "another `runner apply` took the store" in out, out


def test_a_lease_held_on_another_host_counts_while_it_is_renewed(tmp_path):
    token = lease.take(tmp_path)
    held = json.loads((tmp_path / lease.LEASE_FILE).read_text())
    (tmp_path / lease.LEASE_FILE).write_text(json.dumps({**held, "host": "elsewhere", "pid": 1}))
    assert lease.problem(tmp_path, token) is None  # renewed just now, on a host this one cannot look into
    assert lease.renew(tmp_path, token)
    stale = {**json.loads((tmp_path / lease.LEASE_FILE).read_text()), "renewed": time.time() - lease.TTL - 1}
    (tmp_path / lease.LEASE_FILE).write_text(json.dumps(stale))
    assert "stopped renewing its lease" in lease.problem(tmp_path, token)
    assert not lease.renew(tmp_path, "another token")
