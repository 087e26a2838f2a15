"""Where a step of the depth pass goes: the layer, each measure, the reduction's checks, host syncs
and Python, for one full step and one reduced step (``[dynamics] reduce``), with ``torch.profiler``.

The pass is the runner's own (:class:`runner.studies.depth.iterate.IteratePass` on a scratch store,
as ``plan``'s calibration runs it); the reduced run has every sample reduced from t = 0 (the cost of
a step does not depend on whether its tokens are really equal). Each part is wrapped in a
``record_function`` label here, not in the engine. Reported per mode: wall per step, and each
part's share of it (on CUDA: of the device time too); ``host syncs`` sums ``aten::item``,
``aten::_local_scalar_dense`` and ``aten::nonzero`` (a step should have none); ``Python and the
rest`` is wall minus the labelled parts.

    python benchmarks/profile_step.py --preset base --samples 16 --steps 20
    python benchmarks/profile_step.py --preset large --samples 1000 --device cuda --json profile.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.iterate import english_text, make_model  # noqa: E402
from benchmarks.reduced import MODELS, SPEC  # noqa: E402

SYNCS = ("aten::item", "aten::_local_scalar_dense", "aten::nonzero")


class _Stop(Exception):
    pass


class _Reporter:
    """Stops the pass after ``warmup + steps`` steps; starts the profiler after the warm-up."""

    def __init__(self, warmup: int, steps: int, profiler, sync):
        self.warmup, self.steps, self.profiler, self.sync = warmup, steps, profiler, sync
        self.t0 = None
        self.seconds = 0.0

    def progress(self, step: int) -> None:
        if step == self.warmup:
            self.sync()
            self.profiler.start()
            self.t0 = time.perf_counter()
        elif step == self.warmup + self.steps:
            self.sync()
            self.seconds = time.perf_counter() - self.t0
            self.profiler.stop()
            raise _Stop

    def note(self, *a, **k): ...
    def warn(self, *a, **k): ...
    def provide(self, *a, **k): ...


def _label(obj, name: str, label: str) -> None:
    import torch

    inner = getattr(obj, name)

    def wrapped(*a, **k):
        with torch.profiler.record_function(label):
            return inner(*a, **k)

    setattr(obj, name, wrapped)


def profile(spec_path: Path, reduced: bool, args) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile as torch_profile

    from runner.run.prepare import prepare
    from runner.storage.store import Store
    from runner.studies.depth.iterate import IteratePass
    from runner.plugin.measures import measures

    p = prepare(spec_path)
    spec, net = p.spec, p.state[0]
    device = torch.device(args.device)
    session = p.study.open(p, device, lambda *a: None)
    kinds = [m.kind for m in spec.measure if measures("depth")[m.kind].tags.timing == "step"]
    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    prof = torch_profile(activities=activities)
    sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
    report = _Reporter(args.warmup, args.steps, prof, sync)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "scratch.zarr")
        store.open(session.layout, {})
        run = IteratePass(spec, session.layout, net, kinds, kinds, store, session.inputs, device,
                          Path(tmp) / "pass.safetensors", report)
        run.reduced_from_start = reduced
        for m in run.active:
            _label(m, "observe", f"measure {m.kind()}")
        for m in run.twins:
            _label(m, "advance", f"twins {m.kind()}")
        _label(run, "_step", "layer (f)")
        try:
            run.run()
        except _Stop:
            pass
    events = prof.key_averages()
    key = "device_time_total" if cuda else "cpu_time_total"
    wall_us = report.seconds * 1e6
    parts = {e.key: getattr(e, key) for e in events
             if e.key.startswith(("measure ", "twins ", "layer (f)", "reduction checks"))}
    parts["host syncs"] = sum(e.cpu_time_total for e in events if e.key in SYNCS)
    rest = wall_us - sum(v for k, v in parts.items() if k != "host syncs")  # syncs happen inside the parts
    return {"wall_ms_per_step": report.seconds / args.steps * 1e3,
            "share": {**{k: v / wall_us for k, v in parts.items()}, "Python and the rest": max(rest, 0) / wall_us}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=("tiny", "base", "large"), default="base")
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--steps", type=int, default=20, help="profiled steps per mode")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    from runner.studies.depth.reduce import SyncReduction

    _label(SyncReduction, "at", "reduction checks")
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = make_model(tmp, args.preset)
        english_text(tmp)
        length = 10 * (1 + (args.warmup + args.steps) // 10)
        for mode in ("full", "reduced"):
            spec = tmp / f"{mode}.toml"
            text = SPEC.format(name=mode, store=tmp / f"{mode}.zarr", models=MODELS["initial"].format(model=model, std=0.02),
                               text=tmp / "english.txt",
                               samples=args.samples, tokens=args.tokens, steps=length, segment=length, device=args.device, neff_every=1,
                               reduce="synchronized" if mode == "reduced" else "none")
            spec.write_text(text.replace('kind = "lyapunov"\ntau = 50', 'kind = "lyapunov"\ntau = 10'))
            out[mode] = profile(spec, mode == "reduced", args)
    print(f"ALBERT-{args.preset} width, {args.samples} samples x {args.tokens} tokens, {args.device}")
    for mode, r in out.items():
        print(f"{mode}: {r['wall_ms_per_step']:.2f} ms per step")
        for k, v in sorted(r["share"].items(), key=lambda kv: -kv[1]):
            print(f"  {k:<32} {v:>6.1%}")
    print(f"reduced step / full step: {out['reduced']['wall_ms_per_step'] / out['full']['wall_ms_per_step']:.3f}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
