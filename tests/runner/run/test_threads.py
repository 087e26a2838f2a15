"""The thread policy: usable CPUs (affinity, cgroup quota), the load, the timed choice, the
overrides, and what plan, apply and show record."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
import torch
import xarray as xr

from runner.core.estimate import Calibrator
from runner.core.layout import internal
from runner.run.threads import choose, other_runnable, time_candidates, usable_cpus
from tests.runner.helpers import maps_spec, run_cli, write_spec

ROOT = Path(__file__).resolve().parents[3]

TOKEN_DEVIATION = '[[measure]]\nkind = "token_deviation"'


def threads_spec(extra: str = "") -> str:
    return maps_spec("threads", steps=20, measures=TOKEN_DEVIATION, experiment=extra)


def test_a_cgroup_quota_caps_the_affinity_mask(tmp_path):
    (tmp_path / "cpu.max").write_text("150000 100000\n")  # 1.5 CPUs: rounded up to 2
    assert usable_cpus(tmp_path) == min(2, usable_cpus(tmp_path / "none"))
    (tmp_path / "cpu.max").write_text("max 100000\n")  # no quota: the affinity mask
    assert usable_cpus(tmp_path) == usable_cpus(tmp_path / "none")
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("100000\n")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert usable_cpus(v1) == 1


def test_other_runnable_processes_leave_out_the_reader(tmp_path):
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("1.50 0.90 0.40 3/412 9876\n")
    assert other_runnable(samples=1, loadavg=loadavg, own=tmp_path / "none") == 2  # the reader left out
    own = tmp_path / "task"
    for tid, state in ((1, "R"), (2, "R"), (3, "S")):
        (own / str(tid)).mkdir(parents=True)
        (own / str(tid) / "stat").write_text(f"{tid} (python3 (worker)) {state} 1 2 3\n")
    assert other_runnable(samples=1, loadavg=loadavg, own=own) == 1  # two of the three are this process's
    assert other_runnable(samples=1, loadavg=tmp_path / "missing") == 0


def test_an_explicit_count_wins(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert choose(2).threads == 2 and choose(2).why == "--threads 2"
    assert choose().threads == 3 and choose().why == "OMP_NUM_THREADS=3"
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert choose(usable=1).why == "one usable CPU"


def _costs(per_thread_s: float, fixed_s: float):
    """A step taking ``fixed_s + per_thread_s * threads``: a known answer for which count is faster."""
    def step():
        time.sleep(fixed_s + per_thread_s * torch.get_num_threads())
    return step


def test_the_faster_count_is_chosen_by_timing_the_probe(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    slower_with_more = choose(probe=lambda: _costs(0.004, 0.0), usable=4, busy=0)
    assert slower_with_more.threads == 1, slower_with_more
    faster_with_more = choose(probe=lambda: (lambda: time.sleep(0.016 / torch.get_num_threads())), usable=4, busy=2)
    assert faster_with_more.threads == 4 and "2 runnable threads of other processes" in faster_with_more.why
    assert "steps/s by thread count 1:" in faster_with_more.why
    assert torch.get_num_threads() == before  # timing leaves torch as it was


def test_without_a_probe_the_idle_cpus_are_used(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert choose(usable=4, busy=1).threads == 3
    assert choose(usable=2, busy=5).threads == 1
    assert choose(probe=lambda: None, usable=4, busy=0).threads == 4  # nothing to time yet


def test_timings_are_cached_per_load(tmp_path, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    probes = []

    def probe():
        probes.append(1)
        return _costs(0.002, 0.0)

    cal = Calibrator(directory=tmp_path)
    for _ in range(2):
        assert choose(probe=probe, key={"model": "x"}, calibrated=cal, usable=2, busy=0).threads == 1
    assert len(probes) == 1  # the second choice read the cached timing
    choose(probe=probe, key={"model": "x"}, calibrated=Calibrator(directory=tmp_path), usable=2, busy=1)
    assert len(probes) == 2  # another idle count is timed again


def test_time_candidates_reports_every_count():
    rates = time_candidates(lambda: None, [1, 2], seconds=0.01)
    assert set(rates) == {1, 2} and all(r > 0 for r in rates.values())


def test_plan_and_apply_record_the_choice_and_show_prints_it(tmp_path):
    spec = write_spec(tmp_path, threads_spec())
    plan = run_cli("plan", "--json", "--threads", "1", spec, cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["threads"]["why"] == "--threads 1"
    text = run_cli("plan", spec, cwd=tmp_path, OMP_NUM_THREADS="")  # the policy chooses
    assert text.returncode == 0, text.stderr
    line = " ".join(text.stdout[text.stdout.index("\nthreads"):].split("\ntasks")[0].split())  # wrapped at 80
    assert "steps/s by thread count 1:" in line or "one usable CPU" in line, line  # the map's step was timed
    done = run_cli("apply", "-q", "--threads", "1", spec, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    attrs = internal(xr.open_zarr(tmp_path / "store/threads.zarr").attrs)
    assert attrs["threads"] == {"threads": 1, "usable": attrs["threads"]["usable"], "busy": 0, "why": "--threads 1"}
    show = run_cli("show", tmp_path / "store/threads.zarr", cwd=tmp_path)
    assert "cpu threads: 1 (--threads 1)" in show.stdout, show.stdout


def test_the_spec_key_sets_the_count_and_leaves_the_results_hash(tmp_path):
    plain = write_spec(tmp_path, threads_spec(), "plain.toml")
    keyed = write_spec(tmp_path, threads_spec("threads = 1"), "keyed.toml")
    a = json.loads(run_cli("plan", "--json", "--no-estimate", plain, cwd=tmp_path).stdout)
    b = json.loads(run_cli("plan", "--json", "--no-estimate", keyed, cwd=tmp_path, OMP_NUM_THREADS="").stdout)
    assert b["threads"]["why"] == "[experiment] threads = 1"
    assert a["spec_sha256"] == b["spec_sha256"]  # the thread count is not what results depend on


@pytest.mark.parametrize("args", [["--threads", "0"], ["--threads", "-2"]])
def test_a_thread_count_below_one_is_a_usage_error(tmp_path, args):
    spec = write_spec(tmp_path, threads_spec())
    for command in ("plan", "apply"):
        out = run_cli(command, *args, spec, cwd=tmp_path)
        assert out.returncode == 2 and "--threads: give a number from 1 to 4096, not" in out.stderr, out.stderr


def test_the_training_study_times_a_training_step(tmp_path):
    shutil.copy(ROOT / "specs/tiny/lstm_tiny.toml", tmp_path / "lstm_tiny.toml")
    out = run_cli("plan", "--json", "lstm_tiny.toml", cwd=tmp_path, OMP_NUM_THREADS="")
    assert out.returncode == 0, out.stderr
    why = json.loads(out.stdout)["threads"]["why"]
    assert "steps/s by thread count 1:" in why or why == "one usable CPU", why
