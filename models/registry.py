"""Model families: one registry of what a ``[[model]] source`` can name, and how to build it.

A family is an adapter (:class:`Family`) between a source string and a model the runner drives,
through one of two protocols (:mod:`models.base`): a dynamical map (``initial_state``, ``step``)
for depth studies, or a trainable module with activation and gradient capture for training
studies. Families here: reference maps (``map:<name>``, more with :func:`register_map`), ALBERT
from the hub or a directory (``hf:<id>``, ``path:<dir>``), the offline tiny ALBERT
(``builtin:tiny-albert``), the thesis' LSTMs (built from a training spec), and TransJect with its
Transformer baselines (built from a config dict). A package adds a
family with :func:`register_family`; model code never learns about the runner.

Loading goes through :mod:`models.hub` (cache only when the hub is off; safetensors only; no
remote code unless asked for).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import platformdirs
from pydantic import BaseModel, ConfigDict

from models.hub import ModelLoadError, hf_load
from models.map_params import DECLARED
from models.registry_base import Registry
from models.source import Source
from models.suites import ADAPTERS, SuiteActivations
from models.tiny import TINY_CONFIG, build_tiny_albert

if TYPE_CHECKING:
    import torch

    from models.activations import Activations


@dataclass(frozen=True)
class Dims:
    """Sizes of a model's state, read from its configuration (no weights)."""

    n_tokens: int
    n_hidden: int
    n_heads: int = 0
    max_steps: int | None = None
    """Steps the map has (a stack of distinct layers: its depth); None: unbounded."""


class Family:
    """Adapter of one family of models (subclass and :func:`register_family`)."""

    name: ClassVar[str]
    role: ClassVar[str] = "map"
    """``map``: a :class:`models.base.DynamicalMap`; ``trainable``: a module a training study trains."""
    text: ClassVar[bool] = False
    """Driven by tokenized text (then the study draws input sentences with its tokenizer)."""
    autonomous: ClassVar[bool] = True
    """The same map at every step (False: the map is told the step, :meth:`DynamicalMap.at`)."""
    mlm_head: ClassVar[bool] = False
    """Its checkpoints carry a pre-trained masked-LM head (:func:`models.albert.load_mlm_head`)."""
    replaces: ClassVar[bool] = False
    """Registered under a name another family has: replace it (else the registration is refused)."""
    series: ClassVar[bool] = False
    """A spec may name a checkpoint series of it (``revisions``): hub revisions, or step folders of a
    local directory (:meth:`checkpoint_source`)."""

    def matches(self, source: Source) -> bool:
        """Whether this family builds ``source`` (match on ``source.scheme`` and ``source.rest``)."""
        raise NotImplementedError

    def params_model(self, source: str) -> type[BaseModel] | None:
        """The model of ``params = {...}`` for this source (None: the family takes none)."""
        return None

    def check(self, source: str, params: dict, init: Any) -> str | None:
        """A problem of the spec entry that needs no I/O (unknown map, params where none apply)."""
        if params and self.params_model(source) is None:
            return f"params applies to reference maps (source = 'map:...') only, not to {source!r}"
        return None

    def local_dir(self, source: str) -> Path | None:
        """The local directory the source names, checked for existence with the spec."""
        return None

    def location(self, source: str, build: bool = False) -> str:
        """What to load (hub id or directory); ``build``: make builtin assets now if missing."""
        return source

    def checkpoint_source(self, source: Source, folder: Path) -> Source:
        """The source of one checkpoint of a local series (``series``): its step ``folder``."""
        raise NotImplementedError

    def dims(self, source: str, *, revision: str | None, params: dict, n_tokens: int) -> Dims:
        """State sizes from the configuration; raises :class:`ModelLoadError` when it cannot be read."""
        raise NotImplementedError

    def build(self, source: str, *, revision: str | None = None, params: dict | None = None, init: Any = None,
              seed: int = 0, dtype=None, device="cpu", implementation: str = "fused"):
        raise NotImplementedError

    def weights_nbytes(self, source: str, params: dict, n_hidden: int, itemsize: int) -> int:
        """Memory its weights take beside the state when built in ``itemsize``-byte elements, for a
        study's memory check before anything runs (0: not counted)."""
        return 0

    def domain(self, source: str) -> tuple[float, float] | None:
        """The interval every element of the map's state must stay in (:attr:`DynamicalMap.domain`),
        known without building it; None: unbounded or not declared."""
        return None

    def token_equivariant(self, source: str) -> bool:
        """Whether the map treats its tokens alike (:attr:`DynamicalMap.token_equivariant`), known without
        building it."""
        return False

    def activations(self, model: Any, *, depth: int | None = None, generator: torch.Generator | None = None
                    ) -> Activations:
        """The way to read ``model``'s activations and gradients: its adapter (:mod:`models.activations`). A
        map's hook points are its states x_0 .. x_depth (``depth``: default its ``num_hidden_layers``); any
        other module's, its named children (a family with hook points of its own says so)."""
        from models.activations import MapActivations, ModuleActivations  # lazy: torch

        if self.role == "map":
            if depth is None:
                depth = getattr(getattr(model, "config", None), "num_hidden_layers", None)
            if depth is None:
                raise ValueError(f"{type(model).__name__} is a map: say how many steps to capture (depth=...)")
            return MapActivations(model, depth)
        return ModuleActivations(model)


#: model families by name, the newest asked first
_FAMILIES: Registry[Family] = Registry("model family")


def register_family(family: Family) -> Family:
    """Add a family; it is asked before the ones registered earlier (so a plugin may take a scheme).
    A name already taken by another family is refused unless the new one says ``replaces = True``
    (then the old one is removed)."""
    if isinstance(family, type):
        raise TypeError(f"register_family takes an instance: register_family({family.__name__}()), not the class "
                        f"{family.__module__}.{family.__qualname__}")
    if not isinstance(family, Family):
        raise TypeError(f"register_family takes a models.registry.Family, not {type(family).__name__}")
    if not isinstance(getattr(family, "name", None), str) or not family.name.strip():
        raise TypeError(f"model family {type(family).__module__}.{type(family).__qualname__}: name = "
                        f"{getattr(family, 'name', None)!r}; it is a non-empty string")
    return _FAMILIES.add(family.name, family, replaces=family.replaces)


def family_for(source: str) -> Family | None:
    source = Source(source)
    return next((f for f in _FAMILIES.newest_first() if f.matches(source)), None)


def families() -> list[Family]:
    """The registered families, the newest first (the order they are asked in)."""
    return _FAMILIES.newest_first()


# --------------------------------------------------------------------------- reference maps


#: name -> a built-in reference map's declaration, or the class :func:`register_map` was given
_MAPS: dict[str, Any] = dict(DECLARED)


class MapFamily(Family):
    """Reference maps with known dynamics (:mod:`models.maps`), ``map:<name>``; one token per state
    (the coupled maps: one per unit). What ``plan`` asks of a map comes from its declaration
    (:data:`models.map_params.DECLARED`, or the class a plugin registered): no torch until one is built."""

    name = "map"

    def __init__(self):
        self.maps = _MAPS

    def matches(self, source: Source) -> bool:
        return source.scheme == "map"

    def params_model(self, source: str) -> type[BaseModel] | None:
        cls = self.maps.get(Source(source).rest)
        return cls.params_model if cls is not None else None

    def check(self, source: str, params: dict, init: Any) -> str | None:
        name = Source(source).rest
        if name not in self.maps:
            return Registry("map", self.maps).unknown(name)
        if init is not None:
            return "init applies to ALBERT models, not to reference maps"
        return None

    def dims(self, source: str, *, revision, params: dict, n_tokens: int) -> Dims:
        cls = self.maps[Source(source).rest]
        p = cls.params_model.model_validate(params)
        return Dims(int(getattr(p, "units", None) or 1), int(getattr(p, "n", None) or cls.n_hidden), 0)

    def build(self, source, *, revision=None, params=None, init=None, seed=0, dtype=None, device="cpu",
              implementation="fused"):
        from models.maps import build_map  # lazy: torch

        return build_map(Source(source).rest, dict(params or {}), seed=seed, dtype=dtype, device=device)

    def weights_nbytes(self, source: str, params: dict, n_hidden: int, itemsize: int) -> int:
        size = getattr(self.maps[Source(source).rest], "weights_nbytes", None)  # a plugin map may not say
        return size(n_hidden, itemsize) if size else 0

    def domain(self, source: str) -> tuple[float, float] | None:
        cls = self.maps.get(Source(source).rest)
        return getattr(cls, "domain", None)

    def token_equivariant(self, source: str) -> bool:
        return bool(getattr(self.maps.get(Source(source).rest), "token_equivariant", False))


def register_map(name: str, cls, *, replaces: bool = False) -> None:
    """Make a :class:`models.base.DynamicalMap` subclass (with a pydantic ``params_model`` and
    ``n_hidden``) available as ``source = "map:<name>"``; a name already taken only with ``replaces``."""
    from models.maps import MAPS  # lazy: torch (a map is a torch module: its plugin has imported torch)

    Registry("map", MAPS, switch="pass replaces=True").add(name, cls, replaces=replaces)
    _MAPS[name] = cls


# --------------------------------------------------------------------------- ALBERT


class AlbertFamily(Family):
    """ALBERT's shared layer as a map (:mod:`models.albert`), from ``hf:<id>`` or a local directory."""

    name = "albert"
    text = True
    mlm_head = True
    series = True

    def matches(self, source: Source) -> bool:
        return source.on_hub or source.local

    def local_dir(self, source: str) -> Path | None:
        source = Source(source)
        return None if source.on_hub else Path(source.rest)

    def location(self, source: str, build: bool = False) -> str:
        source = Source(source)
        return source.hub_id if source.on_hub else str(self.local_dir(source))

    def checkpoint_source(self, source: Source, folder: Path) -> Source:
        return Source(f"path:{folder}")

    def dims(self, source: str, *, revision, params, n_tokens: int) -> Dims:
        from models.albert import load_albert_config  # lazy: torch

        config = load_albert_config(self.location(source), revision=revision)
        return self._dims(config, n_tokens)

    @staticmethod
    def _dims(config, n_tokens: int) -> Dims:
        if n_tokens > config.max_position_embeddings:
            raise ValueError(f"{n_tokens} tokens exceed the model's max_position_embeddings = "
                             f"{config.max_position_embeddings}")
        return Dims(n_tokens, int(config.hidden_size), int(config.num_attention_heads))

    def token_equivariant(self, source: str) -> bool:
        return True  # positions are added by the embedding, before the iteration

    def build(self, source, *, revision=None, params=None, init=None, seed=0, dtype=None, device="cpu",
              implementation="fused"):
        from models.albert import load_albert  # lazy: torch

        return load_albert(self.location(source, build=True), revision=revision, init=init, seed=seed,
                           implementation=implementation, dtype=dtype, device=device)


def cache_dir() -> Path:
    """Where builtin models are built: ``$TRANSIENT_CACHE``, else the platform's user cache folder
    (platformdirs: ``$XDG_CACHE_HOME/transient``, by default ``~/.cache/transient`` on Linux)."""
    return Path(os.environ.get("TRANSIENT_CACHE") or platformdirs.user_cache_path("transient"))


class TinyAlbertFamily(AlbertFamily):
    """``builtin:tiny-albert``: a small ALBERT built and briefly MLM-trained offline (:mod:`models.tiny`)
    on first use; its sizes are known without building it."""

    name = "tiny-albert"
    mlm_head = False  # built here without the pre-trained head
    series = False
    SOURCE = "builtin:tiny-albert"

    def matches(self, source: Source) -> bool:
        return source == self.SOURCE

    def local_dir(self, source: str) -> Path | None:
        return None

    def location(self, source: str, build: bool = False) -> str:
        directory = cache_dir() / "tiny-albert-v1"
        return str(build_tiny_albert(directory) if build else directory)

    def dims(self, source: str, *, revision, params, n_tokens: int) -> Dims:
        return self._dims(_Config(TINY_CONFIG), n_tokens)


class _Config:
    def __init__(self, values: dict):
        self.__dict__.update(values)


# --------------------------------------------------------------------------- LSTMs


class LSTMFamily(Family):
    """The thesis' LSTM language model and taggers (:mod:`models.lstm`), built from a training spec."""

    name = "lstm"
    role = "trainable"

    def matches(self, source: Source) -> bool:
        return source in ("builtin:lstm-lm", "builtin:lstm-tagger")

    def build(self, source, *, revision=None, params=None, init=None, seed=0, dtype=None, device="cpu",
              implementation="fused"):
        import torch  # lazy: torch
        from models.lstm import LSTMLanguageModel, LSTMLanguageModelConfig, LSTMTagger, LSTMTaggerConfig  # lazy: torch

        torch.manual_seed(seed)
        if source == "builtin:lstm-lm":
            return LSTMLanguageModel(LSTMLanguageModelConfig(**params)).to(device)
        return LSTMTagger(LSTMTaggerConfig(**params)).to(device)

    def activations(self, model, **_) -> Activations:
        from models.lstm import LSTMActivations  # lazy: torch

        return LSTMActivations(model)


# --------------------------------------------------------------------------- TransJect


class TransJectFamily(Family):
    """TransJect and the Transformer baselines of its paper (:mod:`models.transject`), built from a
    config dict: ``builtin:transject`` (``params["variant"]``: a row of Table 1),
    ``builtin:transformer`` and ``builtin:transformer-rezero``."""

    name = "transject"
    role = "trainable"
    SOURCES = ("builtin:transject", "builtin:transformer", "builtin:transformer-rezero")

    def matches(self, source: Source) -> bool:
        return source in self.SOURCES

    def build(self, source, *, revision=None, params=None, init=None, seed=0, dtype=None, device="cpu",
              implementation="fused"):
        import torch  # lazy: torch
        from models.transject import build_model, reorthogonalize  # lazy: torch

        torch.manual_seed(seed)
        model = build_model(Source(source).rest, dict(params or {})).to(device)
        return model if dtype is None else reorthogonalize(model.to(dtype))

    def activations(self, model, *, generator: torch.Generator | None = None, **_) -> Activations:
        """X^(0) .. X^(L); ``generator`` draws the entropic u."""
        from models.transject import TransJectActivations  # lazy: torch

        return TransJectActivations(model, generator)


class TransJectLayerFamily(Family):
    """One TransJect layer iterated as a map (:mod:`models.transject_map`): ``transject-layer:builtin``
    (random init from ``params``) or ``transject-layer:<dir>`` (a checkpoint the TransJect study saved)."""

    name = "transject-layer"

    def matches(self, source: Source) -> bool:
        return source.scheme == "transject-layer"

    def params_model(self, source: str) -> type[BaseModel] | None:
        from models.transject_map import TransJectMapParams  # lazy: torch

        return TransJectMapParams

    def check(self, source: str, params: dict, init: Any) -> str | None:
        if init is not None:
            return "init applies to ALBERT models; a random TransJect layer is transject-layer:builtin"
        return None

    def local_dir(self, source: str) -> Path | None:
        where = Source(source).rest
        return None if where == "builtin" else Path(where)

    def dims(self, source: str, *, revision, params: dict, n_tokens: int) -> Dims:
        from models.transject_map import TransJectMapParams, checkpoint_problem, checkpoint_width  # lazy: torch

        problem = checkpoint_problem(source)
        if problem:
            raise ModelLoadError(problem)
        p = TransJectMapParams.model_validate(params)
        return Dims(p.tokens, checkpoint_width(source, p), 0)

    def build(self, source, *, revision=None, params=None, init=None, seed=0, dtype=None, device="cpu",
              implementation="fused"):
        from models.transject_map import TransJectLayerMap, TransJectMapParams, load_encoder  # lazy: torch

        p = TransJectMapParams.model_validate(params or {})
        return TransJectLayerMap(load_encoder(source, p, seed), p, dtype=dtype, device=device)


class LayerStackFamily(Family):
    """A transformer's distinct layers as a depth map, x_{t+1} = block_{t+1}(x_t) (:mod:`models.layer_map`):
    ``layers:hf:<id>`` or ``layers:<dir>``, any family :data:`models.suites.ADAPTERS` names (GPT-NeoX,
    BERT, GPT-2, Llama-style); ``params``: ``pickled_weights``, ``trust_remote_code`` (both off)."""

    name = "layers"
    text = True
    autonomous = False
    series = True

    def matches(self, source: Source) -> bool:
        return source.scheme == "layers"

    def params_model(self, source: str) -> type[BaseModel] | None:
        return LayerStackParams

    def check(self, source: str, params: dict, init: Any) -> str | None:
        if init is not None:
            return "init applies to ALBERT models, not to a layers: stack"
        if Source(source).rest in ("", "hf:"):
            return "write layers:hf:<hub id> or layers:<directory>"
        return None

    def local_dir(self, source: str) -> Path | None:
        where = Source(source).inner
        return None if where.on_hub else Path(where.rest)

    def location(self, source: str, build: bool = False) -> str:
        where = Source(source).inner
        return where.hub_id if where.on_hub else str(self.local_dir(source))

    def checkpoint_source(self, source: Source, folder: Path) -> Source:
        return Source(f"layers:{folder}")

    def dims(self, source: str, *, revision, params: dict, n_tokens: int) -> Dims:
        from transformers import AutoConfig  # lazy: transformers

        p = LayerStackParams.model_validate(params)
        config = hf_load(AutoConfig.from_pretrained, self.location(source), "configuration", revision=revision,
                         trust_remote_code=p.trust_remote_code)
        known = sorted(t for a in ADAPTERS for t in a.model_types)
        if config.model_type not in known:
            raise ValueError(f"no layer adapter for model type {config.model_type!r}; known: {', '.join(known)}")
        limit = getattr(config, "max_position_embeddings", None)
        if limit is not None and n_tokens > limit:
            raise ValueError(f"{n_tokens} tokens exceed the model's max_position_embeddings = {limit}")
        return Dims(n_tokens, int(config.hidden_size), int(config.num_attention_heads),
                    max_steps=int(config.num_hidden_layers))

    def build(self, source, *, revision=None, params=None, init=None, seed=0, dtype=None, device="cpu",
              implementation="fused"):
        from models.layer_map import LayerMap  # lazy: torch
        from transformers import AutoModel  # lazy: transformers

        p = LayerStackParams.model_validate(params or {})
        model = hf_load(AutoModel.from_pretrained, self.location(source), "weights", revision=revision,
                        trust_remote_code=p.trust_remote_code, use_safetensors=None if p.pickled_weights else True,
                        **({"dtype": dtype} if dtype is not None else {}))
        model.requires_grad_(False)
        return LayerMap(model).to(device=device)


class SuiteFamily(Family):
    """Published checkpoint suites (:mod:`models.suites`): transformers models of a family in
    :data:`models.suites.ADAPTERS`, loaded by the training study's ``kind = "suite"`` networks (named there,
    not by a source string: :data:`SUITES` is not registered)."""

    name = "suite"
    role = "trainable"

    def matches(self, source: Source) -> bool:
        return False

    def activations(self, model, **_) -> Activations:
        return SuiteActivations(model)


class ModuleFamily(Family):
    """A module no registered family builds (a plugin study's own model): hook points at its named children
    (:class:`models.activations.ModuleActivations`). Not registered: :data:`MODULES`."""

    name = "module"
    role = "trainable"

    def matches(self, source: Source) -> bool:
        return False


#: The family of checkpoint suites' models.
SUITES = SuiteFamily()
#: The family of a plugin study's own modules.
MODULES = ModuleFamily()


class LayerStackParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pickled_weights: bool = False
    """Also load checkpoints published as ``pytorch_model.bin`` only (read with ``weights_only``)."""
    trust_remote_code: bool = False
    """Run the repository's own model code (never unless set)."""


for _family in (LSTMFamily(), TransJectFamily(), AlbertFamily(), TinyAlbertFamily(), MapFamily(),
                TransJectLayerFamily(), LayerStackFamily()):
    register_family(_family)

__all__ = ["AlbertFamily", "Dims", "Family", "LayerStackFamily", "LSTMFamily", "MODULES", "MapFamily", "ModelLoadError",
           "ModuleFamily", "SUITES", "SuiteFamily", "TinyAlbertFamily", "TransJectFamily", "TransJectLayerFamily", "cache_dir", "families",
           "family_for", "register_family", "register_map"]
