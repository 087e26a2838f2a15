"""The same ALBERT trajectories in fp64, fp32, tf32, bf16 and compiled bf16: steps/s, achieved
FLOP/s and the paper's statistics against fp32, with 95% bootstrap intervals over samples.

Each variant is one ``runner apply`` of the same spec (same model, inputs, perturbations) with
``untrusted_precision = true``, so that every measure runs even where validation would refuse it;
``bf16-compiled`` adds ``[dynamics] compile = true``. Reported per variant and network: steps/s of
the iteration loop after its first step (:func:`loop_rates`: model loading, input drawing and
compilation excluded), the FLOP/s that rate achieves (:func:`benchmarks.iterate.flops_per_token_step` over x
and its Lyapunov twin) against a matmul of the same precision measured in the same run, the
chaotic fraction (samples whose lambda(t) was ever positive), the mean local Lyapunov exponent per
step, the median synchronisation offset, the mean transient-chaos length, the censored fraction and
the final N_eff (:mod:`runner.studies.depth.agreement`). A statistic *agrees* with fp32 when the
intervals overlap (N_eff is one number per network: agreement within 5%). On the CPU tf32 is
fp32 (it only changes CUDA matmuls).

    python benchmarks/precision.py --preset tiny --samples 64 --steps 300
    python benchmarks/precision.py --preset large --samples 1000 --steps 300 --device cuda --json out.json
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

from benchmarks.iterate import PRESETS, english_text, flops_per_token_step, make_model  # noqa: E402

#: variant -> (the spec's precision, compiled)
VARIANTS = {"fp64": ("fp64", False), "fp32": ("fp32", False), "tf32": ("tf32", False), "bf16": ("bf16", False),
            "bf16-compiled": ("bf16", True)}
NETWORKS = ("pretrained", "initial")

SPEC = """
[experiment]
name = "{name}"
store = "{store}"
seed = 0

[[model]]
name = "pretrained"
source = "path:{model}"

[[model]]
name = "initial"
source = "path:{model}"
init = {{ scheme = "truncated_normal", std = 0.02, clip = 2.0 }}

[input]
source = "{text}"
samples = {samples}
tokens = {tokens}

[dynamics]
steps = {steps}
precision = "{precision}"
untrusted_precision = true
compile = {compile}
device = "{device}"

[[measure]]
kind = "token_deviation"

[[measure]]
kind = "lyapunov"

[[measure]]
kind = "transient_chaos"

[[measure]]
kind = "effective_dimension"
"""


def matmul_tflops(precision: str, device: str) -> float:
    """TFLOP/s of a square matmul in ``precision`` on ``device`` (8192 on CUDA, 1024 on the CPU):
    the peak a step's rate is set against, measured in the same run."""
    import torch

    from runner.core.device import set_precision

    cuda = device.startswith("cuda")
    n = 8192 if cuda else 1024
    dtype = {"fp64": torch.float64, "bf16": torch.bfloat16}.get(precision, torch.float32)
    set_precision(precision)
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    for _ in range(2):
        a @ b
    sync()
    reps = 10 if cuda else 3
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync()
    set_precision("fp32")
    return 2 * n**3 * reps / (time.perf_counter() - t0) / 1e12


def loop_rates(store: Path) -> dict[str, dict[str, float]]:
    """Each network's iteration rate, from the run's events: ``loop`` is the ``task_done`` event's
    (the whole loop: the first step's compilation included), ``steady`` counts from the first
    ``progress`` event (after the first step) to ``task_done``."""
    import xarray as xr

    labels = list(xr.open_zarr(store, consolidated=False)["network"].values)
    events = [json.loads(line) for line in store.with_suffix(".runner").joinpath("events.jsonl").read_text().splitlines()]
    rates = {}
    for done in (e for e in events if e["event"] == "task_done" and e.get("steps_per_s")):
        first = next((e for e in events if e["event"] == "progress" and e["network"] == done["network"]), None)
        steady = done["steps_per_s"]
        if first is not None and done["ts"] > first["ts"] and first["total_steps"] > first["step"]:
            steady = (first["total_steps"] - first["step"]) / (done["ts"] - first["ts"])
        rates[str(labels[done["network"]])] = {"loop": done["steps_per_s"], "steady": steady}
    return rates


def run_variant(variant: str, model: Path, tmp: Path, args) -> dict:
    import xarray as xr

    from runner.run.apply import apply
    from runner.run.prepare import prepare
    from runner.studies.depth.agreement import statistics

    precision, compiled = VARIANTS[variant]
    store, spec = tmp / f"{variant}.zarr", tmp / f"{variant}.toml"
    spec.write_text(SPEC.format(name=variant, store=store, model=model, text=tmp / "english.txt", samples=args.samples,
                                tokens=args.tokens,
                                steps=args.steps, precision=precision, compile=str(compiled).lower(),
                                device=args.device))
    t0 = time.perf_counter()
    outcome = apply(prepare(spec), quiet=True)
    assert not outcome.failed, outcome.failed
    seconds = time.perf_counter() - t0
    cfg = PRESETS[args.preset]
    rows = 2 * args.samples  # x and its Lyapunov twin
    flop_per_step = flops_per_token_step(cfg["hidden_size"], cfg["intermediate_size"], args.tokens) * rows * args.tokens
    rates = loop_rates(store)
    rate = float(np.mean([r["steady"] for r in rates.values()]))
    peak = matmul_tflops(precision, args.device)
    return {"apply_seconds": seconds, "steps_per_s": rate, "steps_per_s_per_network": rates,
            "tflops": flop_per_step * rate / 1e12, "matmul_peak_tflops": peak,
            "fraction_of_peak": flop_per_step * rate / 1e12 / peak,
            **{net: statistics(xr.open_zarr(store, consolidated=False), net) for net in NETWORKS}}


def main() -> None:
    from runner.studies.depth.agreement import agrees

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precisions", nargs="+", default=["fp32", "tf32", "bf16", "bf16-compiled"], choices=VARIANTS)
    ap.add_argument("--json", type=Path, help="also write the results here (after each variant)")
    args = ap.parse_args()

    results: dict[str, dict] = {"config": {k: getattr(args, k) for k in ("preset", "samples", "tokens", "steps", "device")},
                                "variants": {}}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = make_model(tmp, args.preset)
        english_text(tmp)
        for variant in args.precisions:
            results["variants"][variant] = run_variant(variant, model, tmp, args)
            ref = results["variants"].get("fp32")
            for v, r in results["variants"].items():
                r["agrees_with_fp32"] = None if ref is None or v == "fp32" else {
                    net: {name: bool(agrees(name, r[net][name], ref[net][name])) for name in r[net]} for net in NETWORKS}
            if args.json:  # after each variant: a part stopped at its time limit keeps what it measured
                args.json.write_text(json.dumps(results, indent=2))
    print(f"ALBERT-{args.preset} width, {args.samples} samples x {args.tokens} tokens, {args.steps} steps, {args.device}")
    print(f"{'variant':<14} {'steps/s':>8} {'TFLOP/s':>8} {'of peak':>8}  {'network':<10} {'statistic':<20} "
          f"{'value [95% CI]':<34} vs fp32")
    for variant, r in results["variants"].items():
        for net in NETWORKS:
            for name, v in r[net].items():
                same = "-" if r["agrees_with_fp32"] is None else ("agrees" if r["agrees_with_fp32"][net][name]
                                                                   else "DIFFERS")
                print(f"{variant:<14} {r['steps_per_s']:>8.1f} {r['tflops']:>8.2f} {r['fraction_of_peak']:>8.0%}  "
                      f"{net:<10} {name:<20} " + f"{v[0]:>10.4g} [{v[1]:.4g}, {v[2]:.4g}]".ljust(34) + f" {same}")


if __name__ == "__main__":
    main()
