"""Executors by name (``runner apply --executor NAME``): where the scheduler's groups of tasks run.

An executor is named by ``"module:Class"`` and imported only when chosen, so the engine never
imports an optional backend (Ray) unless asked to. Besides the built-in ones below, an installed
package names its executors in the entry-point group ``transient.executors`` (the entry point's
name is the executor's, its value the ``"module:Class"``; nothing is imported until it is chosen),
and a plugin module (``runner.plugin.loader``) adds one with :func:`register_executor`. The class is
built with ``(prepared, device, options)`` and only submits groups and polls for those that ended
(:class:`runner.run.execute.executor.Executor`); the recorder of ``apply`` does the bookkeeping.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from dataclasses import dataclass, field
from importlib.metadata import entry_points

from models.registry_base import Registry
from runner.plugin.loader import load_plugins

_EXECUTORS: Registry[str] = Registry("executor", {
    "local": "runner.run.execute.local:LocalExecutor",
    "ray": "runner.run.execute.ray_executor:RayExecutor",
}, switch="pass replaces=True")
_EXTRAS = {"ray": ("ray", "pip install -e '.[ray]'")}
GROUP = "transient.executors"


@dataclass(frozen=True)
class ExecutorOptions:
    """How ``apply`` runs: the executor's name and its settings (picklable)."""

    name: str = "local"
    address: str | None = None
    """A running Ray cluster (``ray://host:10001``, ``auto``); None starts a local one."""
    shards: int = 1
    """Split each splittable group (``Shards.split``) into this many sample shards."""
    point: int = 0
    """Which point of the spec's sweep this run is (a worker keeps one session per point)."""
    extra: dict = field(default_factory=dict)


def register_executor(name: str, target: str, *, replaces: bool = False) -> None:
    """Make ``--executor name`` run through ``target`` (``"package.module:Class"``); a name already
    taken (``local``, ``ray``, another plugin's) is refused unless ``replaces``."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z][\w-]*", name):
        raise TypeError(f"register_executor: name {name!r}; it is a word, as --executor NAME takes it")
    if not isinstance(target, str) or not re.fullmatch(r"[\w.]+:[\w.]+", target):
        raise TypeError(f"register_executor({name!r}, {target!r}): the target is 'package.module:Class'")
    _EXECUTORS.add(name, target, replaces=replaces)


def executors() -> dict[str, str]:
    """Every executor by name: the built-in ones, those of installed packages (``transient.executors``)
    and those plugin modules registered (which take precedence over an entry point of the same name)."""
    load_plugins()
    installed = {ep.name: ep.value for ep in entry_points(group=GROUP)}
    return {**installed, **_EXECUTORS.entries}


def executor_problem(name: str) -> str | None:
    """Why ``--executor name`` cannot run here (unknown, or its extra is not installed), or None."""
    known = executors()
    if name not in known:
        return Registry("executor", known).unknown(name)
    module, extra = _EXTRAS.get(name, (None, None))
    if module and importlib.util.find_spec(module) is None:
        return f"--executor {name} needs the optional package {module!r}: {extra}"
    return None


def executor_class(name: str) -> type:
    module, _, cls = executors()[name].partition(":")
    return getattr(importlib.import_module(module), cls)
