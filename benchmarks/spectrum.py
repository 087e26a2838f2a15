"""The Lyapunov spectrum's cost per step as a ratio to the plain iteration (issue 54), through ``runner apply``.

For each case the same spec is applied twice in a fresh folder: once with a near-free measure (N_eff at
the last step only: the plain iteration) and once with ``lyapunov_spectrum`` on every sample (m tangent
vectors by Jacobian-vector products, a QR per step). Printed: each run's task seconds (``show --json``)
and their ratio, the cost of the spectrum per step in plain steps. Offline (tiny ALBERT is built on
first use); on one CPU thread unless ``OMP_NUM_THREADS`` says otherwise.

    OMP_NUM_THREADS=1 python benchmarks/spectrum.py              # a minute or two on one core
    python benchmarks/spectrum.py --steps 400 --samples 32 --m 16
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CASES = {
    "tiny ALBERT, full space (16 x 64 = 1024)": ('source = "builtin:tiny-albert"', 'space = "full"'),
    "tiny ALBERT, within the synchronised set (64)": ('source = "builtin:tiny-albert"\n'
                                                      'init = { scheme = "truncated_normal", std = 0.02, clip = 2.0 }',
                                                      'space = "synchronized"'),
    "tanh reservoir, N = 256": ('source = "map:tanh"\nparams = { g = 1.5, n = 256 }', 'space = "full"'),
}

SPEC = """
[experiment]
name = "bench"
store = "store/bench.zarr"

[[model]]
name = "m"
{model}

[input]
source = "builtin:pydoc-topics"
samples = {samples}
tokens = 16

[dynamics]
steps = {steps}

[[measure]]
{measure}
"""


def seconds(folder: Path, model: str, measure: str, args) -> float:
    """Task seconds of the one measure's pass (the loop, as ``show --json`` reports it)."""
    folder.mkdir(parents=True)
    (folder / "spec.toml").write_text(SPEC.format(model=model, measure=measure, samples=args.samples, steps=args.steps))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    run = [sys.executable, "-m", "runner.cli"]
    done = subprocess.run(run + ["apply", "spec.toml", "-q"], cwd=folder, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stderr)
    shown = subprocess.run(run + ["show", "store/bench.zarr", "--json"], cwd=folder, env=env, capture_output=True,
                           text=True, check=True)
    return sum(t["seconds"] for t in json.loads(shown.stdout)["tasks"] if t.get("seconds"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--m", type=int, default=8)
    args = ap.parse_args()
    plain = f'kind = "effective_dimension"\nevery = {args.steps}'
    print(f"{args.samples} samples, {args.steps} steps, m = {args.m}, every sample measured")
    print(f"{'case':<48} {'plain (s)':>10} {'spectrum (s)':>13} {'ratio':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for i, (case, (model, space)) in enumerate(CASES.items()):
            a = seconds(Path(tmp) / f"{i}plain", model, plain, args)
            spectrum = f'kind = "lyapunov_spectrum"\nm = {args.m}\nsamples = {args.samples}\n{space}'
            b = seconds(Path(tmp) / f"{i}spectrum", model, spectrum, args)
            print(f"{case:<48} {a:>10.2f} {b:>13.2f} {b / a:>6.1f}x")


if __name__ == "__main__":
    main()
