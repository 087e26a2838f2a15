"""The kit's measures: checkpoint measures on activations only, which every study that takes the kit
(``runner.plugin.measures.takes``) offers its specs. One registration per module; every module here is
imported (and so registered), but ``figures`` (their figures, drawn by ``runner figures`` only)."""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__, __name__ + "."):
    if _module.name != f"{__name__}.figures":
        importlib.import_module(_module.name)
