"""What limits a distributed apply at 8, 64 and 512 GPUs: measured costs on this machine, then a model.

Measures (on this machine, see docs/scaling.md for the numbers and the model):

- ``region write``: one segment's chunk written to a zarr array (the per-pass store write);
- ``record``: one completion record (one small file beside the store, so the cost should not grow
  with the number of records);
- ``scheduler``: the scheduler's cost per task, on the plan of ``specs/scaffold.toml``;
- ``inputs``: drawing and tokenizing the input sentences (each worker does it once);
- ``ray task``: the round trip of an empty Ray task on a warm local cluster (with ``--ray``).

Then prints, for each workload and GPU count, the time per pass and which of GPU compute, the
driver (scheduler + record + submit), the store (aggregate write bandwidth) or worker start-up
(imports + inputs) bounds the throughput.

    python benchmarks/scaling.py [--ray] [--fs-gbps 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def best(f, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def region_write(folder: Path) -> dict[str, float]:
    """Seconds per region write of a segment's chunk, for chunk sizes of 4 KiB to 16 MiB."""
    import zarr

    g = zarr.open_group(folder / "w.zarr", mode="w", zarr_format=3)
    out = {}
    for samples, kept in ((1, 1000), (1000, 10), (1000, 1000), (1000, 4000)):
        a = g.create_array(f"v{samples}_{kept}", shape=(8, samples, kept * 4), chunks=(1, samples, kept),
                           dtype="float32", fill_value=np.nan)
        values = np.random.default_rng(0).random((samples, kept), dtype=np.float32)
        i = iter(range(10_000))
        out[f"{values.nbytes / 2**20:.3g} MiB"] = best(lambda: a.__setitem__((next(i) % 8, slice(None),
                                                                               slice(0, kept)), values))
    return out


def record_cost(folder: Path) -> dict[int, float]:
    """Seconds per completion record with n records already in the store."""
    from runner.layout import LayoutBuilder
    from runner.store import Store

    b = LayoutBuilder()
    b.index("network", 1)
    layout = b.build()
    out = {}
    for n in (100, 1000, 10_000):
        store = Store(folder / f"r{n}.zarr")
        store.open(layout, {})
        store.record_many({f"{i:016x}": {"measure": "m", "seconds": 1.0, "network": i} for i in range(n)})
        i = iter(range(10_000))
        out[n] = best(lambda: store.record(f"new{next(i)}", {"measure": "m", "seconds": 1.0}))
    return out


def scheduler_cost() -> tuple[int, float]:
    from runner.apply import prepare
    from runner.execute.scheduler import DryRun, Scheduler

    p = prepare(Path(__file__).resolve().parents[1] / "specs/scaffold.toml")
    seconds = best(lambda: Scheduler(p.tasks).run(DryRun()), repeat=3)
    return len(p.tasks), seconds / len(p.tasks)


def inputs_cost(samples: int) -> float:
    from models.hub import load_tokenizer
    from models.registry import family_for
    from runner.data.sentences import draw_samples

    source = "builtin:tiny-albert"
    tokenizer = load_tokenizer(family_for(source).location(source, build=True))
    return best(lambda: draw_samples("builtin:pydoc-topics", tokenizer=tokenizer, samples=samples, tokens=32, seed=0),
                repeat=2)


def ray_task_cost() -> float:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False, configure_logging=False)

    @ray.remote(num_cpus=1)
    def empty():
        return None

    ray.get([empty.remote() for _ in range(20)])  # warm workers
    n = 200
    seconds = best(lambda: ray.get([empty.remote() for _ in range(n)]), repeat=3) / n
    ray.shutdown()
    return seconds


# ---------------------------------------------------------------- the model
# One pass of ALBERT-large over 1000 sentences + 1000 twins x 32 tokens is ~1.6 TFLOP per step; at
# 40 TFLOP/s sustained fp32 (60% of an H100's 67) that is 40 ms per step, 20 s for albert_short's
# 500 steps. It writes ~2.5 MB (D(t) of every sample and step, lambda every tau = 10, N_eff) and
# records 3 tasks. (passes, GPU-s per pass, bytes per pass, shards per pass)
SCENARIOS = {
    "albert_short as shipped (5 N_w x 6 networks)": (30, 20.0, 2.5e6, 1),
    "a grid of 10,000 such passes (seeds x inits)": (10_000, 20.0, 2.5e6, 1),
    "albert_short, 64 sample shards per pass (N_eff, D)": (30, 20.0, 2.0e6, 64),
}
RECORDS_PER_PASS = 3
"""Records of a pass (one per measure), written in one rewrite of the store's records."""


def model(costs: dict, gpus: int, passes: int, gpu_s: float, nbytes: float, shards: int, fs_bps: float):
    """Seconds of a whole run under each limit (they overlap: the largest binds)."""
    tasks = passes * shards
    sizes = range(0, passes * RECORDS_PER_PASS, RECORDS_PER_PASS)  # one rewrite per pass
    record_s = sum(costs["record"](n) for n in sizes)
    driver = tasks * (costs["scheduler"] + costs["ray_task"]) + record_s
    if shards > 1:  # the driver merges the shards' files into the store
        driver += passes * nbytes / costs["write_bps"]
    waves = -(-tasks // gpus)
    return {"GPU compute": costs["worker_start"] + waves * gpu_s / shards, "driver": driver,
            "store writes": passes * nbytes / fs_bps}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ray", action="store_true", help="also time an empty Ray task (starts a local cluster)")
    ap.add_argument("--fs-gbps", type=float, default=2.0, help="aggregate write bandwidth of the shared store, GB/s")
    ap.add_argument("--worker-start", type=float, default=5.5, help="seconds for a worker's imports (measured apart)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory() as tmp:
        writes = region_write(Path(tmp))
        records = record_cost(Path(tmp))
    n_tasks, sched = scheduler_cost()
    inputs = inputs_cost(500)
    ray_s = ray_task_cost() if args.ray else 2e-3
    print("measured on this machine")
    for size, s in writes.items():
        print(f"  region write {size:>10}: {s * 1e3:8.2f} ms")
    for n, s in records.items():
        print(f"  record with {n:>6} records in the store: {s * 1e3:8.2f} ms")
    print(f"  scheduler: {sched * 1e6:.1f} us per task ({n_tasks} tasks of specs/scaffold.toml)")
    print(f"  inputs: {inputs:.2f} s to draw and tokenize 500 sentences x 32 tokens (builtin:pydoc-topics)")
    print(f"  ray task round trip: {ray_s * 1e3:.2f} ms" + ("" if args.ray else " (assumed; pass --ray)"))
    big = max(writes, key=lambda k: float(k.split()[0]))
    slope = (records[10_000] - records[1000]) / 9000
    costs = {"scheduler": sched, "ray_task": ray_s, "worker_start": args.worker_start + inputs,
             "write_bps": float(big.split()[0]) * 2**20 / writes[big],
             "record": lambda n: records[1000] + slope * (n - 1000) if n > 1000 else records[1000]}
    print(f"\nmodel: worker start {costs['worker_start']:.1f} s (imports + inputs), store at {args.fs_gbps} GB/s "
          f"aggregate, the driver writes merged shards at {costs['write_bps'] / 1e6:.0f} MB/s (this disk)")
    for name, (passes, gpu_s, nbytes, shards) in SCENARIOS.items():
        print(f"\n{name}: {passes} passes x {gpu_s:.0f} GPU-s" + (f", {shards} shards each" if shards > 1 else ""))
        print(f"  {'GPUs':>5} {'run':>9}  {'limit':<12}" + "".join(f"{k:>14}" for k in
                                                              ("GPU compute", "driver", "store writes")))
        for gpus in (8, 64, 512):
            per = model(costs, gpus, passes, gpu_s, nbytes, shards, args.fs_gbps * 1e9)
            binding = max(per, key=per.get)
            print(f"  {gpus:>5} {per[binding]:>8.0f}s  {binding:<12}" + "".join(f"{v:>13.1f}s" for v in per.values()))


if __name__ == "__main__":
    main()
