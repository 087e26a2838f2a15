"""What a TransJect spec costs: each network's real training and measures, timed briefly and scaled.

The calibration opens the run's own session (the real data, encoded as the run encodes it) over a
store in a temporary folder, then per network: runs :func:`train` until a few optimizer steps are
timed, times one test-set evaluation and one weights file, and runs the network's measures twice on
its initial checkpoint as one group (one forward pass, as at every epoch), timing the second run,
when imports and caches are warm as they are in a run after its first group. A train task costs its
setup, ``steps_per_epoch x epochs`` steps, and per epoch an evaluation and its checkpoint and resume
files (the resume file holds the weights and Adam's two moments: three weights' worth); a network
loaded from a checkpoint costs its evaluation; each checkpoint costs one measure group. Early
stopping (``patience``) can end training sooner: then the estimate is high. What a run pays once (imports and
first use, a second or two on a CPU) is timed apart, before the timed steps and on the first of two
measure groups; the first network carries it, at the most any calibration paid.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from runner.core.estimate import Enough, NoEstimate, StepTimer, Unit, device_key
from runner.plugin.study import SourceUnavailable
from runner.storage.store import Store
from runner.studies.transject.models import build

if TYPE_CHECKING:
    import torch

#: Weights' worth written per epoch: the epoch file, and the resume file (weights and Adam's moments).
FILES_PER_EPOCH = 4


def estimate(p, device: torch.device, precision: str | None, calibrated) -> tuple[list[Unit], list[str]]:
    import torch  # lazy: torch

    if precision not in (None, "fp32"):
        raise NoEstimate("the TransJect study trains in fp32")
    timer = _Calibration(p, device)
    units, warm = [], 0.0
    for n, net in enumerate(p.state.nets):
        tasks = [t for t in p.tasks if t.network == n]
        lead, measures = tasks[0], tasks[1:]
        key = {"study": "transject", "device": device_key(device), "torch": torch.__version__,
               "task": {k: v for k, v in (lead.key or {}).items() if k != "seed"}, "kind": lead.kind,
               "measures": [[m.kind, m.params()] for m in p.spec.measure], "v": 4}
        timed = calibrated(key, lambda n=n: timer.time(n))
        warm = max(warm, timed["warm_s"])
        checkpoints = sorted({t.checkpoint for t in measures})
        if lead.kind == "train":
            epochs = p.spec.training.epochs
            seconds = (timed["setup_s"] + epochs * timed["steps_per_epoch"] * timed["step_s"]
                       + epochs * (timed["eval_s"] + FILES_PER_EPOCH * timed["save_s"]))
            nbytes = (epochs + 1 + FILES_PER_EPOCH - 1) * timed["param_bytes"]  # epoch files, the resume file
        else:
            seconds, nbytes = timed["eval_s"], 0
        seconds += len(checkpoints) * timed["measure_s"]
        runs = [[lead.id]] + [[t.id for t in measures if t.checkpoint == c] for c in checkpoints]
        units.append(Unit(p.labels[n], runs, seconds, nbytes))
    if units:  # the run pays it in its first task: the most any calibration paid
        units[0].seconds += warm
    notes = [f"{units[0].label if units else ''} includes what a run pays once: imports, first use ({warm:.1f} s)",
             "disk: the checkpoints only, not the store's measures"]
    if any(t.kind == "train" for t in p.tasks):
        notes.insert(0, f"full training: early stopping (patience {p.spec.training.patience}) can end it sooner")
    return units, notes


def _warm(model, data, tr, device) -> None:
    """One untimed optimizer step: the imports and first-use costs a run pays once, before its first task
    ends, are not any network's cost."""
    import torch  # lazy: torch
    from torch.nn import functional as F  # lazy: torch

    optimizer = torch.optim.Adam(model.parameters(), lr=tr.lr, betas=tr.betas, eps=tr.eps)
    idx = slice(0, tr.batch_size)
    x, m, y = data.ids[idx].to(device), data.mask[idx].to(device), data.labels[idx].to(device)
    F.cross_entropy(model(x, m).logits, y).backward()
    optimizer.step()


class _Calibration:
    """The run's session, opened once, and each network's timings (see the module's docstring)."""

    def __init__(self, p, device: torch.device):
        self.p, self.device = p, device
        self._session = None

    def session(self):
        from runner.studies.transject.session import TransJectSession  # lazy: torch

        if self._session is None:
            try:
                self._session = TransJectSession(self.p, self.device)
            except SourceUnavailable as err:
                raise NoEstimate(str(err)) from None
        return self._session

    def time(self, n: int) -> dict:
        import torch  # lazy: torch
        from runner.checkpointed.files import save, weights  # lazy: torch
        from runner.checkpointed.loop import Saved  # lazy: torch
        from runner.studies.transject.train import evaluate, train  # lazy: torch

        s, device = self.session(), self.device
        net, tr = s.nets[n], self.p.spec.training
        group = [t for t in self.p.tasks if t.network == n and t.kind not in ("train", "load")]
        test, _, _ = s.encoded(n)
        with tempfile.TemporaryDirectory(prefix="calibration-") as tmp:
            s.store = Store(Path(tmp) / "calibration.zarr")
            s.store.open(s.layout, {})
            out = {}
            if net.trained:
                t0 = time.perf_counter()
                _warm(build(net.variant, net.params, 0, device), s.train, tr, device)
                out["warm_s"] = time.perf_counter() - t0
                timer = StepTimer(device)
                timer.start()
                try:
                    for item in train(net.variant, net.params, net.seed, tr, s.train, test, "calibration",
                                      net.label, Path(tmp) / "checkpoints", device, timer.progress):
                        if isinstance(item, Saved) and item.epoch == 0:
                            s.paths[(n, 0)] = item.path
                except Enough:
                    pass
                model = build(net.variant, net.params, 0, device)
                t0 = time.perf_counter()
                save(Path(tmp) / "weights.safetensors", weights(model), {"kind": "calibration"})
                out.update(timer.result(), save_s=time.perf_counter() - t0, steps_per_epoch=s.spe,
                           param_bytes=sum(v.numel() * v.element_size() for v in model.state_dict().values()))
            else:
                s.paths[(n, 0)] = s.dirs[n] / "model.safetensors"
            t0 = time.perf_counter()
            evaluate(s.model_at(n, 0), test, tr.batch_size, device, net.seed)
            out["eval_s"] = time.perf_counter() - t0
            first = [t for t in group if t.checkpoint == min(t.checkpoint for t in group)]
            took = [0.0]
            for _ in range(2 if first else 0):  # the second time: imports and caches warm, as in a run
                t0 = time.perf_counter()
                with torch.random.fork_rng():
                    s.measure(first)
                took.append(time.perf_counter() - t0)
            out["measure_s"] = took[-1]
            out["warm_s"] = out.get("warm_s", 0.0) + max(took[1:2] + [0.0]) - took[-1]
            s.paths.pop((n, 0), None)
        return out
