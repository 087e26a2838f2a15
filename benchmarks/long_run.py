"""The cost of ``specs/albert_long.toml`` (1e6 steps, 6 networks) from a scaled-down run, beside
``plan``'s estimate of the whole spec on the same device.

The shipped spec with its hub sources swapped for offline ones (a random ALBERT of the chosen
width, ``benchmarks.iterate.make_model``; English sentences from the standard library,
``benchmarks.iterate.english_text``) and its other
tables as shipped: the paper's batch (1000 samples x 32 tokens, the Lyapunov twins beside them),
every measure, ``checkpoint_every``. One network (the pre-trained one) is run for ``--steps``
steps at each ``--precisions``; its steady rate (:func:`benchmarks.precision.loop_rates`)
extrapolates to the spec's steps and networks (a ``<precision>-reduced`` variant, with ``[dynamics] reduce``:
the window as run, then the rest at the rate of its second half, once samples run reduced, beside
``plan``'s estimate of the reduced spec). Every precision runs (``untrusted_precision``):
this times them; ``benchmarks/precision.py`` says which agree with fp32. ``runner plan --calibrate`` gives the estimate of
the whole spec, and the run's peak host memory (RSS) is read off the child process.

    python benchmarks/long_run.py --preset tiny --samples 16 --steps 600 --device cpu
    python benchmarks/long_run.py --preset large --steps 2000 --device cuda --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.iterate import PRESETS, english_text, make_model  # noqa: E402
from benchmarks.precision import loop_rates  # noqa: E402

REDUCED = "-reduced"
"""A variant named ``<precision>-reduced`` runs with ``[dynamics] reduce = "synchronized"``."""


def late_rate(store: Path, network: int, after: int) -> float | None:
    """Steps/s of one network's loop from its first progress event at or past step ``after`` to its last
    (a reduced run: the rate once its samples run reduced); None with fewer than two such events."""
    events = [json.loads(line) for line in store.with_suffix(".runner").joinpath("events.jsonl").read_text().splitlines()]
    late = [e for e in events if e["event"] == "progress" and e["network"] == network and e["step"] >= after]
    if len(late) < 2 or late[-1]["ts"] <= late[0]["ts"]:
        return None
    return (late[-1]["step"] - late[0]["step"]) / (late[-1]["ts"] - late[0]["ts"])

SHIPPED = ROOT / "specs" / "albert_long.toml"


def offline_spec(model: Path, text_source: Path, store: Path, samples: int | None) -> str:
    """The shipped spec with offline sources, writing to ``store``."""
    text = SHIPPED.read_text()
    text = text.replace('source = "hf:albert-large-v2"', f'source = "path:{model}"')
    text = re.sub(r'source = "hf:wikimedia/wikipedia"\n(subset|field) = .*\n(subset|field) = .*\n',
                  f'source = "{text_source}"\n', text)
    assert "hf:" not in text, "albert_long.toml gained a hub source this benchmark does not replace"
    text = text.replace("[experiment]\n", f'[experiment]\nstore = "{store}"\n', 1)
    if samples is not None:
        text = re.sub(r"(?m)^samples = \d+$", f"samples = {samples}", text, count=1)
    return text


def one_network(text: str) -> str:
    """Only the first ``[[model]]`` (the pre-trained network)."""
    head, first, *_ = text.split("[[model]]")
    rest = text.split("[input]", 1)[1]
    return head + "[[model]]" + first.rstrip() + "\n\n[input]" + rest


#: the CLI, saying its own peak RSS (KiB) on its last line of stderr
CLI = """import resource, runpy, sys
sys.argv = ["runner", *sys.argv[1:]]
try:
    runpy.run_module("runner.cli", run_name="__main__")
finally:
    print("peak_rss_kib", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
"""


def runner(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess, int]:
    """The real CLI in a child process; returns it and the child's peak RSS in bytes."""
    proc = subprocess.run([sys.executable, "-c", CLI, *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1",
                               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))})
    if proc.returncode != 0:
        raise SystemExit(f"runner {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    peak = next(int(line.split()[1]) for line in reversed(proc.stderr.splitlines()) if line.startswith("peak_rss_kib"))
    return proc, peak * 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    ap.add_argument("--samples", type=int, help="override the spec's samples (default: as shipped, 1000)")
    ap.add_argument("--steps", type=int, default=2000, help="steps of the timed run (at least 500: the spec's "
                    "twin_distance)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precisions", nargs="+", default=["fp32", "tf32"],
                    help=f"precisions to time; <precision>{REDUCED} runs it with [dynamics] reduce = \"synchronized\"")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    out: dict = {"config": {k: getattr(args, k) for k in ("preset", "samples", "steps", "device")}, "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = make_model(tmp, args.preset)
        full = tmp / "albert_long.toml"
        full.write_text(offline_spec(model, english_text(tmp), tmp / "full.zarr", args.samples))
        t0 = time.perf_counter()
        plan, _ = runner("plan", str(full), "--calibrate", "--json", "--set", f'dynamics.device="{args.device}"', cwd=tmp)
        plan = json.loads(plan.stdout)
        est = plan["estimate"]
        out["plan"] = {"seconds_to_plan": time.perf_counter() - t0, "estimate": est,
                       "networks": len({t["network"] for t in plan["tasks"]}),
                       "steps": plan["resolved"]["dynamics"]["steps"]}
        networks, total_steps = out["plan"]["networks"], out["plan"]["steps"]
        reduced_est = None
        if any(p.endswith(REDUCED) for p in args.precisions):
            reduced_plan, _ = runner("plan", str(full), "--calibrate", "--json", "--set",
                                     f'dynamics.device="{args.device}"', "--set", 'dynamics.reduce="synchronized"',
                                     cwd=tmp)
            reduced_est = json.loads(reduced_plan.stdout)["estimate"]
            out["plan"]["estimate_reduced"] = reduced_est
        for variant in args.precisions:
            precision, reduce = variant.removesuffix(REDUCED), variant.endswith(REDUCED)
            store = tmp / f"{variant}.zarr"
            spec = tmp / f"{variant}.toml"
            spec.write_text(one_network(offline_spec(model, tmp / "english.txt", store, args.samples)))
            overrides = ["--set", f"dynamics.steps={args.steps}", "--set", f'dynamics.precision="{precision}"',
                         "--set", f"dynamics.checkpoint_every={200 * max(args.steps // 400, 1)}",  # lcm of every/tau
                         "--set", f"measure[4].stop={args.steps}",  # the PCA window: within the run
                         "--set", "dynamics.untrusted_precision=true"]  # timed, whatever its statistics
            if reduce:
                overrides += ["--set", 'dynamics.reduce="synchronized"']
            t0 = time.perf_counter()
            _, rss = runner("apply", str(spec), "--quiet", "--device", args.device, *overrides, cwd=tmp)
            wall = time.perf_counter() - t0
            rate = loop_rates(store)["pretrained"]["steady"]
            source = reduced_est if reduce else est
            predicted = source.get("seconds") if precision == plan["resolved"]["dynamics"]["precision"] else \
                source.get("other_precisions", {}).get(precision)
            hours = networks * total_steps / rate / 3600
            late = late_rate(store, 0, args.steps // 2) if reduce else None
            if late:  # the window as run, then the rest at the rate its second half ran (samples reduced)
                hours = networks * (args.steps / rate + (total_steps - args.steps) / late) / 3600
            out["runs"][variant] = {
                "apply_seconds": wall, "steps_per_s": rate, "late_steps_per_s": late, "peak_rss_bytes": rss,
                "extrapolated_hours": hours,
                "plan_hours": predicted / 3600 if isinstance(predicted, (int, float)) else predicted,
                "plan_over_measured": predicted / 3600 / hours if isinstance(predicted, (int, float)) else None}
            if args.json:
                args.json.write_text(json.dumps(out, indent=2))
    print(f"albert_long on {args.device} (ALBERT-{args.preset} width, random weights), {networks} networks x "
          f"{total_steps:.3g} steps; timed: 1 network x {args.steps} steps")
    print(f"{'precision':<10} {'steps/s':>8} {'extrapolated':>13} {'plan':>10} {'plan/measured':>14} {'peak RSS':>10}")
    for precision, r in out["runs"].items():
        plan_h = r["plan_hours"]
        shown = f"{plan_h:.3g} h" if isinstance(plan_h, (int, float)) else "-"
        ratio = f"{r['plan_over_measured']:.2f}" if r["plan_over_measured"] else "-"
        print(f"{precision:<10} {r['steps_per_s']:>8.1f} {r['extrapolated_hours']:>11.3g} h {shown:>10} {ratio:>14} "
              f"{r['peak_rss_bytes'] / 2**30:>8.2f} GiB")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
