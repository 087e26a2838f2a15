"""docs/slurm/ray_apply.sbatch, run by bash as SLURM would run it on a job of one node.

Its real commands run: ``ray start --head --block`` (through a one-machine ``srun`` that drops
srun's options), the wait for the node, ``runner apply --executor ray --address``, and the end of
the cluster. Not tested here: several nodes, SLURM's own srun and scontrol. Marked ``ray`` and
``slow`` (a Ray head and a worker importing torch: 20-30 s on 2 cores).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import xarray as xr

from runner.storage.store import read_tasks
from tests.runner.helpers import cli_env, maps_spec, run_cli, write_spec

pytest.importorskip("ray", reason="the Ray executor's tests need ray: pip install -e '.[ray]'")
psutil = pytest.importorskip("psutil")
pytestmark = [pytest.mark.ray, pytest.mark.slow]

SCRIPT = Path(__file__).resolve().parents[4] / "docs/slurm/ray_apply.sbatch"
SRUN = """#!/bin/bash
# srun on one machine: drop srun's own options and run the command here
while (($#)); do
    case "$1" in
        -w|-N|-n|-c|--nodelist|--nodes|--ntasks) shift 2 ;;
        -*) shift ;;
        *) break ;;
    esac
done
exec "$@"
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _ray_processes(folder: str) -> list:
    out = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(folder in part for part in p.info["cmdline"] or ()) and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.Error:
            continue
    return out


@pytest.mark.timeout(300)
def test_the_sbatch_script_starts_a_cluster_applies_a_spec_and_stops_the_cluster(tmp_path):
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "srun").write_text(SRUN)
    (shims / "srun").chmod(0o755)
    for name in ("slurm", "local"):
        write_spec(tmp_path, maps_spec(name, steps=20, samples=4), f"{name}.toml")
    ray_dir = f"/tmp/ray-{uuid.uuid4().hex[:8]}"  # short: Ray's socket paths inside it
    venv_bin = str(Path(sys.executable).parent)
    env = cli_env(tmp_path, PATH=f"{shims}:{venv_bin}:{os.environ['PATH']}", SLURM_JOB_NODELIST=socket.gethostname(),
                  SLURM_CPUS_PER_TASK="2", SLURM_JOB_ID="1", RAY_PORT=str(_free_port()), RAY_TMPDIR=ray_dir,
                  RAY_WAIT="120", RUNNER=f"{sys.executable} -m runner.cli", PYTHON=sys.executable,
                  RAY=str(Path(venv_bin) / "ray"), PYTHONPATH=str(SCRIPT.parents[2]))
    try:
        done = subprocess.run(["bash", str(SCRIPT), "slurm.toml", "-q"], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=280)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert "ray_apply: 1 node(s) up; applying slurm.toml" in done.stdout
        deadline = time.monotonic() + 30
        while _ray_processes(ray_dir) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _ray_processes(ray_dir)  # the job's cluster ended with the script
    finally:
        for p in _ray_processes(ray_dir):
            p.kill()
        shutil.rmtree(ray_dir, ignore_errors=True)
    assert run_cli("apply", "local.toml", "-q", cwd=tmp_path).returncode == 0
    assert read_tasks(tmp_path / "store/slurm.zarr").keys() == read_tasks(tmp_path / "store/local.zarr").keys()
    xr.testing.assert_equal(xr.open_zarr(tmp_path / "store/slurm.zarr").drop_attrs(),
                            xr.open_zarr(tmp_path / "store/local.zarr").drop_attrs())
