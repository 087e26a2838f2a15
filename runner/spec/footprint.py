"""What a spec asks of this machine, declared by its study and checked here, once: the memory a run holds
at once and the disk it writes, refused before anything is allocated.

A study declares its :class:`Need` s (``Prepared.needs``: a store on disk, an iterated batch, a trained
network's weights and activations, its checkpoints on disk); :func:`check` refuses the first one
that does not fit with :class:`~runner.spec.specfile.SpecProblem` at the key it names, saying the size
and what this machine has. ``plan`` and ``apply`` check every prepared spec (:mod:`runner.run.prepare`);
a study checks its needs early itself only where the work before would grow with the size (generating a
corpus; a plan with a task per epoch).
Every size is an estimate from shapes, not a measurement.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rich.filesize import decimal

from runner.core.device import cuda_impossible
from runner.core.layout import available_memory
from runner.spec.specfile import Loc, SpecProblem
from runner.storage.location import location


@dataclass(frozen=True)
class Need:
    """Bytes a run holds in memory at once (``on = "memory"``, each need alone) or writes to the store's
    disk (``on = "disk"``, the disk needs of a spec adding up), and how to say it does not fit::

        <says> <bound> <size> of memory<detail>; this machine has <free> available<fix>
        <says> <bound> <size><detail> but <folder> has <free> free<fix>
    """

    where: Loc
    """The spec key to blame (the size that saves most when reduced)."""
    nbytes: int
    says: str
    """What needs it, with its verb: ``"the run needs"``, ``"the store would need"``."""
    on: Literal["memory", "disk"] = "memory"
    detail: str = ""
    """What the size is made of, after it (``" (state 2 GB, ...)"``)."""
    fix: str = ""
    """What to change, after what the machine has (``"; fewer steps"``)."""
    bound: str = "about"
    """``"about"`` (an estimate), ``"at least"`` (a lower bound) or ``""``."""
    device: str = "cpu"
    """Whose memory: ``"cpu"`` (the host's), or the spec's device (a CUDA device's when there is one)."""
    also: tuple[Loc, ...] = ()
    """Other keys the size depends on (:class:`SpecProblem`'s ``also``)."""


def memory(device: str = "cpu") -> tuple[int, str]:
    """Bytes of memory ``device`` has, and how a message says so: a CUDA device's total memory where the
    device is not the CPU and CUDA is there, else the host's available memory."""
    if device != "cpu" and not cuda_impossible():
        import torch  # lazy: torch (a spec on the CPU, or a machine without a GPU, needs none)

        if torch.cuda.is_available():
            index = int(device.split(":")[1]) if ":" in device else torch.cuda.current_device()
            total = torch.cuda.get_device_properties(index).total_memory
            return total, f"cuda:{index} has {decimal(total)}"
    free = available_memory()
    return free, f"this machine has {decimal(free)} available"


def free_disk(store: Path | str) -> tuple[float, str]:
    """Bytes free where ``store`` will be written, and that folder (a bucket has no "free": infinite)."""
    return location(store).free_bytes()


def _size(bound: str, nbytes: float) -> str:
    return f"{bound} {decimal(int(nbytes))}" if bound else decimal(int(nbytes))


def check(needs: Iterable[Need], store: Path | str | None = None) -> None:
    """Refuse the first need that does not fit: a memory need against its device's memory, the disk needs
    in their order, adding up, against the free disk of ``store``'s folder."""
    written, disk = 0, None
    for need in needs:
        if need.on == "memory":
            have, says = memory(need.device)
            if need.nbytes > have:
                raise SpecProblem(need.where, f"{need.says} {_size(need.bound, need.nbytes)} of memory{need.detail}; "
                                  f"{says}{need.fix}", need.also)
            continue
        disk = disk or free_disk(store)
        written += need.nbytes
        if written > disk[0]:
            raise SpecProblem(need.where, f"{need.says} {_size(need.bound, written)}{need.detail} but {disk[1]} has "
                              f"{decimal(int(disk[0]))} free{need.fix}", need.also)
