"""A study with checkpoints in the fewest lines (:class:`SimpleStudy`): it supplies a network, its loss and
data (a :class:`~runner.checkpointed.loop.Trainable`) and the analysis inputs; the kit plans one training
run from ``[experiment] seed``, a checkpoint at the start and at each epoch end, and at every checkpoint a
group of the spec's measures (the kit's on activations, and any of its own),
which read the network through its family's adapter (:meth:`models.registry.Family.activations`)."""

from __future__ import annotations

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
from runner.checkpointed.schedule import checkpoint_resource, checkpoint_steps, train_task
from runner.checkpointed.session import CheckpointedSession
from runner.core.layout import LayoutBuilder, network_coords
from runner.core.plan import Task, task_id
from runner.plugin.loader import hook
from runner.plugin.measures import declare, measures, params_union, takes
from runner.plugin.study import Prepared, Study
from runner.spec.specfile import StudySpec, Table


@dataclass(frozen=True)
class Analysis:
    """What a simple study's measures read: the analysis ``batches`` (one stream), the analysis ``sentence``
    (one sequence) and its ``tokens``' names."""

    batches: tuple[MapInputs, ...]
    sentence: MapInputs
    tokens: tuple[str, ...]


@dataclass(frozen=True)
class SimpleState:
    """A simple study's plan (``Prepared.state``)."""

    steps: tuple[int, ...]
    """The optimizer step of each checkpoint."""
    train_id: str
    layers: tuple[str, ...]
    """The network's hook points (the store's ``layer`` axis)."""


@dataclass(frozen=True)
class Shape:
    """What the measures' variables depend on (a checkpoint measure's shape)."""

    names: list[str]
    layers: list[str]
    sentence: list[str]


class SimpleStudy(Study):
    """Subclass with ``name``, ``table`` (the spec table of its settings, a :class:`Table`) and
    :meth:`trainable`, :meth:`build` and :meth:`analysis`."""

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
            cls.spec_factory = staticmethod(functools.cache(lambda: create_model(
                f"{cls.__name__}Spec", __base__=StudySpec, **{cls.name: (cls.table, cls.table()),
                                                              "measure": (list[params_union(cls.name)], Field(min_length=1))})))

    # ---------------------------------------------------------------- what a study supplies

    def trainable(self, settings: Table, seed: int) -> Trainable:
        """Its network (built by :meth:`build`), data, loss and optimizer step."""
        raise NotImplementedError

    def build(self, settings: Table, seed: int) -> torch.nn.Module:
        """The network as initialised from ``seed``."""
        raise NotImplementedError

    def analysis(self, settings: Table, seed: int) -> Analysis:
        raise NotImplementedError

    # ---------------------------------------------------------------- the kit's

    def settings(self, spec) -> Table:
        return getattr(spec, self.name)

    def made(self, hook_name: str, settings: Table, seed: int) -> Any:
        """``self.<hook_name>(settings, seed)`` (``trainable``, ``build``, ``analysis``), what it raises or
        returns outside its contract one :class:`runner.plugin.loader.PluginError` naming the study's hook."""
        return hook(self, hook_name, lambda: getattr(self, hook_name)(settings, seed), _RETURNS[hook_name])

    def measure_view(self, spec) -> ActivationView:
        settings, seed = self.settings(spec), spec.experiment.seed
        a = self.made("analysis", settings, seed)
        adapter = self.family.activations(self.made("build", settings, seed).eval())
        widths = {k: v.shape[-1] for k, v in adapter.capture(a.sentence).items()}
        narrow = min(widths, key=widths.get)
        return ActivationView(networks=(self.name,), kinds=((self.name, "lm"),), references=False,
                              token_widths=((f"layer {narrow}", widths[narrow]),), layers=adapter.layer_names(),
                              sentence=a.tokens)

    def prepare(self, spec, sf) -> Prepared:
        settings, seed = self.settings(spec), spec.experiment.seed
        run = self.made("trainable", settings, seed)
        steps = checkpoint_steps(run.steps_per_epoch, run.epochs)
        trainer = train_task(0, {self.name: settings.model_dump(), "seed": seed}, seed, len(steps),
                             run.steps_per_epoch * run.epochs)
        tasks, registry = [trainer], measures(self.name)
        for m in spec.measure:
            for c in range(len(steps)):
                reads = registry[m.kind](m).needs(0, c, len(steps) - 1, [])
                if reads is not None:
                    payload = {"train": trainer.id, "checkpoint": c, "measure": m.kind, "params": m.params()}
                    tasks.append(Task(task_id(payload), m.kind, m.kind, 0, m.kind, deps=(trainer.id,), checkpoint=c,
                                      needs=tuple(checkpoint_resource(*k) for k in dict.fromkeys(reads)),
                                      group=f"measures:0:{c}", params=m.params(), key=payload))
        layers = self.family.activations(run.model).layer_names()
        return Prepared(self, spec, sf, tasks, [self.name], "cpu", state=SimpleState(tuple(steps), trainer.id, layers))

    def open(self, p: Prepared, device, say) -> SimpleSession:
        return SimpleSession(p)


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


def _trainable_problem(run: Any) -> str | None:
    for attr, kind in (("model", torch.nn.Module), ("steps_per_epoch", int), ("epochs", int)):
        value = getattr(run, attr, None)
        if not isinstance(value, kind) or (kind is int and (isinstance(value, bool) or value < 1)):
            return (f"returned {type(run).__name__} whose {attr} is {value!r}; a Trainable has a model (a torch module) "
                    "and steps_per_epoch and epochs of at least 1")
    return None


_RETURNS = {
    "trainable": _trainable_problem,
    "build": lambda m: None if isinstance(m, torch.nn.Module) else f"returned {type(m).__name__}; it returns a torch.nn.Module",
    "analysis": lambda a: None if isinstance(a, Analysis) else f"returned {type(a).__name__}; it returns a "
                                                                "runner.checkpointed.simple.Analysis",
}


class SimpleSession(CheckpointedSession):
    """A simple study's run: its one network trained, and measured at each checkpoint through the kit."""

    def __init__(self, p: Prepared):
        super().__init__(p, torch.device("cpu"))
        study, st = p.study, p.state
        self.settings, self.seed = study.settings(p.spec), p.spec.experiment.seed
        self.labels, self.steps = [study.name], list(st.steps)
        run = study.made("trainable", self.settings, self.seed)
        self.spe, self.epochs, self.file_name = run.steps_per_epoch, run.epochs, run.checkpoint_name
        self.analysis = study.made("analysis", self.settings, self.seed)
        self.sentence_tokens = list(self.analysis.tokens)
        b = LayoutBuilder(reference=study.description, unit=UNIT)
        network_coords(b, self.labels, [study.name], [0])
        declare_axes(b, self.steps, self.spe, self.epochs, list(st.layers))
        declare_checkpoint_path(b, "the weights at each checkpoint")
        declare_train_loss(b, "1", "the training loss of each step", overlay=None)
        registry, shape = measures(study.name), Shape(self.labels, list(st.layers), self.sentence_tokens)
        for m in p.spec.measure:
            declare(registry[m.kind](m), b, shape)
        self.layout = b.build()

    def train_id(self, network: int) -> str:
        return self.p.state.train_id

    def checkpoint_files(self, network: int):
        folder = self.checkpoint_dir(self.store, network)
        return {c: (folder / self.file_name(c, s), s) for c, s in enumerate(self.steps)}

    def training(self, task, report):
        run = self.p.study.made("trainable", self.settings, self.seed)
        return train(run, self.seed, self.steps, task.id, self.labels[0], self.checkpoint_dir(report.store, 0),
                     self.device, report.progress)

    def write_curves(self, store, network: int, curves) -> None:
        write_curves(store, network, {"train_loss": curves.train_loss})

    def reading(self, network: int, checkpoint: int, gradients: bool = False) -> Reading:
        model = self.p.study.made("build", self.settings, self.seed)
        load_weights(model, self.paths[(network, checkpoint)], self.device)
        return Reading(self.p.study.family, model.eval(), self.analysis.batches, self.analysis.sentence)
