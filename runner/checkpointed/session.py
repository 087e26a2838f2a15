"""Which checkpoints of a run exist, and a training task's results written to the store as they come."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch

from runner.checkpointed.files import belongs
from runner.checkpointed.loop import Curves, Finished, Saved
from runner.checkpointed.schedule import checkpoint_resource


def relative_path(path: Path, store_path: Path) -> np.ndarray:
    """``path`` relative to the store's parent folder (absolute when it lies elsewhere), as stored."""
    if not isinstance(store_path, Path):  # on object storage: beside the store, under the same URL
        return np.asarray(str(path).removeprefix(str(store_path.parent) + "/"), dtype=object)
    parent = store_path.parent.resolve()
    try:
        return np.asarray(str(Path(path).resolve().relative_to(parent)), dtype=object)
    except ValueError:
        return np.asarray(str(Path(path).resolve()), dtype=object)


def write_cell(store, name: str, task, values) -> None:
    """Write a measure task's (network, checkpoint) cell of variable ``name``."""
    values = np.asarray(values)
    store.write(name, (task.network, task.checkpoint) + (slice(None),) * values.ndim, values)


def forked_rng(device):
    """Run a measure between training steps with the RNG forked, so it cannot change the training run."""
    return torch.random.fork_rng(devices=[device] if device.type == "cuda" else [])


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
