"""The session of a study with checkpoints: which checkpoints exist, training followed into the
store as it comes, and the dispatch of a run's tasks (:class:`CheckpointedSession`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from torch import Tensor

from runner.checkpointed.activations import ActivationCache, Reading, forked_rng
from runner.checkpointed.files import RESUME, adopt, belongs, checkpoint_dir, read_resume
from runner.checkpointed.loop import Curves, Finished, Saved
from runner.checkpointed.schedule import checkpoint_resource
from runner.plugin.measures import measures
from runner.storage.location import location


def relative_path(path: Path, store_path: Path) -> np.ndarray:
    """``path`` relative to the store's parent folder (absolute when it lies elsewhere), as stored."""
    return np.asarray(location(store_path).relative_name(path), dtype=object)


def write_cell(store, name: str, task, values) -> None:
    """Write a measure task's (network, checkpoint) cell of variable ``name``."""
    values = np.asarray(values)
    store.write(name, (task.network, task.checkpoint) + (slice(None),) * values.ndim, values)


class Checkpoints:
    """The saved checkpoints of a session: ``paths[(network, index)]`` is the file, or None where it
    never comes (after an early stop: nothing to measure, its measure tasks write nothing)."""

    def __init__(self, store_path: Path):
        self.store_path = store_path
        self.paths: dict[tuple[int, int], Path | None] = {}

    def scan(self, network: int, files: dict[int, Path], train_id: str) -> None:
        """Take the files (index -> path) that a finished or interrupted run of ``train_id`` left;
        those known already are not looked at again (a distributed executor's worker scans before
        each measure for what other workers saved)."""
        for index, path in files.items():
            if (network, index) not in self.paths and belongs(path, train_id):
                self.paths[(network, index)] = path

    def available(self) -> set[str]:
        return {checkpoint_resource(n, c) for n, c in self.paths}

    def follow(self, items: Iterator[Saved | Finished], network: int, report,
               write_curves: Callable[[Curves], None]) -> Finished | None:
        """Drive a training run: its curves and each saved checkpoint into the store as they come (the
        checkpoint's resource provided, so its measures run between training steps); its Finished."""
        store = report.store
        for item in items:
            write_curves(item.curves)
            if isinstance(item, Saved):
                self.paths[(network, item.index)] = item.path
                store.write("checkpoint_path", (network, item.index), relative_path(item.path, self.store_path))
                report.note("checkpoint", checkpoint=item.index, step=item.step, path=str(item.path))
                report.provide(checkpoint_resource(network, item.index))
            else:
                for (n, c), path in sorted(self.paths.items(), key=lambda kv: kv[0]):
                    if n == network and path is not None:
                        store.write("checkpoint_path", (n, c), relative_path(path, self.store_path))
                return item
        return None

    def never(self, network: int, indices, report=None) -> None:
        """Checkpoints that will not come (after an early stop); their resources are provided (empty)."""
        for c in indices:
            self.paths[(network, c)] = None
            if report is not None:
                report.provide(checkpoint_resource(network, c))


class CheckpointedSession:
    """A run of a study with checkpoints, as the kit drives it: the checkpoints saved so far (those an
    early stop says never come included), the resources they provide, each task group dispatched
    (``train``; a kind of the study's own, :meth:`handlers`; else a group of measures of one
    checkpoint), a network trained through the kit's loop with its curves and checkpoints followed into
    the store, and the measures' writes. A distributed executor's worker looks again before each
    measure group for what other workers saved.

    A study subclasses it and supplies what only it knows:

    - ``labels`` (network labels) and :meth:`train_id`;
    - :meth:`checkpoint_files`: where a network it trains saves each checkpoint, and at which step;
    - :meth:`training`: the kit loop's items for a train task (``runner.checkpointed.loop.train`` on
      its ``Trainable``), :meth:`write_curves` and :meth:`trained` (its extra writes once trained);
    - :meth:`reading`: how a network at a checkpoint is read through its family's adapter, and
      ``sentence_tokens``, for the measures on activations (:meth:`activations` and the rest of an
      :class:`~runner.checkpointed.measure.ActivationContext`: the session is one, the kit's cache behind it);
    - :meth:`measure`: how a group of measure tasks of one checkpoint runs (by default each task's
      registered measure on :meth:`context`).
    """

    def __init__(self, p: Any, device):
        self.p, self.spec, self.device = p, p.spec, device
        self.checkpoints = Checkpoints(p.store_path)
        self.paths = self.checkpoints.paths
        self.store = None
        self.worker = False
        self.cache = ActivationCache(self.reading, device)

    # ---------------------------------------------------------------- what a study supplies

    labels: list[str]

    def train_id(self, network: int) -> str | None:
        """The id of the task that trains ``network``; None for one this run does not train."""
        raise NotImplementedError

    def checkpoint_files(self, network: int) -> dict[int, tuple[Path, int]]:
        """index -> (file, training step) of each checkpoint ``network`` saves when trained."""
        raise NotImplementedError

    def training(self, task, report) -> Iterator[Saved | Finished]:
        raise NotImplementedError

    def write_curves(self, store, network: int, curves: Curves) -> None:
        raise NotImplementedError

    def trained(self, task, report, done: Finished) -> dict:
        """Its own writes once ``task``'s network is trained; what the task reports."""
        return {"resumed_from": done.resumed_from}

    def handlers(self) -> dict[str, Callable[[Any, Any], dict]]:
        """Task kinds of its own besides ``train`` and the measures (``load``) -> how one runs."""
        return {}

    def reading(self, network: int, checkpoint: int, gradients: bool = False) -> Reading:
        """How ``network`` at ``checkpoint`` is read through its family's adapter (``gradients``: with each
        batch's loss)."""
        raise NotImplementedError

    sentence_tokens: list[str]
    """The analysis sentence's tokens (a study with measures on activations)."""

    def context(self) -> Any:
        """What its measures get (by default the session itself)."""
        return self

    def measure(self, group: list) -> None:
        """Each task's registered measure on :meth:`context` (nothing where an early stop left no weights)."""
        if self.paths.get((group[0].network, group[0].checkpoint), False) is None:
            return
        registry = measures(self.p.study.name)
        for t in group:
            reg = registry[t.kind]
            reg(reg.Params(kind=t.kind, **t.params)).run(self.context(), t)

    # ---------------------------------------------------------------- the activation context (the kit's)

    @property
    def names(self) -> list[str]:
        return self.labels

    def activations(self, network: int, checkpoint: int) -> dict[str, Tensor]:
        """Each layer's activations of the analysis tokens, ``{layer: (tokens, dim)}`` (read once, kept)."""
        return self.cache(network, checkpoint).rows

    def sentence_activations(self, network: int, checkpoint: int) -> dict[str, Tensor]:
        """Each layer's activations of the analysis sentence, ``{layer: (seq, dim)}``."""
        return self.cache(network, checkpoint).sentence

    def gradients(self, network: int, checkpoint: int, names=None):
        """Each analysis batch's (activations, gradients of its loss) of the named layers, one after the other."""
        return self.cache.gradients(network, checkpoint, names)

    def final(self, network: int) -> int:
        """The network's last checkpoint with weights (an early stop ends before the last)."""
        return max(c for (n, c), path in self.paths.items() if n == network and path is not None)

    def layer_index(self) -> dict[str, int]:
        return {str(v): i for i, v in enumerate(self.layout.coords["layer"].values)}

    def reference_layer(self, network: int) -> str:
        """The layer other networks' layers are compared with: its top one."""
        return list(self.layer_index())[-1]

    # ---------------------------------------------------------------- the session protocol

    def checkpoint_dir(self, store, network: int) -> Path:
        return checkpoint_dir(store.state_dir, self.labels[network], self.train_id(network))

    def write_inputs(self, store) -> None:
        self.attach(store)

    def attach(self, store, worker: bool = False) -> None:
        """Measure on ``store`` (laid out by this process or a distributed executor's driver): the
        checkpoints saved so far (``worker``: and before each measure group, those saved since)."""
        self.store, self.worker = store, worker
        self.scan()

    def scan(self) -> None:
        """Take the checkpoints saved since the last look, and those an early stop says never come."""
        for n in range(len(self.labels)):
            train_id = self.train_id(n)
            files = self.checkpoint_files(n) if train_id is not None else {}
            if not files:
                continue
            self.checkpoints.scan(n, {c: path for c, (path, _) in files.items()}, train_id)
            resume = read_resume(self.checkpoint_dir(self.store, n) / RESUME, train_id)
            if resume is not None and resume.done and resume.step is not None:
                self.checkpoints.never(n, [c for c, (_, step) in files.items() if step > resume.step])

    def available(self) -> set[str]:
        return self.checkpoints.available()

    def run(self, group: list, report) -> dict:
        lead = group[0]
        if lead.kind == "train":
            return self._train(lead, report)
        own = self.handlers().get(lead.kind)
        if own is not None:
            return own(lead, report)
        if self.worker:  # the checkpoints it reads were saved since it opened, by another process
            self.scan()
        with forked_rng(self.device), self.cache.holding(lead.network, lead.checkpoint):
            self.measure(group)
        return {}

    def _train(self, task, report) -> dict:
        n, store = task.network, report.store
        if task.extends:  # a longer run: the finished run's checkpoints and resume file become its own
            adopt(checkpoint_dir(store.state_dir, self.labels[n], task.extends[0]), self.checkpoint_dir(store, n),
                  task.id)
        files = self.checkpoint_files(n)  # those an earlier process saved: a resumed run yields only its own
        known = set(self.paths)
        self.checkpoints.scan(n, {c: path for c, (path, _) in files.items()}, task.id)
        for key in sorted(set(self.paths) - known):
            report.provide(checkpoint_resource(*key))
        done = self.checkpoints.follow(self.training(task, report), n, report,
                                       lambda curves: self.write_curves(store, n, curves))
        if done is None:
            return {}
        out = self.trained(task, report, done)
        self.checkpoints.never(n, [c for c in files if (n, c) not in self.paths], report)
        return out

    def write(self, name: str, task, values) -> None:
        write_cell(self.store, name, task, values)
