"""The same ALBERT trajectories in fp64, fp32, tf32 and bf16: steps/s and the paper's statistics
against fp32, with 95% bootstrap intervals over samples.

Each precision is one ``runner apply`` of the same spec (same model, inputs, perturbations) with
``untrusted_precision = true``, so that every measure runs even where validation would refuse it.
Reported per precision and network: steps/s (the pass's own rate), the chaotic fraction (samples
whose lambda(t) was ever positive), the mean local Lyapunov exponent per step, the median
synchronisation offset and the final N_eff. A statistic *agrees* with fp32 when the intervals
overlap (N_eff is one number per network: agreement within 5%). On the CPU tf32 is fp32 (it only
changes CUDA matmuls).

    python benchmarks/precision.py --preset tiny --samples 64 --steps 300
    python benchmarks/precision.py --preset large --samples 1000 --steps 500 --device cuda
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

from benchmarks.iterate import PRESETS, make_model  # noqa: E402

PRECISIONS = ("fp64", "fp32", "tf32", "bf16")

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
source = "builtin:pydoc-topics"
samples = {samples}
tokens = {tokens}

[dynamics]
steps = {steps}
precision = "{precision}"
untrusted_precision = true
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


def interval(values: np.ndarray, statistic) -> tuple[float, float, float]:
    """The statistic and its 95% bootstrap interval (percentile, 999 resamples)."""
    from scipy.stats import bootstrap

    values = values[np.isfinite(values)]
    if values.size < 2:
        return (float(statistic(values)) if values.size else float("nan"), float("nan"), float("nan"))
    ci = bootstrap((values,), statistic, n_resamples=999, method="percentile",
                   rng=np.random.default_rng(0)).confidence_interval
    return float(statistic(values)), float(ci.low), float(ci.high)


def statistics(store: Path, network: str) -> dict[str, tuple[float, float, float]]:
    import xarray as xr

    ds = xr.open_zarr(store, consolidated=False).sel(network=network)
    lam = ds["lyapunov_per_step"].values.astype(np.float64)
    lam[~np.isfinite(lam)] = np.nan
    chaotic = (np.nan_to_num(lam, nan=-1.0) > 0).any(axis=1).astype(np.float64)
    offsets = ds["sync_offset"].values.astype(np.float64)  # NaN: never synchronised
    neff = float(ds["effective_dimension"].values[-1])
    return {"chaotic fraction": interval(chaotic, np.mean), "mean LLE/step": interval(np.nanmean(lam, axis=1), np.mean),
            "median sync offset": interval(offsets[np.isfinite(offsets)], np.median), "final N_eff": (neff, neff, neff)}


def agrees(name: str, a: tuple, ref: tuple) -> bool:
    if name == "final N_eff":
        return abs(a[0] - ref[0]) <= 0.05 * abs(ref[0])
    if not all(np.isfinite(v) for v in (*a, *ref)):
        return a[0] == ref[0] or (np.isnan(a[0]) and np.isnan(ref[0]))
    return a[1] <= ref[2] and ref[1] <= a[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precisions", nargs="+", default=list(PRECISIONS), choices=PRECISIONS)
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()

    from runner.apply import apply, prepare

    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = make_model(tmp, args.preset)
        for precision in args.precisions:
            store = tmp / f"{precision}.zarr"
            spec = tmp / f"{precision}.toml"
            spec.write_text(SPEC.format(name=precision, store=store, model=model, samples=args.samples,
                                        tokens=args.tokens, steps=args.steps, precision=precision, device=args.device))
            t0 = time.perf_counter()
            outcome = apply(prepare(spec), quiet=True)
            assert not outcome.failed, outcome.failed
            seconds = time.perf_counter() - t0
            results[precision] = {"seconds": seconds, "steps_per_s": 2 * args.steps / seconds,
                                  **{net: statistics(store, net) for net in ("pretrained", "initial")}}
    ref = results.get("fp32")
    print(f"ALBERT-{args.preset} width, {args.samples} samples x {args.tokens} tokens, {args.steps} steps, {args.device}")
    print(f"{'precision':<9} {'steps/s':>8}  {'network':<10} {'statistic':<20} {'value [95% CI]':<34} vs fp32")
    for precision, r in results.items():
        for net in ("pretrained", "initial"):
            for name, v in r[net].items():
                same = "-" if ref is None or precision == "fp32" else ("agrees" if agrees(name, v, ref[net][name])
                                                                      else "DIFFERS")
                print(f"{precision:<9} {r['steps_per_s']:>8.1f}  {net:<10} {name:<20} "
                      f"{v[0]:>10.4g} [{v[1]:.4g}, {v[2]:.4g}]".ljust(93) + f" {same}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
