"""A study with checkpoints in the fewest lines (:class:`SimpleStudy`): it supplies a network, its loss and
data (a :class:`~runner.checkpointed.loop.Trainable`) and the analysis inputs; the kit plans one training
run per network (:meth:`SimpleStudy.networks`: by default one, from ``[experiment] seed``) on the device its
table names (its ``device`` field; the CPU without one), a checkpoint at the start and at each epoch end, and
at every checkpoint a group of the spec's measures (the kit's on activations, and any of its own), which read
each network through its family's adapter (:meth:`models.registry.Family.activations`)."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from pydantic import Field, create_model

import runner.checkpointed.measures  # noqa: F401 - registers the kit's measures, which a simple study takes
from models.base import MapInputs
from models.registry import MODULES
from runner.checkpointed.activations import Reading
from runner.checkpointed.axes import UNIT, declare_axes, declare_checkpoint_path, declare_train_loss, write_curves
from runner.checkpointed.files import load_weights
from runner.checkpointed.loop import Trainable, train
from runner.checkpointed.measure import KIT, ActivationView
from runner.checkpointed.schedule import checkpoint_steps, measure_task, train_task
from runner.checkpointed.session import CheckpointedSession
from runner.checkpointed.workers import CheckpointedWorkers
from runner.core.layout import LayoutBuilder, network_coords
from runner.core.plan import Task
from runner.core.requirements import device_requirement
from runner.plugin.loader import PluginError, hook
from runner.plugin.measures import declare, measures, params_union, takes
from runner.plugin.study import HasExamples, Prepared, Study, ViewsMeasures
from runner.spec.specfile import StudySpec, Table


@dataclass(frozen=True)
class Analysis:
    """What a simple study's measures read: the analysis ``batches`` (one stream), the analysis ``sentence``
    (one sequence) and its ``tokens``' names."""

    batches: tuple[MapInputs, ...]
    sentence: MapInputs
    tokens: tuple[str, ...]


@dataclass(frozen=True)
class Network:
    """One network a simple study trains: its ``label`` (the store's ``network``), the ``seed`` it is built
    and trained from, and the ``settings`` its hooks get (the study's table, or a copy changed for it)."""

    label: str
    seed: int
    settings: Table


@dataclass(frozen=True)
class SimpleState:
    """A simple study's plan (``Prepared.state``)."""

    steps: tuple[int, ...]
    """The optimizer step of each checkpoint."""
    train_ids: tuple[str, ...]
    """The train task of each network."""
    layers: tuple[str, ...]
    """The networks' hook points (the store's ``layer`` axis)."""
    networks: tuple[Network, ...]


@dataclass(frozen=True)
class Shape:
    """What the measures' variables depend on (a checkpoint measure's shape)."""

    names: list[str]
    layers: list[str]
    sentence: list[str]


class SimpleStudy(Study, ViewsMeasures, HasExamples, CheckpointedWorkers):
    """Subclass with ``name``, ``table`` (the spec table of its settings, a :class:`Table`) and
    :meth:`trainable`, :meth:`build` and :meth:`analysis`; with several networks, :meth:`networks`. Its hooks
    build on the CPU; the kit moves each network, its trainable's tensors (:func:`to_device`) and the
    analysis inputs to the device."""

    table: ClassVar[type[Table]]
    family: ClassVar[Any] = MODULES
    """Its network's family (the way to its activations): by default any module's named children."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        problem = _class_problem(cls)
        if problem:
            raise TypeError(f"SimpleStudy {cls.__module__}.{cls.__qualname__}: {problem}")
        if "table" in cls.__dict__:
            takes(cls.name, KIT)
            cls.table_models = {cls.name: cls.table}
            cls.spec_factory = staticmethod(functools.cache(lambda: _spec_model(cls)))

    def example_spec(self) -> dict[str, Any]:
        """Its table's defaults and the first of the kit's measures: what the conformance checks plan and run."""
        return {"experiment": {"name": f"{self.name}-example"}, "measure": [{"kind": min(measures(KIT))}]}

    # ---------------------------------------------------------------- what a study supplies

    def trainable(self, settings: Table, seed: int) -> Trainable:
        """Its network (built by :meth:`build`), data, loss and optimizer step."""
        raise NotImplementedError

    def build(self, settings: Table, seed: int) -> torch.nn.Module:
        """The network as initialised from ``seed``."""
        raise NotImplementedError

    def analysis(self, settings: Table, seed: int) -> Analysis:
        """The inputs its measures read (the same tokens for every network)."""
        raise NotImplementedError

    def networks(self, settings: Table, seed: int) -> list[Network]:
        """The networks it trains, each with its label, seed and settings (by default one: the study's)."""
        return [Network(self.name, seed, settings)]

    # ---------------------------------------------------------------- the kit's

    def settings(self, spec) -> Table:
        return getattr(spec, self.name)

    def device_name(self, spec) -> str:
        """The device its table names (``device``), else ``cpu``."""
        settings = self.settings(spec)
        return settings.device if "device" in type(settings).model_fields else "cpu"

    def made(self, hook_name: str, settings: Table, seed: int) -> Any:
        """``self.<hook_name>(settings, seed)`` (``trainable``, ``build``, ``analysis``, ``networks``), what
        it raises or returns outside its contract one :class:`runner.plugin.loader.PluginError` naming the
        study's hook."""
        return hook(self, hook_name, lambda: getattr(self, hook_name)(settings, seed), _RETURNS[hook_name])

    def networks_of(self, spec) -> list[Network]:
        return self.made("networks", self.settings(spec), spec.experiment.seed)

    def measure_view(self, spec) -> ActivationView:
        nets, widths = self.networks_of(spec), []
        for net in nets:
            a = self.made("analysis", net.settings, net.seed)
            adapter = self.family.activations(self.made("build", net.settings, net.seed).eval())
            width = {k: v.shape[-1] for k, v in adapter.capture(a.sentence).items()}
            narrow = min(width, key=width.get)
            widths.append((f"layer {narrow}" if len(nets) == 1 else f"{net.label} layer {narrow}", width[narrow]))
        return ActivationView(networks=tuple(n.label for n in nets), kinds=tuple((n.label, "lm") for n in nets),
                              references=len(nets) > 1, token_widths=tuple(widths), layers=adapter.layer_names(),
                              sentence=a.tokens)

    def prepare(self, spec, sf) -> Prepared:
        nets = self.networks_of(spec)
        runs = [self.made("trainable", net.settings, net.seed) for net in nets]
        _same_schedule(self, nets, runs)
        steps = checkpoint_steps(runs[0].steps_per_epoch, runs[0].epochs)
        tasks, train_ids, labels = [], [], [n.label for n in nets]
        for n, (net, run) in enumerate(zip(nets, runs)):
            payload = {self.name: net.settings.model_dump(exclude={"device"}), "seed": net.seed}
            if net.label != self.name:  # the default network's task id stays as it was
                payload["network"] = net.label
            trainer = train_task(n, payload, net.seed, len(steps), run.steps_per_epoch * run.epochs)
            tasks.append(trainer)
            train_ids.append(trainer.id)
            tasks += self._measure_tasks(spec, n, labels, trainer.id, len(steps))
        layers = self.family.activations(runs[0].model).layer_names()
        device = self.device_name(spec)
        return Prepared(self, spec, sf, tasks, labels, device, device_requirement(f"[{self.name}] device", device),
                        state=SimpleState(tuple(steps), tuple(train_ids), layers, tuple(nets)))

    def _measure_tasks(self, spec, n: int, labels: list[str], train_id: str, count: int) -> list[Task]:
        """The measure tasks of network ``n`` at each of its ``count`` checkpoints: those measuring it."""
        tasks, registry = [], measures(self.name)
        for m in spec.measure:
            reg = registry[m.kind]
            named = reg.tags.named(m, "networks")
            if named and labels[n] not in named:
                continue
            refs = [labels.index(r) for r in reg.tags.named(m, "references")]
            for c in range(count):
                reads = reg(m).needs(n, c, count - 1, refs)
                if reads is not None:
                    payload = {"train": train_id, "checkpoint": c, "measure": m.kind, "params": m.params()}
                    tasks.append(measure_task(m.kind, n, c, payload, m.params(), reads=reads, deps=(train_id,),
                                              group=f"measures:{n}:{c}"))
        return tasks

    def open(self, p: Prepared, device, say) -> SimpleSession:
        return SimpleSession(p, device)


def _spec_model(cls: type[SimpleStudy]) -> type[StudySpec]:
    """The root model of ``cls``'s specs, with the measures registered now."""
    model = create_model(f"{cls.__name__}Spec", __base__=StudySpec, **{
        cls.name: (cls.table, cls.table()), "measure": (list[params_union(cls.name)], Field(min_length=1))})
    # pickled as what rebuilds it in another process (a Ray worker), where the study's spec model is made
    # again: never by a reference to a class made here, which no import finds
    model.__reduce__ = lambda spec, study=cls: (_rebuilt_spec, (study, spec.__getstate__()))
    return model


def _rebuilt_spec(study: type[SimpleStudy], state: dict) -> StudySpec:
    model = study.spec_factory()
    spec = model.__new__(model)
    spec.__setstate__(state)
    return spec


def _class_problem(cls) -> str | None:
    """What is wrong with a subclass's declaration (a registered one names its settings' table)."""
    if "table" in cls.__dict__:
        table = cls.__dict__["table"]
        if not (isinstance(table, type) and issubclass(table, Table)):
            return f"table = {table!r}; it is the spec table of its settings, a runner.spec.specfile.Table subclass"
    elif "name" in cls.__dict__:
        return ("names a study but no table of its own; give it `table = <its settings' Table subclass>` (a subclass "
                "of a simple study has its own spec table)")
    return None


def _same_schedule(study: SimpleStudy, nets: list[Network], runs: list[Trainable]) -> None:
    """The store has one checkpoint axis and one layer axis: every network keeps the first one's."""
    first = (runs[0].steps_per_epoch, runs[0].epochs, study.family.activations(runs[0].model).layer_names())
    for net, run in zip(nets[1:], runs[1:]):
        other = (run.steps_per_epoch, run.epochs, study.family.activations(run.model).layer_names())
        if other != first:
            raise PluginError(f"{type(study).__module__}.{type(study).__qualname__}: network {net.label!r} has "
                              f"(steps_per_epoch, epochs, layers) {other}, {nets[0].label!r} {first}; the networks "
                              "of a simple study share one schedule and one set of hook points")


def _trainable_problem(run: Any) -> str | None:
    for attr, kind in (("model", torch.nn.Module), ("steps_per_epoch", int), ("epochs", int)):
        value = getattr(run, attr, None)
        if not isinstance(value, kind) or (kind is int and (isinstance(value, bool) or value < 1)):
            return (f"returned {type(run).__name__} whose {attr} is {value!r}; a Trainable has a model (a torch module) "
                    "and steps_per_epoch and epochs of at least 1")
    return None


def _networks_problem(nets: Any) -> str | None:
    if not isinstance(nets, list) or not nets or not all(isinstance(n, Network) for n in nets):
        return f"returned {nets!r}; it returns a non-empty list of runner.checkpointed.simple.Network"
    labels = [n.label for n in nets]
    if len(set(labels)) < len(labels):
        return f"returned networks labelled {labels}; each network has a label of its own"
    return None


_RETURNS = {
    "trainable": _trainable_problem,
    "build": lambda m: None if isinstance(m, torch.nn.Module) else f"returned {type(m).__name__}; it returns a torch.nn.Module",
    "analysis": lambda a: None if isinstance(a, Analysis) else f"returned {type(a).__name__}; it returns a "
                                                                "runner.checkpointed.simple.Analysis",
    "networks": _networks_problem,
}


def on_device(inputs: MapInputs, device) -> MapInputs:
    """Analysis inputs with their tensors on ``device``."""
    return dataclasses.replace(inputs, **{k: getattr(inputs, k).to(device) for k in ("input_ids", "attention_mask")
                                          if getattr(inputs, k) is not None})


def to_device(run: Trainable, device) -> Trainable:
    """``run`` with its model, and its attributes that are tensors or lists of tensors (the data it trains on,
    an optimizer's buffers), moved to ``device``."""
    run.model.to(device)
    for k, v in vars(run).items():
        if isinstance(v, torch.Tensor):
            setattr(run, k, v.to(device))
        elif isinstance(v, list) and v and all(isinstance(t, torch.Tensor) for t in v):
            setattr(run, k, [t.to(device) for t in v])
    return run


class SimpleSession(CheckpointedSession):
    """A simple study's run: each network trained, and measured at each checkpoint through the kit."""

    def __init__(self, p: Prepared, device):
        super().__init__(p, device)
        study, st = p.study, p.state
        self.nets, self.labels, self.steps = list(st.networks), [n.label for n in st.networks], list(st.steps)
        runs = [study.made("trainable", net.settings, net.seed) for net in self.nets]
        self.spe, self.epochs = runs[0].steps_per_epoch, runs[0].epochs
        self.file_names = [run.checkpoint_name for run in runs]
        self.analyses = [study.made("analysis", net.settings, net.seed) for net in self.nets]
        self.sentence_tokens = list(self.analyses[0].tokens)
        b = LayoutBuilder(reference=study.description, unit=UNIT)
        network_coords(b, self.labels, self.labels, [0] * len(self.nets))
        declare_axes(b, self.steps, self.spe, self.epochs, list(st.layers))
        declare_checkpoint_path(b, "the weights at each checkpoint")
        declare_train_loss(b, "1", "the training loss of each step", overlay=None)
        registry, shape = measures(study.name), Shape(self.labels, list(st.layers), self.sentence_tokens)
        for m in p.spec.measure:
            declare(registry[m.kind](m), b, shape)
        self.layout = b.build()

    def train_id(self, network: int) -> str:
        return self.p.state.train_ids[network]

    def checkpoint_files(self, network: int):
        folder = self.checkpoint_dir(self.store, network)
        return {c: (folder / self.file_names[network](c, s), s) for c, s in enumerate(self.steps)}

    def training(self, task, report):
        net = self.nets[task.network]
        run = to_device(self.p.study.made("trainable", net.settings, net.seed), self.device)
        return train(run, net.seed, self.steps, task.id, net.label, self.checkpoint_dir(report.store, task.network),
                     self.device, report.progress)

    def write_curves(self, store, network: int, curves) -> None:
        write_curves(store, network, {"train_loss": curves.train_loss})

    def reading(self, network: int, checkpoint: int, gradients: bool = False) -> Reading:
        net, analysis = self.nets[network], self.analyses[network]
        model = self.p.study.made("build", net.settings, net.seed).to(self.device)
        load_weights(model, self.paths[(network, checkpoint)], self.device)
        return Reading(self.p.study.family, model.eval(), tuple(on_device(b, self.device) for b in analysis.batches),
                       on_device(analysis.sentence, self.device))
