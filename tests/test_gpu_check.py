"""scripts/gpu_check.py works before a GPU is lent: its dry run runs every part at toy size on the
CPU, and its list of CUDA test files holds every file with CUDA-marked tests."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from gpu_check import GPU_TESTS  # noqa: E402


def test_every_file_with_cuda_tests_is_in_the_gpu_check():
    marked = {str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")
              if re.search(r"^(@pytest\.mark\.requires_gpu|pytestmark = pytest\.mark\.requires_gpu)", p.read_text(), re.M)}
    assert marked == set(GPU_TESTS)


@pytest.mark.slow
def test_the_dry_run_runs_every_part_and_brings_back_few_files(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "scripts/gpu_check.py", str(out), "--dry-run"], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert list(results["parts"]) == ["tests", "precision", "long_run", "training"]
    assert all(r["status"] == "ok" for r in results["parts"].values())
    precision = results["parts"]["precision"]["measured"]["variants"]
    assert set(precision) == {"fp32", "bf16"} and precision["fp32"]["steps_per_s"] > 0
    assert precision["bf16"]["agrees_with_fp32"]["pretrained"].keys() == precision["fp32"]["pretrained"].keys()
    run = results["parts"]["long_run"]["measured"]
    assert run["plan"]["networks"] == 6 and run["plan"]["steps"] == 1_000_000
    assert run["runs"]["fp32"]["plan_over_measured"] > 0 and run["runs"]["fp32"]["peak_rss_bytes"] > 0
    assert run["runs"]["fp32-reduced"]["plan_over_measured"] > 0 and run["plan"]["estimate_reduced"]["seconds"] > 0
    assert results["parts"]["training"]["measured"]["runner_s"] > 0
    summary = (out / "summary.md").read_text()
    assert "| long_run | ok" in summary and "albert_long: 6 networks" in summary
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) <= 8, files  # what the device tool brings back
