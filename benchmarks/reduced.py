"""The reduced iteration (``[dynamics] reduce = "synchronized"``) against the full one, in one process.

The same spec (an ALBERT of the preset's width: a randomly initialised one and one re-drawn with the
paper's truncated normal, ``english_text`` sentences, D(t), lambda(t), transient chaos and N_eff)
is applied full and reduced, one after the other. Printed: each run's wall time and loop rate, their
ratio, the fraction of sample-steps run reduced (from the store's ``reduced_step``), the guards'
share of the reduced run's loop, the samples the guard refused, and the paper's statistics of both
stores with 95% bootstrap intervals over samples (:mod:`runner.studies.depth.agreement`: chaotic
fraction, mean lambda per step, median synchronisation offset, mean transient-chaos length and
censored fraction; final N_eff within 5%). The last line is
``speed-up S x; statistics agree: yes`` (or ``no``, naming what differs).

    python benchmarks/reduced.py --quick                       # base width, a few minutes on 2 cores
    python benchmarks/reduced.py --preset base --steps 10000   # the issue's run (CPU: about 25 min)
    python benchmarks/reduced.py --preset large --samples 1000 --steps 2000 --device cuda --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.iterate import english_text, make_model  # noqa: E402
from benchmarks.precision import loop_rates  # noqa: E402

#: The networks of the spec: a randomly initialised ALBERT (transformers' init, "pretrained" in the
#: paper's role) and one re-drawn with the paper's truncated normal.
MODELS = {"pretrained": '[[model]]\nname = "pretrained"\nsource = "path:{model}"\n',
          "initial": '[[model]]\nname = "initial"\nsource = "path:{model}"\n'
                     'init = {{ scheme = "truncated_normal", std = {std}, clip = 2.0 }}\n'}

SPEC = """
[experiment]
name = "{name}"
store = "{store}"
seed = 0

{models}

[input]
source = "{text}"
samples = {samples}
tokens = {tokens}

[dynamics]
steps = {steps}
checkpoint_every = {segment}
device = "{device}"
reduce = "{reduce}"

[[measure]]
kind = "token_deviation"

[[measure]]
kind = "lyapunov"
tau = 50

[[measure]]
kind = "transient_chaos"

[[measure]]
kind = "effective_dimension"
every = {neff_every}
"""


def reduced_fraction(store: Path, steps: int) -> tuple[float, int]:
    """The fraction of sample-steps run reduced, and the samples the guard refused."""
    import xarray as xr

    ds = xr.open_zarr(store, consolidated=False)
    start = ds["reduced_step"].values.astype(np.float64)
    done = np.where(np.isfinite(start), steps - np.nan_to_num(start), 0.0)
    refused = ds["reduce_refused_step"].values
    ended = np.where(np.isfinite(refused) & np.isfinite(start), steps - np.nan_to_num(refused), 0.0)
    return float((done - ended).sum() / (steps * start.size)), int(np.isfinite(refused).sum())


def guard_seconds(store: Path) -> float:
    events = store.with_suffix(".runner").joinpath("events.jsonl").read_text().splitlines()
    return sum(e.get("guard_seconds", 0.0) for e in map(json.loads, events) if e["event"] == "task_done")


def run(reduce: str, model: Path, tmp: Path, args) -> dict:
    from runner.run.apply import apply
    from runner.run.prepare import prepare

    store, spec = tmp / f"{reduce}.zarr", tmp / f"{reduce}.toml"
    models = "\n".join(MODELS[n] for n in args.networks).format(model=model, std=args.std)
    spec.write_text(SPEC.format(name=reduce, store=store, models=models, text=tmp / "english.txt", samples=args.samples,
                                tokens=args.tokens, steps=args.steps, segment=args.segment, device=args.device,
                                reduce=reduce, neff_every=args.neff_every))
    from runner.core.estimate import Calibrator, estimate

    plan = estimate(prepare(spec), others=False, calibrated=Calibrator(refresh=True, directory=tmp / "calibration"))
    t0 = time.perf_counter()
    outcome = apply(prepare(spec), quiet=True)
    assert not outcome.failed, outcome.failed
    wall = time.perf_counter() - t0
    import xarray as xr

    from runner.studies.depth.agreement import statistics

    rates = loop_rates(store)
    ds = xr.open_zarr(store, consolidated=False)
    out = {"store": store, "wall_s": wall, "plan_s": plan.seconds if not plan.missing else float("nan"), "steps_per_s": {n: r["steady"] for n, r in rates.items()},
           "loop_s": sum(args.steps / r["loop"] for r in rates.values()),
           **{net: statistics(ds, net) for net in args.networks}}
    if reduce != "none":
        out["reduced_fraction"], out["refused"] = reduced_fraction(store, args.steps)
        out["guard_s"] = guard_seconds(store)
    return out


def compare(full: dict, reduced: dict, networks: list[str]) -> list[str]:
    """Each (network, statistic) whose values do not agree."""
    from runner.studies.depth.agreement import agrees

    return [f"{net} {name}" for net in networks for name in full[net] if not agrees(name, reduced[net][name],
                                                                                    full[net][name])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=("tiny", "base", "large"), default="base")
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--segment", type=int, default=1000, help="[dynamics] checkpoint_every")
    ap.add_argument("--std", type=float, default=0.02, help="the initial network's truncated-normal std")
    ap.add_argument("--neff-every", type=int, default=10)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--networks", nargs="+", choices=sorted(MODELS), default=["pretrained", "initial"])
    ap.add_argument("--quick", action="store_true", help="base width, 4 samples, 2,000 steps: minutes on 2 cores")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.quick:
        args.preset, args.samples, args.steps, args.segment = "base", 4, 2000, 500

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = make_model(tmp, args.preset)
        english_text(tmp)
        full = run("none", model, tmp, args)
        reduced = run("synchronized", model, tmp, args)
        differs = compare(full, reduced, args.networks)
    speed_up = full["loop_s"] / reduced["loop_s"]
    print(f"ALBERT-{args.preset} width, {args.samples} samples x {args.tokens} tokens, {args.steps} steps, "
          f"{args.device}, networks: {', '.join(args.networks)}")
    print(f"{'run':<12} {'wall s':>8} {'loop s':>8}  steps/s per network")
    for name, r in (("full", full), ("reduced", reduced)):
        rates = ", ".join(f"{n} {v:.1f}" for n, v in r["steps_per_s"].items())
        print(f"{name:<12} {r['wall_s']:>8.1f} {r['loop_s']:>8.1f}  {rates}")
    print(f"wall ratio {full['wall_s'] / reduced['wall_s']:.2f}; loop ratio {speed_up:.2f}; sample-steps run reduced "
          f"{reduced['reduced_fraction']:.1%}; guards {reduced['guard_s']:.1f} s "
          f"({reduced['guard_s'] / reduced['loop_s']:.1%} of the reduced loop); refused by the guard: "
          f"{reduced['refused']}")
    for name, r in (("full", full), ("reduced", reduced)):
        print(f"plan's estimate of the {name} run: {r['plan_s']:.1f} s against {r['wall_s']:.1f} s measured "
              f"({r['plan_s'] / r['wall_s'] - 1:+.0%})")
    print(f"{'network':<11} {'statistic':<20} {'full [95% CI]':<34} {'reduced [95% CI]':<34}")
    for net in args.networks:
        for name in full[net]:
            f, r = full[net][name], reduced[net][name]
            print(f"{net:<11} {name:<20} " + f"{f[0]:.4g} [{f[1]:.4g}, {f[2]:.4g}]".ljust(34)
                  + f" {r[0]:.4g} [{r[1]:.4g}, {r[2]:.4g}]")
    if args.json:
        args.json.write_text(json.dumps({"config": {k: getattr(args, k) for k in ("preset", "samples", "tokens", "steps",
                                                                                  "device")},
                                         "full": {k: v for k, v in full.items() if k != "store"},
                                         "reduced": {k: v for k, v in reduced.items() if k != "store"},
                                         "speed_up": speed_up, "differs": differs}, indent=2, default=str))
    print(f"speed-up {speed_up:.1f} x; statistics agree: " + ("yes" if not differs else f"no ({', '.join(differs)})"))


if __name__ == "__main__":
    main()
