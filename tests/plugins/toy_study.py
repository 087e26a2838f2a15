"""A study added without touching the engine: random walks, measured by their mean squared displacement.

Known answer: for steps of +-1, E[x_t^2] = t. One task per walk measure; it runs in segments,
saves a durable point after each, and resumes from it after a kill.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Literal

import numpy as np
import torch
from pydantic import Field

from runner.core import interrupt
from runner.storage.checkpoint import load_checkpoint, save_checkpoint
from runner.core.layout import LayoutBuilder, network_coords
from runner.plugin.measure_protocol import StepContext
from runner.plugin.measures import MeasureParams, MeasureTags, declare, hints, measures, params_union, register
from runner.plugin.timings import StepMeasure
from runner.core.plan import Task, task_id
from runner.spec.specfile import StudySpec, Table
from runner.plugin.study import Describes, Prepared, Study
from runner.plugin.study import register as register_study


class Walk(Table):
    walkers: int = Field(1000, ge=1)
    steps: int = Field(200, ge=1)
    segment: int = Field(50, ge=1)
    """Steps between durable points."""


class MSDParams(MeasureParams):
    """Mean squared displacement <x_t^2> over walkers (known answer: t)."""

    kind: Literal["msd"]


@register
class MSD(StepMeasure):
    study, Params, tags = "walk", MSDParams, MeasureTags("step")
    reference = "a known answer: E[x_t^2] = t"

    def variables(self, b, shape) -> None:
        dim = b.axis("msd_step", 1, shape.steps, 1)
        b.var("msd", "msd", ("network", dim), "float64", np.nan, "mean squared displacement", "1",
              "<x_t^2> over walkers", **hints(plot="series", headline=("MSD at the end", "last")))

    def observe(self, ctx: StepContext, t, x, bufs, seg) -> None:
        bufs.append(float((x * x).mean()))


class WalkSpec(StudySpec):
    walk: Walk = Walk()
    measure: list[params_union("walk")] = Field(min_length=1)  # type: ignore[valid-type]


@register_study
class WalkStudy(Study, Describes):
    name = "walk"
    description = "random walks (a toy study of the engine's tests)"

    spec_factory = staticmethod(lambda: WalkSpec)
    table_models = {"walk": Walk}

    def prepare(self, spec, sf) -> Prepared:
        w = spec.walk
        tasks = [Task(task_id({"walk": w.model_dump(), "seed": spec.experiment.seed, "measure": m.kind,
                               "v": measures("walk")[m.kind].version}), "walk", m.kind, 0, m.kind, steps=w.steps)
                 for m in spec.measure]
        return Prepared(self, spec, sf, tasks, ["walkers"], "cpu")

    def describe(self, p):
        return [f"walk       {p.spec.walk.walkers} walkers x {p.spec.walk.steps} steps of +-1"]

    def open(self, p, device, say):
        return WalkSession(p)


class WalkSession:
    def __init__(self, p: Prepared):
        self.p, w = p, p.spec.walk
        b = LayoutBuilder(segment=w.segment)
        network_coords(b, ["walkers"], ["walk"], [0])
        for m in p.spec.measure:
            declare(measures("walk")[m.kind](m), b, SimpleNamespace(names=["walkers"], steps=w.steps, samples=w.walkers))
        self.layout = b.build()
        self.index, self.S, self.device = 0, w.walkers, torch.device("cpu")  # the StepContext of its measures

    def twin(self, measure):
        raise NotImplementedError("walks have no twins")

    def write_inputs(self, store):
        pass

    def available(self):
        return set()

    def run(self, group, report):
        (t,) = group
        w, store = self.p.spec.walk, report.store
        self.store = store
        measure = measures("walk")[t.measure](next(m for m in self.p.spec.measure if m.kind == t.measure))
        path = Path(store.state_dir) / "checkpoints" / f"{t.id}.safetensors"
        saved = load_checkpoint(path, [t.id], store.store_id, torch.device("cpu"))
        x, start = (saved[0]["x"], saved[1]["t"]) if saved else (torch.zeros(w.walkers, dtype=torch.float64), 0)
        for seg in range(start, w.steps, w.segment):
            end = min(seg + w.segment, w.steps)
            gen = torch.Generator().manual_seed(self.p.spec.experiment.seed * 1_000_003 + seg)  # one stream a segment
            msd: list[float] = []
            for step in range(seg + 1, end + 1):
                x = x + (torch.randint(0, 2, (w.walkers,), generator=gen) * 2 - 1)
                measure.observe(self, step, x, msd, None)
                report.progress(step)
                interrupt.check()
                interrupt.stall_point(store.state_dir, "walkers", step)
            store.write("msd", (0, slice(seg, end)), np.asarray(msd))
            save_checkpoint(path, {"x": x}, [t.id], store.store_id, t=end)
        path.unlink(missing_ok=True)
        return {"resumed_from": start}
