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
