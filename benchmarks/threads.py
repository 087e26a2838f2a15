"""The thread policy against torch's default and against one thread, quiet and with one busy core.

Two workloads, each a real ``runner apply`` in a fresh process per configuration:

- ``quickstart``: ``specs/quickstart.toml`` as shipped (three tiny ALBERT networks and a tanh
  reservoir, 300 steps, every measure); reported as the trajectory steps per second of its
  iterate tasks over the whole apply (model loading and the measures included);
- ``base``: one ALBERT-base-width layer (768 hidden, 12 heads, random weights), 8 sentences x 32
  tokens, 20 steps, D(t) and lambda(t); reported as its iteration loop's steps/s.

Configurations:

- ``torch default``: torch's own thread count (one per core);
- ``one thread``: ``--threads 1``;
- ``policy``: what ``runner apply`` does by itself (:mod:`runner.run.threads`), its timing of the
  candidates included when not cached yet.

"Busy" runs one process spinning on a core for the whole measurement. The policy should be at
least as fast as the better of the two others in both conditions (within the noise of a shared
machine: each configuration runs ``--repeats`` times, best kept).

    python benchmarks/threads.py                 # both workloads, quiet and busy
    python benchmarks/threads.py --only quickstart --repeats 1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ("torch default", "one thread", "policy")

WORKER = """
import sys, time
mode, spec = sys.argv[1], sys.argv[2]
import torch
from runner.run.apply import apply
from runner.run.prepare import prepare
threads = {"torch default": torch.get_num_threads(), "one thread": 1, "policy": None}[mode]
t0 = time.perf_counter()
apply(prepare(spec), quiet=True, threads=threads)
print(time.perf_counter() - t0)
"""


def base_spec(work: Path) -> Path:
    """One ALBERT-base-width layer (random weights), 8 sentences x 32 tokens, 20 steps, D(t) and lambda(t)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from iterate import make_model, spec_text

    spec = work / "base.toml"
    spec.write_text(spec_text(make_model(work, "base"), samples=8, tokens=32, steps=20, device="cpu", name="base"))
    return spec


def run(mode: str, spec: Path, work: Path) -> tuple[float, int]:
    """Steps/s of the apply's iterate tasks (steps of every network over the apply's wall time for
    a spec with several networks; the loop's own rate for one), and the thread count it used."""
    run_dir = work / f"run-{time.monotonic_ns()}"
    run_dir.mkdir()
    shutil.copy(spec, run_dir / spec.name)
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "MKL_NUM_THREADS")}
    env.update(HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", WORKER, mode, spec.name], cwd=run_dir, env=env, check=True,
                         capture_output=True, text=True)
    seconds = float(out.stdout.strip().splitlines()[-1])
    events = [json.loads(line) for p in run_dir.glob("store/*.runner/events.jsonl") for line in p.read_text().splitlines()]
    started = next(e for e in events if e["event"] == "run_started")
    per_network: dict[int, int] = {}
    for t in started["tasks"]:
        if t.get("kind") == "iterate":
            per_network[t["network"]] = max(per_network.get(t["network"], 0), t.get("steps", 0))
    loops = [e["steps_per_s"] for e in events if e["event"] == "task_done" and e.get("steps_per_s")]
    rate = loops[0] if len(loops) == 1 else sum(per_network.values()) / seconds
    return rate, started["threads"]["threads"]


def busy_core():
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=("quickstart", "base"), action="append")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    workloads = args.only or ["quickstart", "base"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        specs = {"quickstart": ROOT / "specs/quickstart.toml"}
        if "base" in workloads:
            specs["base"] = base_spec(work)
        for name in workloads:
            for condition in ("quiet", "busy"):
                spinner = busy_core() if condition == "busy" else None
                try:
                    rates = {mode: max(run(mode, specs[name], work) for _ in range(args.repeats)) for mode in CONFIGS}
                    chosen = rates["policy"][1]
                    rates = {mode: rate for mode, (rate, _) in rates.items()}
                finally:
                    if spinner:
                        spinner.kill()
                        spinner.wait()
                rows.append((name, condition, rates, chosen))
                print(f"{name:<11} {condition:<6} " + "  ".join(f"{m}: {r:.1f}" for m, r in rates.items()), flush=True)
    print(f"\n{os.cpu_count()} CPUs; steps/s, best of {args.repeats} (the policy's count in brackets)\n")
    print("| workload | load | torch default | one thread | policy | policy / better of the two |")
    print("|---|---|---|---|---|---|")
    for name, condition, r, chosen in rows:
        better = max(r["torch default"], r["one thread"])
        print(f"| {name} | {condition} | {r['torch default']:.1f} | {r['one thread']:.1f} | {r['policy']:.1f} "
              f"({chosen} thread{'s' * (chosen != 1)}) | "
              f"{r['policy'] / better:.2f}x |")


if __name__ == "__main__":
    main()
