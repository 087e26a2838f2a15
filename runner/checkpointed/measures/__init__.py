"""The kit's measures: checkpoint measures on activations only, which every study that takes the kit
(``runner.plugin.measures.takes``) offers its specs. One registration per module; every module here is
imported (and so registered)."""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__, __name__ + "."):
    importlib.import_module(_module.name)
