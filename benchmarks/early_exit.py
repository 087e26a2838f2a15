"""Wall time of ``runner apply`` with and without ``[dynamics] early_exit``, in the same process.

Each case runs without exit and with it, in both orders (the best time of each is kept: the
first run builds caches), on the same device; the script checks that every stored value is
identical, and prints the samples that exited, when, and the ratios of wall times and of process CPU times (less
sensitive to other jobs on a shared machine):

- ``quickstart``: ``specs/quickstart.toml`` as shipped (tiny ALBERT, its initial networks, a tanh reservoir);
- ``initial_albert``: the tiny ALBERT drawn with the paper's initialisation (truncated normal, 0.02), longer;
- ``contracting_reservoir``: a tanh reservoir at gain 0.5 (N = 512, fp32), whose states reach the
  fixed point 0 exactly (underflow) after about 150 steps: f (a GEMM) dominates a step;
- ``settling_maps``: logistic maps that settle on a fixed point (r = 2.8) and a 2-cycle (r = 3.2) beside
  a chaotic one (r = 4), where samples do exit.

    python benchmarks/early_exit.py                     # all cases, CPU
    python benchmarks/early_exit.py --case quickstart --device cuda
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import tempfile
import time
from pathlib import Path

import numpy as np
import xarray as xr

ROOT = Path(__file__).resolve().parents[1]
CASES = ["quickstart", "initial_albert", "contracting_reservoir", "settling_maps"]

INITIAL_ALBERT = """
[experiment]
name = "initial_albert"
[[model]]
name = "initial"
source = "builtin:tiny-albert"
init = {{ scheme = "truncated_normal", std = 0.02, clip = 2.0 }}
[input]
source = "builtin:pydoc-topics"
samples = {samples}
tokens = 16
[dynamics]
steps = {steps}
[[measure]]
kind = "token_deviation"
[[measure]]
kind = "lyapunov"
tau = 10
[[measure]]
kind = "effective_dimension"
"""

SETTLING_MAPS = """
[experiment]
name = "settling_maps"
[[model]]
name = "fixed"
source = "map:logistic"
params = {{ r = 2.8 }}
[[model]]
name = "cycle"
source = "map:logistic"
params = {{ r = 3.2 }}
[[model]]
name = "chaos"
source = "map:logistic"
[input]
samples = {samples}
[dynamics]
steps = {steps}
precision = "fp64"
[[measure]]
kind = "token_deviation"
[[measure]]
kind = "lyapunov"
k = 1e-8
tau = 10
[[measure]]
kind = "effective_dimension"
"""


RESERVOIR = """
[experiment]
name = "contracting_reservoir"
[[model]]
name = "reservoir"
source = "map:tanh"
params = {{ g = 0.5, n = 512 }}
[input]
samples = {samples}
[dynamics]
steps = {steps}
[[measure]]
kind = "token_deviation"
[[measure]]
kind = "effective_dimension"
every = 10
[[measure]]
kind = "trajectory"
samples = [0]
tokens = [0]
elements = [0, 1, 2]
"""


def spec_text(case: str, samples: int | None, steps: int | None) -> str:
    if case == "quickstart":
        return (ROOT / "specs/quickstart.toml").read_text()
    if case == "initial_albert":
        return INITIAL_ALBERT.format(samples=samples or 16, steps=steps or 1000)
    if case == "contracting_reservoir":
        return RESERVOIR.format(samples=samples or 512, steps=steps or 1000)
    return SETTLING_MAPS.format(samples=samples or 1024, steps=steps or 5000)


def with_options(text: str, store: Path, device: str, early_exit: bool) -> str:
    text = re.sub(r"(\[experiment\]\n)", rf'\1store = "{store}"\n', text, count=1)
    options = f'device = "{device}"\n' + ("early_exit = true\n" if early_exit else "")
    if "[dynamics]\n" in text:
        return text.replace("[dynamics]\n", "[dynamics]\n" + options, 1)
    return text + "\n[dynamics]\n" + options


def run(case: str, work: Path, device: str, samples: int | None, steps: int | None, repeats: int) -> dict:
    from runner.cli import main

    seconds, cpu, stores = {"full": [], "exit": []}, {"full": [], "exit": []}, {}
    for repeat in range(repeats):  # both orders: the first run warms caches
        order = (False, True) if repeat % 2 == 0 else (True, False)
        for early_exit in order:
            label = "exit" if early_exit else "full"
            stores[label] = work / f"{case}_{label}_{repeat}.zarr"
            spec = work / f"{case}_{label}_{repeat}.toml"
            spec.write_text(with_options(spec_text(case, samples, steps), stores[label], device, early_exit))
            t0, c0 = time.perf_counter(), time.process_time()
            with contextlib.redirect_stdout(io.StringIO()):
                code = main(["apply", "-q", str(spec)])
            seconds[label].append(time.perf_counter() - t0)
            cpu[label].append(time.process_time() - c0)
            assert code == 0, f"{case} ({label}) exited {code}"
    runs = {k: [round(x, 2) for x in v] for k, v in seconds.items()}
    seconds, cpu = ({k: min(v) for k, v in d.items()} for d in (seconds, cpu))
    full = xr.open_zarr(stores["full"], consolidated=False).load()
    ex = xr.open_zarr(stores["exit"], consolidated=False).load()
    xr.testing.assert_identical(full.drop_attrs(), ex.drop_vars(["exit_step", "exit_period"]).drop_attrs())
    exited = {}
    for net in ex.network.values:
        step = ex.exit_step.sel(network=net).values
        out = step[np.isfinite(step)]
        exited[str(net)] = {"exited": f"{len(out)}/{len(step)}",
                            "median_exit_step": float(np.median(out)) if len(out) else None,
                            "periods": sorted(set(ex.exit_period.sel(network=net).values[np.isfinite(step)].astype(int).tolist()))}
    return {"case": case, "device": device, "seconds_full": round(seconds["full"], 2),
            "seconds_exit": round(seconds["exit"], 2), "speedup": round(seconds["full"] / seconds["exit"], 3),
            "cpu_seconds_full": round(cpu["full"], 2), "cpu_seconds_exit": round(cpu["exit"], 2),
            "cpu_speedup": round(cpu["full"] / cpu["exit"], 3),
            "identical": True, "wall_seconds_per_run": runs, "networks": exited}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=CASES, action="append")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--samples", type=int)
    ap.add_argument("--steps", type=int)
    ap.add_argument("--repeats", type=int, choices=[1, 2, 3, 4], default=2,
                    help="2: full-exit then exit-full, the best time of each (the first run warms caches)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.case or CASES:
            print(json.dumps(run(case, Path(tmp), args.device, args.samples, args.steps, args.repeats)), flush=True)


if __name__ == "__main__":
    main()
