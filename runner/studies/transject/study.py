"""The TransJect study: TransJect's variants and its Transformer baselines trained on sequence
classification (IMDb, AGnews, ListOps, CharIMDb) with the paper's recipe, and measured at every
epoch: test accuracy (Tables 2-3), losses (Fig. 4), token distances (Fig. 1), entropy (Fig. 5a),
experts (Fig. 5b), activation bounds (Fig. 5c) and an Isomap of one sentence (Fig. 6).

Tasks: per network (a ``[[model]]`` entry and seed) one ``train`` task, which provides
``checkpoint:<network>:<epoch>`` as each epoch's weights are saved, or, for a ``[[model]]`` with
``checkpoint``, one ``load`` task that evaluates the saved weights (no training); and per
(network, checkpoint) one task per measure, the measures of one checkpoint running as one group on
one forward pass (their random state forked, so they cannot change the training run). After an
early stop the later checkpoints do not exist and their measure tasks write nothing (NaN).

Planning reads no data: task ids hash the ``[data]`` table with the source's identity (a local
file's bytes, a hub id, the generator's parameters).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from models.hub import ModelLoadError
from runner.data.files import files_digest
from runner.data.registry import LABELLED, check_data
from runner.data import registry as data_registry
from runner.studies.transject.data.classification import ListOpsSource
from runner.checkpointed.schedule import checkpoint_resource, measure_task, train_task
from runner.plugin.measures import measures
from runner.core.plan import Task, task_id
from runner.core.requirements import Requirement, device_requirement
from runner.spec.specfile import SpecFile, SpecProblem
from runner.checkpointed.workers import CheckpointedWorkers
from runner.core.estimate import Estimates
from runner.plugin.study import (
    ChecksFiles,
    Describes,
    DrawsFigures,
    Explains,
    HasExamples,
    PlanFields,
    Prepared,
    Study,
    ViewsMeasures,
    register,
)
from runner.studies.transject import measures as _registrations  # noqa: F401  (registers the measures)
from runner.studies.transject.preflight import LocalData, checkpoint_problem, local_data, needs, tokenizer_problem
from runner.studies.transject.estimate import estimate
from runner.studies.transject.layout import build_layout
from runner.studies.transject.measure import TransJectShape
from runner.studies.transject.spec import BASELINES, TABLES, TransJectSpec, spec_model
from runner.studies.transject.state import Net, TransJectState
from runner.studies.transject.models import BASELINE_FIELDS, TRANSJECT_FIELDS, resolve_checkpoint

if TYPE_CHECKING:
    from runner.studies.transject.session import TransJectSession

#: A TransJect spec resolved: its state is the networks and their checkpoint folders.
TransJectPrepared = Prepared[TransJectState]

#: Bump when the training code changes what it writes; its tasks then rerun (measures: their ``version``).
TRAIN_VERSION = 1


def data_identity(spec: TransJectSpec, base: Path) -> str:
    d = spec.data
    return data_registry.data_identity(d.source, base, LABELLED, splits=(d.train_split, d.test_split), seed=spec.experiment.seed)


@register
class TransJectStudy(Study, ChecksFiles, ViewsMeasures, Describes, PlanFields, HasExamples, Explains,
                     CheckpointedWorkers, Estimates, DrawsFigures):
    """TransJect and its baselines trained on sequence classification, measured at every epoch."""

    name, spec_factory, table_models = "transject", staticmethod(spec_model), TABLES
    figure_recipes = "runner.studies.transject.figures"

    def measure_view(self, spec: TransJectSpec):
        return spec.view()

    def check(self, spec: TransJectSpec, sf: SpecFile) -> list[str]:
        d = spec.data
        problem = check_data(d.source, sf.path.parent, LABELLED, "[data] source", splits=(d.train_split, d.test_split))
        return [sf.problem(("data", "source"), problem)] if problem else []

    def prepare(self, spec: TransJectSpec, sf: SpecFile) -> TransJectPrepared:
        unmet: list[str] = device_requirement("[training] device", spec.training.device)
        d = spec.data
        why = d.reader.unavailable(d.source, subset=d.subset, streaming=False)
        if why:
            unmet.append(Requirement(f"[data] source {d.source!r}", why, kind="data", name=d.source))
        if d.tokenizer:
            why = tokenizer_problem(d.tokenizer)
            if why:
                unmet.append(Requirement.from_error(f"[data] tokenizer {d.tokenizer!r}", why, kind="tokenizer",
                                                    name=d.tokenizer))
        base = sf.path.parent
        local = local_data(spec, base) if d.source.local else LocalData()
        if local.problem:
            raise SpecProblem(*local.problem)
        if local.unreadable:
            unmet.append(local.unreadable)
        data_key = {"data": d.model_dump(mode="json", exclude={"analysis_examples", "analysis_text"}),
                    "identity": data_identity(spec, base)}
        analysis_key = {"examples": d.analysis_examples, "text": d.analysis_text}
        training = spec.training.model_dump(mode="json", exclude={"device"})
        E = spec.training.epochs
        tasks: list[Task] = []
        nets, dirs = [], {}
        for n, m, r, seed in spec.networks():
            label = spec.label(m, seed)
            fields = BASELINE_FIELDS if m.variant in BASELINES else TRANSJECT_FIELDS
            arch = {"variant": m.variant, "pooling": spec.pooling(m), **{k: getattr(m, k) for k in fields}}
            if m.gate != "learned":  # absent by default: earlier task ids stay as they were
                arch["gate"] = m.gate
            if m.checkpoint:
                try:
                    dirs[n] = resolve_checkpoint(m.checkpoint, base)
                    why = checkpoint_problem(dirs[n])
                    if why:
                        raise ModelLoadError(f"checkpoint {m.checkpoint!r}: {why}")
                    ident = f"{m.checkpoint} {files_digest([dirs[n] / f for f in ('config.json', 'model.safetensors', 'vocab.json')])}"
                except ModelLoadError as err:
                    unmet.append(f"[[model]] {m.name}: {err}")
                    ident = m.checkpoint
                payload = {"data": data_key, "checkpoint": ident, "training": training, "v": TRAIN_VERSION}
                tid = task_id(payload)
                tasks.append(Task(tid, "load", "train", n, "load", produces=(checkpoint_resource(n, 0),), key=payload))
                epochs = [0]
            else:
                payload = {"data": data_key, "training": training, "model": arch, "seed": seed, "v": TRAIN_VERSION}
                tasks.append(train_task(n, payload, seed, E + 1, E))
                tid = tasks[-1].id
                epochs = list(range(E + 1))
            nets.append(Net(label, m.name, r, seed, m, not m.checkpoint, tid))
            for meas in spec.measure:
                reg = measures("transject")[meas.kind]
                named = reg.tags.named(meas, "networks")
                if named and m.name not in named:
                    continue  # a measure shared with the training study names the [[model]] entries it measures
                for e in epochs:
                    payload = {"measure": meas.kind, "params": meas.params(), "train": tid, "checkpoint": e,
                               "analysis": analysis_key, "v": reg.version}
                    reads = reg(meas).needs(n, e, epochs[-1], [])
                    tasks.append(measure_task(meas.kind, n, e, payload, meas.params(), reads=reads, deps=(tid,),
                                              group=f"measures:{n}:{e}"))
        return Prepared(self, spec, sf, tasks, [x.label for x in nets], spec.training.device, unmet,
                        state=TransJectState(tuple(nets), dirs), needs=needs(spec, local.classes))

    def describe(self, p: TransJectPrepared) -> list[str]:
        s = p.spec
        d = s.data
        src = d.source + (f" ({d.subset})" if d.subset else "")
        if isinstance(d.reader, ListOpsSource):
            src += " " + " ".join(f"{k}={v}" for k, v in d.listops.model_dump().items())
        lines = [f"data       {src}; tokenize={d.tokenizer or d.tokenize} max_length={d.max_length} vocab_size={d.vocab_size}"
                 f" splits={d.train_split}/{d.test_split}" + (f" max_train={d.max_train}" if d.max_train else "")
                 + (f" max_test={d.max_test}" if d.max_test else "") + f" analysis_examples={d.analysis_examples}"]
        lines.append("training   " + " ".join(f"{k}={v}" for k, v in s.training.model_dump().items()))
        lines.append("models")
        for net in p.state.nets:
            m = net.entry
            what = f"checkpoint {m.checkpoint}" if m.checkpoint else (
                f"{m.variant} seed={net.seed} L={m.n_layers} d={m.d_model} pooling={s.pooling(m)} "
                + (f"heads={m.n_heads} d_ff={m.d_ff} dropout={m.dropout}" if m.variant.startswith("transformer")
                   else f"experts={m.n_experts} alpha_init={m.alpha_init}"))
            lines.append(f"  {net.label:<28} {what}")
        lines.append("measures   (every parameter shown, defaults included)")
        lines += [f"  {m.kind:<18} " + " ".join(f"{k}={v}" for k, v in m.params().items()) for m in s.measure]
        return lines

    def plan_json(self, p: TransJectPrepared) -> dict:
        return {"epochs": p.spec.training.epochs, "networks": [n.label for n in p.state.nets]}

    def estimate(self, p: TransJectPrepared, device, precision, calibrated):
        return estimate(p, device, precision, calibrated)

    def example_spec(self) -> dict:
        """One tiny network trained for an epoch on a little generated ListOps (seconds on a CPU)."""
        return {"experiment": {"name": "example", "study": "transject"},
                "data": {"source": "listops:", "max_length": 40, "analysis_examples": 8,
                         "listops": {"train": 64, "test": 32, "max_depth": 3, "max_args": 4, "min_length": 4,
                                     "max_length": 40}},
                "training": {"epochs": 1, "batch_size": 16},
                "model": [{"name": "model", "variant": "transject", "d_model": 16, "n_layers": 1, "n_experts": 2}],
                "measure": [{"kind": "entropy"}]}

    def variables_of(self, kind: str) -> list:
        """Laid out for one two-layer network of two experts and a three-word sentence (nothing read)."""
        spec = self.spec_model().model_validate({
            "experiment": {"name": "explain", "study": "transject"}, "data": {"source": "listops:"},
            "model": [{"name": "model", "variant": "transject"}], "measure": [{"kind": kind}]})
        net = Net("model", "model", 0, 0, None, True, "", variant="transject")
        registrations = {m.kind: measures("transject")[m.kind](m) for m in spec.measure}
        layout = build_layout(spec, [net], 1, TransJectShape(["embedding", "layer1", "layer2"], 2, ["a", "b", "c"]),
                              registrations)
        return [v for v in layout.vars.values() if v.measure == kind]

    def open(self, p: TransJectPrepared, device, say) -> TransJectSession:
        from runner.studies.transject.session import TransJectSession  # lazy: torch

        return TransJectSession(p, device)
