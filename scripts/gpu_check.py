"""One command for a lent GPU machine: every CUDA path checked and the paper-scale cost measured.

    python scripts/gpu_check.py OUT             # on a machine with CUDA (about 8 minutes at most)
    python scripts/gpu_check.py OUT --dry-run   # anywhere: each part at toy size on the CPU

Parts, each a child process with its own time limit (a slow part cannot eat the others' time;
one stopped at its limit keeps what it wrote):

1. ``tests``: the CUDA-marked tests (``-m requires_gpu`` in :data:`GPU_TESTS`: unit checks, every
   tiny spec applied on CUDA, kill -9 and resume on CUDA) with pytest-xdist across the cores;
2. ``precision``: ``benchmarks/precision.py``, ALBERT-large width (random weights) at the paper's
   batch: steps/s, FLOP/s against a matmul of each precision, the paper's statistics against fp32;
3. ``long_run``: ``benchmarks/long_run.py``, a scaled-down ``specs/albert_long.toml`` extrapolated to
   1e6 steps and 6 networks, beside ``plan``'s estimate of the whole spec: reduced
   (``[dynamics] reduce``), full in fp32, and in tf32;
4. ``training``: ``benchmarks/training.py``, the runner's training overhead against a plain loop.

OUT receives ``results.json`` (everything measured), ``summary.md`` and one log per part: at most
seven files, as the device tool brings back at most eight.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Every test file holding ``requires_gpu`` tests (tests/test_gpu_check.py keeps this list whole).
GPU_TESTS = ["tests/depth/test_gpu.py", "tests/runner/test_gpu_studies.py", "tests/analyses/test_cca.py",
             "tests/analyses/test_contextual_decomposition.py", "tests/training/test_suites_study.py",
             "tests/runner/plugin/test_two_networks.py"]


def parts(out: Path, work: Path, dry: bool) -> dict[str, tuple[int, list[str]]]:
    """name -> (time limit in seconds, command)."""
    py = [sys.executable]
    cores = str(os.cpu_count() or 2)
    if dry:
        return {
            "tests": (120, [*py, "-m", "pytest", "-q", "-m", "requires_gpu", "--collect-only", "-p", "no:cacheprovider",
                            *GPU_TESTS]),
            "precision": (240, [*py, "benchmarks/precision.py", "--preset", "tiny", "--samples", "8", "--tokens", "8",
                                "--steps", "20", "--precisions", "fp32", "bf16", "--json", str(work / "precision.json")]),
            "long_run": (240, [*py, "benchmarks/long_run.py", "--preset", "tiny", "--samples", "8", "--steps", "600",
                               "--precisions", "fp32-reduced", "fp32", "--json", str(work / "long_run.json")]),
            "training": (240, [*py, "benchmarks/training.py", "--device", "cpu", "--epochs", "1",
                               "--json", str(work / "training.json")]),
        }
    return {
        "tests": (210, [*py, "-m", "pytest", "-q", "-n", cores, "-m", "requires_gpu", "-p", "no:cacheprovider",
                        "--junitxml", str(out / "junit.xml"), "--timeout", "600", *GPU_TESTS]),
        "precision": (110, [*py, "benchmarks/precision.py", "--preset", "large", "--samples", "1000", "--tokens", "32",
                            "--steps", "200", "--device", "cuda", "--json", str(work / "precision.json")]),
        # the reduced iteration first (the run the paper's Fig. 4 needs: over 2,000 steps, so that its samples
        # synchronise and reduce), then fp32 in full, then tf32 (H200, 2026-11-26: long_run reached 110 s before
        # its second precision at 800 steps)
        "long_run": (300, [*py, "benchmarks/long_run.py", "--preset", "large", "--steps", "2000", "--device", "cuda",
                           "--precisions", "fp32-reduced", "fp32", "tf32", "--json", str(work / "long_run.json")]),
        "training": (45, [*py, "benchmarks/training.py", "--device", "cuda", "--json", str(work / "training.json")]),
    }


def run_part(name: str, limit: int, cmd: list[str], out: Path, work: Path) -> dict:
    t0 = time.monotonic()
    with open(out / f"{name}.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1",
                                     "HF_DATASETS_OFFLINE": "1", "PYTHONPATH": os.pathsep.join(
                                         [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])})
        try:
            code = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)  # the part and whatever it started (pytest workers, runner children)
            proc.wait()
            code = None
    result = {"command": " ".join(cmd[1:]), "limit_s": limit, "seconds": round(time.monotonic() - t0, 1),
              "exit": code, "status": "ok" if code == 0 else ("timed out" if code is None else "failed")}
    measured = work / f"{name}.json"
    if measured.exists():
        result["measured"] = json.loads(measured.read_text())
    junit = out / "junit.xml"
    if name == "tests" and junit.exists():
        result["tests"] = junit_summary(junit)
    return result


def junit_summary(path: Path) -> dict:
    cases = ET.parse(path).getroot().iter("testcase")
    summary: dict = {"passed": 0, "failed": [], "skipped": 0}
    for case in cases:
        name = f"{case.get('classname')}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            summary["failed"].append(name)
        elif case.find("skipped") is not None:
            summary["skipped"] += 1
        else:
            summary["passed"] += 1
    return summary


def environment() -> dict:
    import torch

    env = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "cpu_count": os.cpu_count()}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env.update(gpu=props.name, gpu_memory_gib=round(props.total_memory / 2**30, 1),
                   multiprocessors=props.multi_processor_count)
    try:
        import transformers

        env["transformers"] = transformers.__version__
    except ImportError:
        pass
    return env


def summary_markdown(results: dict) -> str:
    lines = ["# GPU check", "", "Environment: " + ", ".join(f"{k} {v}" for k, v in results["environment"].items()), "",
             "| part | status | seconds (limit) |", "|---|---|---|"]
    for name, r in results["parts"].items():
        lines.append(f"| {name} | {r['status']} (exit {r['exit']}) | {r['seconds']} ({r['limit_s']}) |")
    tests = results["parts"].get("tests", {}).get("tests")
    if tests:
        lines += ["", f"Tests: {tests['passed']} passed, {len(tests['failed'])} failed, {tests['skipped']} skipped"]
        lines += [f"- FAILED {name}" for name in tests["failed"]]
    precision = results["parts"].get("precision", {}).get("measured")
    if precision:
        lines += ["", "| variant | steps/s | TFLOP/s | matmul peak | of peak | statistics that agree with fp32 |",
                  "|---|---|---|---|---|---|"]
        for variant, r in precision["variants"].items():
            agree = r.get("agrees_with_fp32")
            shown = "-" if agree is None else ", ".join(
                f"{net}: {sum(v.values())}/{len(v)}" for net, v in agree.items())
            lines.append(f"| {variant} | {r['steps_per_s']:.1f} | {r['tflops']:.1f} | {r['matmul_peak_tflops']:.1f} | "
                         f"{r['fraction_of_peak']:.0%} | {shown} |")
    long_run = results["parts"].get("long_run", {}).get("measured")
    if long_run:
        lines += ["", f"albert_long: {long_run['plan']['networks']} networks x {long_run['plan']['steps']:g} steps",
                  "", "| precision | steps/s | extrapolated hours | plan's hours | plan / measured | peak RSS GiB |",
                  "|---|---|---|---|---|---|"]
        for precision, r in long_run["runs"].items():
            plan, ratio = r["plan_hours"], r["plan_over_measured"]
            plan = plan if isinstance(plan, str) else f"{plan:.2f}"
            ratio = "-" if ratio is None else f"{ratio:.2f}"
            lines.append(f"| {precision} | {r['steps_per_s']:.1f} | {r['extrapolated_hours']:.2f} | {plan} | {ratio} | "
                         f"{r['peak_rss_bytes'] / 2**30:.2f} |")
    training = results["parts"].get("training", {}).get("measured")
    if training:
        lines += ["", f"Training ({training['spec']}, {training['device']}): plain loop {training['plain_s']:.2f} s, "
                  f"runner {training['runner_s']:.2f} s, overhead {training['overhead']:+.1%} "
                  f"(training alone {training['training_overhead']:+.1%})"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path, help="folder for results.json, summary.md and the logs")
    ap.add_argument("--dry-run", action="store_true", help="each part at toy size on the CPU (no CUDA needed)")
    ap.add_argument("--parts", nargs="+", help="run only these parts")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.out / ".work"  # the benchmarks' JSON, folded into results.json
    work.mkdir(exist_ok=True)
    todo = parts(args.out.resolve(), work.resolve(), args.dry_run)
    unknown = set(args.parts or []) - set(todo)
    if unknown:
        ap.error(f"unknown part(s) {', '.join(sorted(unknown))}; the parts are {', '.join(todo)}")
    results = {"environment": environment(), "dry_run": args.dry_run, "parts": {}}
    for name, (limit, cmd) in todo.items():
        if args.parts and name not in args.parts:
            continue
        print(f"gpu_check: {name} (at most {limit} s)", flush=True)
        results["parts"][name] = run_part(name, limit, cmd, args.out, work)
        print(f"gpu_check: {name}: {results['parts'][name]['status']} in {results['parts'][name]['seconds']} s",
              flush=True)
        (args.out / "results.json").write_text(json.dumps(results, indent=2))
        (args.out / "summary.md").write_text(summary_markdown(results))
    for f in work.iterdir():
        f.unlink()
    work.rmdir()
    print((args.out / "summary.md").read_text())
    return 0 if all(r["status"] == "ok" for r in results["parts"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
