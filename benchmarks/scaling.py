"""What limits a distributed apply at 8, 64 and 512 GPUs: measured costs on this machine, then a model.

Measures (on this machine, see docs/scaling.md for the numbers and the model):

- ``region write``: one segment's chunk written to a zarr array (the per-pass store write);
- ``record``: one completion record (one small file beside the store, so the cost should not grow
  with the number of records), and reading all of them (what ``apply``, ``status`` and the monitor
  do), with 100 to 100,000 records in the store; on local disk, and with ``--s3`` also on an
  S3-compatible server on 127.0.0.1 (moto's server mode: a local stand-in, its latency is not S3's);
- ``scheduler``: the scheduler's cost per task, on the plan of ``specs/scaffold.toml``;
- ``inputs``: drawing and tokenizing the input sentences (each worker does it once);
- ``ray task``: the round trip of an empty Ray task on a warm local cluster (with ``--ray``).

Then prints, for each workload and GPU count, the time per pass and which of GPU compute, the
driver (scheduler + record + submit), the store (aggregate write bandwidth) or worker start-up
(imports + inputs) bounds the throughput.

    python benchmarks/scaling.py [--ray] [--s3] [--records 100,1000,10000,100000] [--fs-gbps 2]
"""

from __future__ import annotations

import argparse
import json
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


def _fill(state_dir, store_id: str, n: int) -> dict[str, dict]:
    """``n`` records in the store, written plainly (the set-up, not what is timed); returns them."""
    from runner.storage.records import records_dir

    folder = records_dir(state_dir)
    body = {f"{i:016x}.json": json.dumps({"measure": "m", "seconds": 1.0, "network": i, "store_id": store_id},
                                         sort_keys=True).encode() for i in range(n)}
    folder.write_many(body)  # on S3: 1,000 objects at a time, uploaded concurrently
    return {name[:-5]: json.loads(data) for name, data in body.items()}


def record_cost(root, counts=(100, 1000, 10_000, 100_000)) -> dict[int, tuple[float, float, float | None]]:
    """With n records already in a store under ``root`` (a folder or an ``s3://`` prefix): seconds
    per completion record written (best of 20), seconds to read all n records back, and on S3 the
    seconds to fold the n records into one object (what the end of the apply that wrote them does: a
    LIST per 1,000, one PUT, a DELETE per 1,000; the read is then of the fold and the 20 records
    written since)."""
    from runner.core.layout import LayoutBuilder
    from runner.storage.store import Store

    b = LayoutBuilder()
    b.index("network", 1)
    layout = b.build()
    out = {}
    for n in counts:
        store = Store(root / f"r{n}.zarr")
        store.open(layout, {})
        filled = _fill(store.state_dir, store.store_id, n)
        fold = None
        if not isinstance(store.state_dir, Path):
            store._written.update(filled)  # as the apply that wrote them holds them: the fold fetches none
            t = time.perf_counter()
            store.fold_records()
            fold = time.perf_counter() - t
        i = iter(range(10_000))
        write = best(lambda: store.record(f"new{next(i)}", {"measure": "m", "seconds": 1.0}), repeat=20)
        t = time.perf_counter()
        found = store.tasks()
        read = time.perf_counter() - t
        assert len(found) == n + 20, (len(found), n)
        out[n] = (write, read, fold)
    return out


def s3_record_cost(counts) -> dict[int, tuple[float, float]]:
    """:func:`record_cost` on a bucket of moto's server, started here on 127.0.0.1."""
    from runner.storage.location import location
    from tests.runner import s3_server

    with tempfile.TemporaryDirectory() as tmp:
        server = s3_server.start(Path(tmp) / "moto.log")
        try:
            os.environ.update(server.env)
            return record_cost(location(f"s3://{server.bucket()}/bench"), counts)
        finally:
            s3_server.stop(server)


def scheduler_cost() -> tuple[int, float]:
    from runner.run.prepare import prepare
    from runner.run.execute.scheduler import DryRun, Scheduler

    p = prepare(Path(__file__).resolve().parents[1] / "specs/scaffold.toml")
    seconds = best(lambda: Scheduler(p.tasks).run(DryRun()), repeat=3)
    return len(p.tasks), seconds / len(p.tasks)


def inputs_cost(samples: int) -> float:
    from models.hub import load_tokenizer
    from models.registry import family_for
    from runner.studies.depth.samples import draw_samples

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
"""Records of a pass (one per measure), written together when the pass ends (one small file each)."""


def model(costs: dict, gpus: int, passes: int, gpu_s: float, nbytes: float, shards: int, fs_bps: float):
    """Seconds of a whole run under each limit (they overlap: the largest binds)."""
    tasks = passes * shards
    sizes = range(0, passes * RECORDS_PER_PASS, RECORDS_PER_PASS)  # the records already there at each pass
    record_s = sum(RECORDS_PER_PASS * costs["record"](n) for n in sizes)
    driver = tasks * (costs["scheduler"] + costs["ray_task"]) + record_s
    if shards > 1:  # the driver merges the shards' files into the store
        driver += passes * nbytes / costs["write_bps"]
    waves = -(-tasks // gpus)
    return {"GPU compute": costs["worker_start"] + waves * gpu_s / shards, "driver": driver,
            "store writes": passes * nbytes / fs_bps}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ray", action="store_true", help="also time an empty Ray task (starts a local cluster)")
    ap.add_argument("--s3", action="store_true", help="also time records on moto's S3 server on 127.0.0.1 "
                                                      "(needs moto[server] and s3fs: the test extras)")
    ap.add_argument("--records", default="100,1000,10000,100000", help="record counts to time, comma-separated")
    ap.add_argument("--s3-records", default="100,1000,10000", help="record counts to time on S3 (--s3)")
    ap.add_argument("--fs-gbps", type=float, default=2.0, help="aggregate write bandwidth of the shared store, GB/s")
    ap.add_argument("--worker-start", type=float, default=5.5, help="seconds for a worker's imports (measured apart)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    counts = [int(x) for x in args.records.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        writes = region_write(Path(tmp))
        records = record_cost(Path(tmp), counts)
    s3_records = s3_record_cost([int(x) for x in args.s3_records.split(",")]) if args.s3 else {}
    n_tasks, sched = scheduler_cost()
    inputs = inputs_cost(500)
    ray_s = ray_task_cost() if args.ray else 2e-3
    print("measured on this machine")
    for size, s in writes.items():
        print(f"  region write {size:>10}: {s * 1e3:8.2f} ms")
    print(f"  completion records: {'where':<10} {'in store':>9} {'write one':>11} {'read all':>10} {'read, each':>11}"
          f" {'fold all':>10}")
    for where, table in (("local disk", records), ("S3 (moto)", s3_records)):
        for n, (write, read, fold) in table.items():
            print(f"  {'':<19} {where:<10} {n:>9,} {write * 1e3:>8.2f} ms {read:>8.3f} s {read / n * 1e6:>8.1f} us"
                  + (f" {fold:>8.2f} s" if fold is not None else ""))
    print(f"  scheduler: {sched * 1e6:.1f} us per task ({n_tasks} tasks of specs/scaffold.toml)")
    print(f"  inputs: {inputs:.2f} s to draw and tokenize 500 sentences x 32 tokens (builtin:pydoc-topics)")
    print(f"  ray task round trip: {ray_s * 1e3:.2f} ms" + ("" if args.ray else " (assumed; pass --ray)"))
    big = max(writes, key=lambda k: float(k.split()[0]))
    lo, hi = min(records), max(records)
    slope = (records[hi][0] - records[lo][0]) / (hi - lo)  # per record already there: about 0 (one file each)
    costs = {"scheduler": sched, "ray_task": ray_s, "worker_start": args.worker_start + inputs,
             "write_bps": float(big.split()[0]) * 2**20 / writes[big],
             "record": lambda n: max(records[lo][0] + slope * (n - lo), 0.0)}
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
