"""Models the runner can iterate or train: ALBERT via transformers, reference maps, ...

Importing this package is light: transformers is imported only inside the functions that load
or build ALBERT (it takes seconds to import).
"""

from .albert import AlbertMap, load_albert
from .hub import ModelLoadError, load_tokenizer
from .base import DynamicalMap, MapInputs
from .init import TruncatedNormalInit, apply_truncated_normal
from .maps import MAPS, build_map, params_model
from .tiny import build_tiny_albert

__all__ = [
    "MAPS",
    "AlbertMap",
    "DynamicalMap",
    "MapInputs",
    "ModelLoadError",
    "TruncatedNormalInit",
    "apply_truncated_normal",
    "build_map",
    "build_tiny_albert",
    "load_albert",
    "load_tokenizer",
    "params_model",
]
