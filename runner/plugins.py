"""Where plugins come from: the built-in studies, installed packages, and ``TRANSIENT_PLUGINS``.

The engine names no study, measure or model family. It imports, once:

- every package under ``runner/studies/`` (the built-in studies; each registers itself and its
  measures);
- the entry points of the groups ``transient.studies``, ``transient.measures`` and
  ``transient.models`` of installed packages;
- the modules named in the environment variable ``TRANSIENT_PLUGINS`` (comma-separated, e.g.
  ``TRANSIENT_PLUGINS=my_lab.measures``): a plugin that is not packaged, or one in a test.

Executors are found by name, not imported here: the entry points of ``transient.executors`` are
read by :func:`runner.execute.registry.executors`, and one is imported only when ``apply`` runs
with it (so no optional backend is imported by a run that does not use it).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from importlib.metadata import entry_points

BUILTIN = "runner.studies"
GROUPS = ("transient.studies", "transient.measures", "transient.models")
ENV = "TRANSIENT_PLUGINS"

_loaded = False


def load_plugins() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    package = importlib.import_module(BUILTIN)
    for module in pkgutil.iter_modules(package.__path__, BUILTIN + "."):
        importlib.import_module(module.name)
    for group in GROUPS:
        for ep in entry_points(group=group):
            ep.load()
    for name in filter(None, (n.strip() for n in os.environ.get(ENV, "").split(","))):
        importlib.import_module(name)


def plugin_modules() -> set[str]:
    """The modules that define a registered study, measure, model family or reference map, and
    those named in ``TRANSIENT_PLUGINS`` (what provenance hashes beside the project's own code)."""
    from models.maps import MAPS
    from models.registry import families
    from runner.measures import _REGISTRY
    from runner.study import studies

    classes = [*studies().values(), *(m for by_kind in _REGISTRY.values() for m in by_kind.values()),
               *(type(f) for f in families()), *MAPS.values()]
    names = {c.__module__ for c in classes}
    return names | {n.strip() for n in os.environ.get(ENV, "").split(",") if n.strip()}
