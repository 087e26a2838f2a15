"""Faults met by a real `runner apply` in a subprocess: a disk that fills up, a read-only store, a
torn event log, diverging states. Each ends in one clear message, keeps the finished work, and a
later apply finishes the job with the results of an uninterrupted run."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from tests.runner.helpers import maps_spec, popen_cli, run_cli, write_spec

SPEC = maps_spec("fault", steps=3000, samples=64, checkpoint_every=100, n=128)


def _open(path: Path) -> xr.Dataset:
    return xr.open_zarr(path, consolidated=False).load()


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout  # bounds a failure only
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> xr.Dataset:
    root = tmp_path_factory.mktemp("reference")
    assert run_cli("apply", write_spec(root, SPEC), cwd=root).returncode == 0
    return _open(root / "store/fault.zarr")


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MB tmpfs mounted for the test (needs the right to mount; skipped without it)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], capture_output=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def _one_message(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in stderr, stderr
    return lines[0]


def test_a_disk_that_fills_up_mid_run(small_disk, reference):
    spec = write_spec(small_disk, SPEC)
    # the tanh pass pauses at step 1550 (its durable point: 1500); the disk is filled meanwhile
    proc = popen_cli("apply", spec, "-q", cwd=small_disk, RUNNER_TEST_STALL="tanh@1550")
    marker = small_disk / "store/fault.runner/stalled"
    _wait_for(marker, proc)
    filler = _fill(small_disk)
    marker.unlink()
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 74, err
    message = _one_message(err)
    assert "No space left on device" in message and "free some space and run apply again" in message
    assert not list((small_disk / "store/fault.runner/checkpoints").glob("*.tmp")), "no partial file is left"

    status = json.loads(run_cli("status", spec, "--json", cwd=small_disk).stdout)
    assert any(t["state"] == "done" for t in status["tasks"]), "the logistic pass is kept"

    filler.unlink()
    resumed = run_cli("apply", spec, cwd=small_disk)
    assert resumed.returncode == 0, resumed.stderr
    xr.testing.assert_equal(_open(small_disk / "store/fault.zarr").drop_attrs(), reference.drop_attrs())


def test_a_read_only_store(small_disk, reference):
    spec = write_spec(small_disk, SPEC)
    proc = popen_cli("apply", spec, "-q", cwd=small_disk, RUNNER_TEST_STALL="tanh@1550")
    _wait_for(small_disk / "store/fault.runner/stalled", proc)
    proc.kill()
    proc.communicate()
    (small_disk / "store/fault.runner/stalled").unlink()
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    try:
        result = run_cli("apply", spec, "-q", cwd=small_disk)
        assert result.returncode == 74, result.stderr
        assert "Read-only file system" in _one_message(result.stderr)
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(small_disk)], check=True)
    resumed = run_cli("apply", spec, cwd=small_disk)
    assert resumed.returncode == 0, resumed.stderr
    xr.testing.assert_equal(_open(small_disk / "store/fault.zarr").drop_attrs(), reference.drop_attrs())


def test_a_torn_last_line_in_the_event_log(tmp_path):
    spec = write_spec(tmp_path, maps_spec("torn", steps=50))
    assert run_cli("apply", spec, cwd=tmp_path).returncode == 0
    log = tmp_path / "store/torn.runner/events.jsonl"
    with open(log, "a") as f:
        f.write('{"ts": 1.0, "event": "prog')  # a crash in the middle of a write
    status = run_cli("status", spec, "--json", cwd=tmp_path)
    assert status.returncode == 0 and json.loads(status.stdout)["state"] == "done"
    spec.write_text(spec.read_text().replace("k = 1e-8", "k = 1e-7"))
    again = run_cli("apply", spec, "--replace", cwd=tmp_path)  # a new run writes to the log
    assert again.returncode == 0 and "ran 4 task(s)" in again.stdout
    lines = log.read_text().splitlines()
    assert lines.count('{"ts": 1.0, "event": "prog') == 1, "the next writer starts a new line"
    runs = [json.loads(x)["run"] for x in lines if '"run_started"' in x]
    assert len(set(runs)) == 2
    assert run_cli("status", spec, cwd=tmp_path).returncode == 0


def test_divergence_is_announced_stored_as_nan_and_counted(tmp_path):
    spec = write_spec(tmp_path, maps_spec("nan", steps=200, extra_models="""
        [[model]]
        name = "exploding"
        source = "map:logistic"
        params = { r = 5.0 }
        """))
    result = run_cli("apply", spec, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "warning: exploding: 16 of 16 samples diverged" in result.stderr
    events = [json.loads(x) for x in (tmp_path / "store/nan.runner/events.jsonl").read_text().splitlines()]
    nonfinite = [e for e in events if e["event"] == "nonfinite"]
    assert nonfinite and nonfinite[-1]["samples"] == 16 and nonfinite[-1]["network"] == 2
    ds = _open(tmp_path / "store/nan.zarr")
    exploding = ds.sel(network="exploding")
    assert (exploding.diverged_step > 0).all()
    assert exploding.chaos_length.isnull().all() and np.isnan(float(exploding.fraction_never_chaotic))
    assert ds.sel(network="logistic").chaos_length.notnull().all()  # the logistic map at r = 4: chaotic, measured
    # censored exactly where the transient lasted to the end of the run (a lower bound, not a length)
    logistic = ds.sel(network="logistic")
    assert ((logistic.chaos_length == 200) == logistic.chaos_censored).all() and logistic.chaos_censored.any()
    show = run_cli("show", tmp_path / "store/nan.zarr", cwd=tmp_path)
    assert "diverged samples" in show.stdout and "exploding=16" in show.stdout
    assert "=-inf" not in show.stdout and "=nan" not in show.stdout.lower()


def _fill(disk: Path, leave: int = 0) -> Path:
    """Fill ``disk`` but for about ``leave`` bytes."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * (1 << 12))
        except OSError:
            pass
    os.truncate(filler, max(filler.stat().st_size - leave, 0))
    return filler


def test_a_full_disk_while_keeping_the_version_before_is_one_line(small_disk):
    """The history copy a replace makes first meets a full disk: one line naming the folder and the bytes
    it needs (not a Python list of every file), nothing replaced; with room again the replace goes on."""
    text = maps_spec("full", steps=40, samples=8, n=8)
    spec = write_spec(small_disk, text)
    assert run_cli("apply", spec, "-q", cwd=small_disk).returncode == 0
    spec.write_text(text.replace("g = 0.5", "g = 0.6"))
    filler = _fill(small_disk, leave=32 * 1024)  # room for the run's writes, not for the copy's folders
    result = run_cli("apply", spec, "-q", "--replace", cwd=small_disk)
    assert result.returncode == 74, result.stderr
    message = _one_message(result.stderr)
    assert "full.history" in message and "No space left on device" in message, message
    assert "keeping the store as it was there needs up to" in message and "[(" not in message, message
    filler.unlink()
    assert run_cli("apply", spec, "-q", "--replace", cwd=small_disk).returncode == 0
