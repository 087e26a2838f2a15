"""Golden pins of what the runner plans and stores, taken before the engine was restructured.

``python -m tests.golden.pins`` rewrites ``plans.json`` and ``values.json``; do that only on
purpose (a change of task ids comes with a new ``store_format``, see docs/architecture.md).
``python -m tests.golden.pins --plans NAME...`` pins the plans of new or deliberately changed specs.

- plans: for every shipped spec, ``runner plan --json`` offline: each task's id, kind, measure,
  network and dependencies, and the unmet requirements.
- values: small real runs (``quickstart``, ``reference_maps``, the tiny LSTM study, which has
  every training measure kind) through ``runner apply``: per variable and coordinate its dims,
  shape, dtype and a SHA-256 of its values. Floating-point bits depend on the machine (BLAS picks
  its kernels by CPU generation), so values are pinned per machine: each pin names the
  fingerprint (Python, torch, CPU capability and model) it was taken on, and a run is compared with
  the most specific pin that matches it, with one thread. ``--values`` adds the pin of this machine
  (take it from a commit whose values an existing pin verified, then check the newer one against it).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
RUNS = {"quickstart": "specs/quickstart.toml", "reference_maps": "specs/reference_maps.toml",
        "lstm_tiny": "specs/tiny/lstm_tiny.toml"}


def shipped_specs() -> list[Path]:
    return sorted(ROOT.glob("specs/**/*.toml"))


def env(cache: Path) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k != "RUNNER_TEST_STALL"}
    e.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
             TRANSIENT_CACHE=str(cache), PYTHONPATH=str(ROOT))
    return e


def fingerprint() -> dict[str, str]:
    import torch

    return {"python": platform.python_version(), "torch": torch.__version__,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(), "machine": platform.machine(),
            "cpu_model": cpu_model()}


def cpu_model() -> str:
    """Vendor, family and model of this CPU (``GenuineIntel 6/207``): what BLAS chooses its kernels by."""
    fields = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        return platform.processor() or "unknown"
    return f"{fields.get('vendor_id', '?')} {fields.get('cpu family', '?')}/{fields.get('model', '?')}"


def pin_for(pins: list[dict], here: dict[str, str]) -> dict | None:
    """The pin taken on this machine: its fingerprint's every key matches, the most keys first (a
    pin taken before fingerprints named the CPU model matches any CPU of its capability)."""
    matching = [p for p in pins if all(here.get(k) == v for k, v in p["fingerprint"].items())]
    return max(matching, key=lambda p: len(p["fingerprint"]), default=None)


def runner(*args: str, cwd: Path, cache: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runner.cli", *args], cwd=cwd, env=env(cache),
                          capture_output=True, text=True, timeout=1800)


def plan_of(spec: Path, work: Path) -> dict:
    result = runner("plan", str(spec), "--json", cwd=work, cache=work / "cache")
    assert result.returncode == 0, result.stderr
    return summarise(json.loads(result.stdout))


def summarise(plan: dict) -> dict:
    """What is pinned of a ``plan --json``: each task's id, kind, measure, network and dependencies."""
    keys = ("id", "kind", "measure", "network", "deps")
    if "points" in plan:  # a sweep: the tasks of each point
        return {"points": {p["name"]: _listed([{k: t.get(k) for k in keys} for t in p["tasks"]]) for p in plan["points"]},
                "unmet": len(plan["unmet"])}
    return {"tasks": _listed([{k: t.get(k) for k in keys} for t in plan["tasks"]]), "unmet": len(plan["unmet"])}


#: Plans with more tasks are pinned by their count and a SHA-256 of the list (plans.json stays small).
LISTED = 300


def _listed(tasks: list[dict]) -> list[dict] | dict:
    if len(tasks) <= LISTED:
        return tasks
    return {"count": len(tasks), "sha256": hashlib.sha256(json.dumps(tasks, sort_keys=True).encode()).hexdigest()}


def digest(values: np.ndarray) -> str:
    if values.dtype == object or values.dtype.kind in "UT":
        data = "\x00".join(map(str, values.ravel())).encode()
    else:
        data = np.ascontiguousarray(values).tobytes()
    return hashlib.sha256(data).hexdigest()


def values_of(store: Path) -> dict:
    import xarray as xr

    ds = xr.open_zarr(store, consolidated=False).load()
    out = {}
    for name, var in {**ds.coords, **ds.data_vars}.items():
        if name == "checkpoint_path":  # absolute location of the run
            continue
        out[str(name)] = {"dims": list(var.dims), "shape": list(var.shape), "dtype": str(var.dtype),
                          "sha256": digest(var.values)}
    return out


def run_values(name: str, work: Path) -> dict:
    """Apply a shipped spec from a copy whose store is in ``work`` and pin its values."""
    src = ROOT / RUNS[name]
    text = src.read_text().replace("../../tests/data/", f"{ROOT}/tests/data/")
    store = work / f"{name}.zarr"
    spec = work / f"{name}.toml"
    spec.write_text(text.replace("[experiment]\n", f'[experiment]\nstore = "{store}"\n', 1))
    result = runner("apply", str(spec), "-q", cwd=work, cache=work / "cache")
    assert result.returncode == 0, result.stderr
    return values_of(store)


def main(argv: list[str]) -> None:
    """No arguments: pin every plan and the values. ``--plans SPEC...``: pin (or re-pin) the plans
    of these specs only (paths relative to specs/), for a new spec or one changed on purpose.
    ``--values``: add (or replace) the values of this machine only."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        pins = json.loads((HERE / "values.json").read_text())["pins"] if argv[:1] == ["--values"] else []
        if argv[:1] == ["--values"]:
            here = fingerprint()
            pins = [p for p in pins if p["fingerprint"] != here]
            pins.append({"fingerprint": here, "runs": {name: run_values(name, work) for name in RUNS}})
            (HERE / "values.json").write_text(json.dumps({"pins": pins}, indent=1, sort_keys=True) + "\n")
            return
        if argv[:1] == ["--plans"]:
            plans = json.loads((HERE / "plans.json").read_text())
            plans.update({name: plan_of(ROOT / "specs" / name, work) for name in argv[1:]})
            plans = {k: v for k, v in plans.items() if (ROOT / "specs" / k).exists()}
        else:
            plans = {str(p.relative_to(ROOT / "specs")): plan_of(p, work) for p in shipped_specs()}
        (HERE / "plans.json").write_text(json.dumps(plans, indent=1, sort_keys=True) + "\n")
        if argv:
            return
        values = {"pins": [{"fingerprint": fingerprint(), "runs": {name: run_values(name, work) for name in RUNS}}]}
        (HERE / "values.json").write_text(json.dumps(values, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
