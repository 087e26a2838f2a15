"""Where plugins come from: the built-in studies, installed packages, and ``TRANSIENT_PLUGINS``.

The engine names no study, measure or model family. It imports, once:

- every package under ``runner/studies/`` (the built-in studies; each registers itself and its
  measures);
- the entry points of the groups ``transient.studies``, ``transient.measures``,
  ``transient.models`` and ``transient.data`` (data sources) of installed packages;
- the modules named in the environment variable ``TRANSIENT_PLUGINS`` (comma-separated, e.g.
  ``TRANSIENT_PLUGINS=my_lab.measures``): a plugin that is not packaged, or one in a test.

A plugin that cannot be imported, raises or exits while it is imported is refused in one line that
names it (:class:`PluginError`, exit 66), and so is a plugin that registers a measure, study, model
family, reference map, data source or executor under a name already taken, unless it says it
replaces it (``replaces = True``), and a ``TRANSIENT_PLUGINS`` with an empty or repeated entry.

Executors are found by name, not imported here: the entry points of ``transient.executors`` are
read by :func:`runner.run.execute.registry.executors`, and one is imported only when ``apply`` runs
with it (so no optional backend is imported by a run that does not use it).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from runner.core.errors import Unavailable

BUILTIN = "runner.studies"
GROUPS = ("transient.studies", "transient.measures", "transient.models", "transient.data")
ENV = "TRANSIENT_PLUGINS"

_loaded = False


class PluginError(Unavailable):
    """A plugin that cannot be loaded: the message names it and what went wrong (exit 66)."""


def hook(obj: Any, name: str, call: Callable[[], Any], check: Callable[[Any], str | None] | None = None,
         passes: tuple[type[BaseException], ...] = ()) -> Any:
    """``call()``, a registered object's hook ``name`` (a measure's ``problems``, a data source's ``check``);
    whatever it raises (but ``passes``: the errors its contract lets it raise, as a data source's
    ``InputError``), or returns that ``check`` refuses (saying why), becomes one :class:`PluginError`
    naming the object's module and class and the hook, never a traceback."""
    who = hook_name(obj, name)
    try:
        out = call()
    except (PluginError, *passes):
        raise
    except Exception as err:
        raise plugin_failure(obj, name, err) from None
    problem = check(out) if check is not None else None
    if problem:
        raise PluginError(f"{who} {problem}")
    return out


def hook_name(obj: Any, name: str) -> str:
    """``module.Class.name()``: how a message names a plug-in's hook."""
    return f"{type(obj).__module__}.{type(obj).__qualname__}.{name}()"


def plugin_failure(obj: Any, name: str, err: BaseException) -> PluginError:
    """What a hook raised, as one line naming it."""
    line = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return PluginError(f"{hook_name(obj, name)} raised {type(err).__name__}" + (f": {line}" if line else ""))


def load_plugins() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True  # a plugin importing the runner must not load the plugins again
    try:
        package = importlib.import_module(BUILTIN)
        for module in pkgutil.iter_modules(package.__path__, BUILTIN + "."):
            importlib.import_module(module.name)
        for group in GROUPS:
            for ep in entry_points(group=group):
                _load(f"entry point {ep.name!r} ({group}, {ep.value})", ep.load)
        for name in plugin_names():
            _load(f"{ENV} plugin {name!r}", lambda name=name: importlib.import_module(name))
    except BaseException:
        _loaded = False
        raise


def plugin_names() -> list[str]:
    """The modules ``TRANSIENT_PLUGINS`` names; :class:`PluginError` for an empty entry or a file path."""
    raw = os.environ.get(ENV, "")
    if not raw.strip():
        return []
    names = [n.strip() for n in raw.split(",")]
    for i, name in enumerate(names):
        if not name:
            raise PluginError(f"{ENV}={raw!r} has an empty entry; give module names separated by commas")
        if name in names[:i]:
            raise PluginError(f"{ENV}={raw!r} names {name!r} twice; give each module once")
        if "/" in name or "\\" in name or name.endswith(".py") or not all(p.isidentifier() for p in name.split(".")):
            raise PluginError(f"{ENV}: {name!r} is not a module name; give the importable module (e.g. "
                              f"'my_lab.measures', found on PYTHONPATH), not a file path")
    return names


def _load(what: str, load) -> None:
    try:
        load()
    except PluginError:
        raise
    except SystemExit as err:
        raise PluginError(f"{what} exited (SystemExit {err.code!r}) while it was imported") from None
    except KeyboardInterrupt:
        raise
    except BaseException as err:  # noqa: BLE001 - whatever a plugin raises, it is named
        line = str(err).splitlines()[0] if str(err) else ""
        raise PluginError(f"{what} cannot be loaded: {type(err).__name__}" + (f": {line}" if line else "")) from None
