"""Real stores written by real tiny runs of ``runner apply`` (map:tanh, seconds on a CPU)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner.storage.records import drop_records, write_records
from runner.storage.store import read_tasks, runner_dir, store_id

TINY = """\
[experiment]
name = "{name}"
description = "monitor test"
seed = 0

[[model]]
name = "chaotic"
source = "map:tanh"
params = {{ g = 2.0, n = 16 }}

[[model]]
name = "calm"
source = "map:tanh"
params = {{ g = 0.5, n = 16 }}

[input]
samples = 8

[dynamics]
steps = {steps}
checkpoint_every = {every}

[[measure]]
kind = "token_deviation"

[[measure]]
kind = "lyapunov"
tau = 1

[[measure]]
kind = "transient_chaos"

[[measure]]
kind = "effective_dimension"
"""

FROZEN = 1_800_000_000.0


def write_spec(root: Path, name: str, steps: int = 200, every: int = 50) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    spec = root / f"{name}.toml"
    spec.write_text(TINY.format(name=name, steps=steps, every=every))
    return spec


def apply_cmd(spec: Path) -> list[str]:
    return [sys.executable, "-m", "runner.cli", "apply", spec.name, "--quiet"]


def env() -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(Path(__file__).resolve().parents[3]) + os.pathsep + e.get("PYTHONPATH", "")
    return e


@pytest.fixture(scope="session")
def tiny_root(tmp_path_factory) -> Path:
    """A finished store: ``<root>/store/tiny.zarr``, from ``runner apply`` in a subprocess."""
    root = tmp_path_factory.mktemp("tiny")
    spec = write_spec(root, "tiny")
    subprocess.run(apply_cmd(spec), cwd=root, check=True, env=env(), capture_output=True, timeout=120)
    return root


#: Variables a snapshot plots whose values a chaotic map leaves to the CPU's rounding (BLAS picks
#: its kernels by CPU generation, and the chaotic network amplifies the last bit to a visible change
#: within 200 steps): ``normalise`` gives them fixed values, with the same unwritten (NaN) cells.
CPU_DEPENDENT = ("lyapunov_per_step",)


def normalise(root: Path, name: str = "tiny") -> None:
    """Fixed timestamps, durations, device and CPU-dependent values: for deterministic snapshots."""
    store = root / "store" / f"{name}.zarr"
    _fix_values(store)
    log = root / "store" / f"{name}.runner" / "events.jsonl"
    lines = []
    raw = log.read_text().splitlines()
    for i, line in enumerate(raw):
        e = json.loads(line)
        # the log spans 60 s whatever its number of lines (progress events depend on the run's speed)
        e["ts"] = FROZEN - 100 + round(60 * i / max(1, len(raw) - 1), 3)
        if "device" in e:
            e["device"] = "cpu"
        if "steps_per_s" in e:
            e["steps_per_s"] = 1000.0
        if "seconds" in e:
            e["seconds"] = 1.5
        lines.append(json.dumps(e))
    log.write_text("\n".join(lines) + "\n")
    records = read_tasks(store)
    for rec in records.values():
        rec["seconds"] = 1.5 if rec.get("kind") == "iterate" else 0.01
        rec["finished_utc"] = "2026-01-01T00:00:00+00:00"
    write_records(runner_dir(store), store_id(store), records)


def _fix_values(store: Path) -> None:
    import numpy as np
    import zarr

    group = zarr.open_group(store, mode="r+", use_consolidated=False)
    for name in CPU_DEPENDENT:
        if name not in group:
            continue
        arr = group[name]
        values = arr[...]
        grid = np.indices(values.shape, dtype=np.float64)  # network, sample, step
        fixed = 0.4 * np.sin(grid[-1] / 9.0 + grid[1]) - 0.3 * grid[0]
        arr[...] = np.where(np.isnan(values), np.nan, fixed).astype(values.dtype)


def copy_store(src: Path, dst: Path, name: str = "tiny") -> Path:
    (dst / "store").mkdir(parents=True, exist_ok=True)
    for suffix in (".zarr", ".runner"):
        shutil.copytree(src / "store" / f"{name}{suffix}", dst / "store" / f"{name}{suffix}")
    return dst


@pytest.fixture
def done_root(tiny_root, tmp_path) -> Path:
    return copy_store(tiny_root, tmp_path)


@pytest.fixture
def failed_root(tiny_root, tmp_path) -> Path:
    """The tiny store as a run that failed on network 1 ("calm") leaves it: its records gone, a
    ``task_failed`` event with the error in the log."""
    root = copy_store(tiny_root, tmp_path)
    store = root / "store" / "tiny.zarr"
    records = read_tasks(store)
    kept = {k: v for k, v in records.items() if v.get("network") != 1}
    drop_records(runner_dir(store), [k for k in records if k not in kept])
    log = root / "store" / "tiny.runner" / "events.jsonl"
    started = next(json.loads(x) for x in log.read_text().splitlines() if '"run_started"' in x)
    ids = [t["id"] for t in started["tasks"] if t["network"] == 1 and t["kind"] == "iterate"]
    run = dict(started, run="f41led00", pid=os.getpid(), ts=FROZEN - 10,
               tasks=[dict(t, state="done" if t["id"] in kept else "pending") for t in started["tasks"]])
    base = {"run": "f41led00", "pid": os.getpid(), "network": 1}
    new = [run,
           {**base, "ts": FROZEN - 9, "event": "task_started", "task": ids, "total_steps": 200},
           {**base, "ts": FROZEN - 8, "event": "progress", "task": ids, "step": 120, "total_steps": 200,
            "steps_per_s": 60.0},
           {**base, "ts": FROZEN - 7, "event": "task_failed", "task": ids,
            "error": "FloatingPointError: state diverged at step 121 (test)"},
           {**base, "ts": FROZEN - 6, "event": "run_finished", "status": "failed", "seconds": 4.0}]
    with open(log, "a") as f:
        for e in new:
            f.write(json.dumps(e) + "\n")
    return root


@pytest.fixture
def live_run(tmp_path):
    """``runner apply`` of a long map run, still going in another process; SIGINT + wait at the end."""
    spec = write_spec(tmp_path, "live", steps=400_000, every=500)
    proc = subprocess.Popen(apply_cmd(spec), cwd=tmp_path, env=env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    log = tmp_path / "store" / "live.runner" / "events.jsonl"
    deadline = time.monotonic() + 300  # bounds a failure only: it waits for the first progress event
    while time.monotonic() < deadline:
        if log.exists() and '"progress"' in log.read_text():
            break
        if proc.poll() is not None:
            raise AssertionError(f"apply exited early: {proc.stderr.read().decode()}")
        time.sleep(0.1)
    try:
        yield tmp_path, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        proc.stderr.close()


# ---------------------------------------------------------------------- a tiny training run

TRAIN = """\
[experiment]
name = "{name}"
description = "monitor training test"
seed = 0

[corpus]
source = "{corpus}"
lowercase = true
min_count = 2
drop_rare_sentences = false
analysis_tokens = 100

[training]
epochs = 2
lr = 20.0
batch_size = 8
bptt = 10
eval_batch_size = 4
dropout = 0.2
embedding_dim = 8
hidden_dim = 8

[checkpoints]
every_epoch = true
steps = [5]

[[model]]
name = "lm"
kind = "lm"

[[model]]
name = "lm_b"
kind = "lm"
seed = 7

[[measure]]
kind = "svcca"
compare = "final"

[[measure]]
kind = "sparsity"
frequent_words = 5

[[measure]]
kind = "lca"
"""


@pytest.fixture(scope="session")
def train_root(tmp_path_factory) -> Path:
    """A finished training store ``<root>/store/train.zarr`` (2 tiny LSTM LMs, 2 epochs, 4 checkpoints):
    ``runner apply`` in a subprocess on one thread (a few seconds)."""
    root = tmp_path_factory.mktemp("train")
    corpus = Path(__file__).resolve().parents[2] / "data" / "tiny_tagged.conllu"
    spec = root / "train.toml"
    spec.write_text(TRAIN.format(name="train", corpus=corpus))
    e = dict(env(), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    subprocess.run(apply_cmd(spec), cwd=root, check=True, env=e, capture_output=True, timeout=120)
    return root


@pytest.fixture
def train_done(train_root, tmp_path) -> Path:
    return copy_store(train_root, tmp_path, "train")
