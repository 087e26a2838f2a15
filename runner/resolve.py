"""Spec -> concrete networks: model sources located, replicates seeded, sizes read from configs.

Resolution reads only configurations (cheap); weights are loaded by the task that iterates them.
Every failure names the ``[[model]]`` entry and says what to do.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from runner.spec import ModelSpec, Spec, local_path
from runner.specfile import SpecProblem

TINY_ALBERT = "builtin:tiny-albert"


class ResolveError(Exception):
    """A model or tokenizer that cannot be located; the message names the spec entry."""


@dataclass(frozen=True)
class Network:
    """One model instance: a ``[[model]]`` entry and a replicate index."""

    index: int
    experiment_seed: int
    model: ModelSpec
    replicate: int
    location: str
    """Hub id or local directory handed to transformers; ``map:<name>`` for maps."""
    precision: str
    n_tokens: int
    n_hidden: int
    n_heads: int

    @property
    def label(self) -> str:
        return self.model.name if self.model.replicates == 1 else f"{self.model.name}/{self.replicate}"

    def seed(self, purpose: str) -> int:
        return derive_seed(self.experiment_seed, self.model.name, self.replicate, purpose)


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from the experiment seed and labels (stable across runs and platforms)."""
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def cache_dir() -> Path:
    return Path(os.environ.get("TRANSIENT_CACHE", Path.home() / ".cache" / "transient"))


def locate(source: str, build: bool = True) -> str:
    """What transformers should load for a model source. The builtin tiny model is built on first
    use (``build``), i.e. when a task needs it, not when a spec is planned."""
    if source == TINY_ALBERT:
        from models.tiny import build_tiny_albert

        directory = cache_dir() / "tiny-albert-v1"
        return str(build_tiny_albert(directory) if build else directory)
    if source.startswith("hf:"):
        return source.removeprefix("hf:")
    local = local_path(source)
    if local is None:
        raise ResolveError(f"unknown source scheme in {source!r}; use hf:, path:, builtin:tiny-albert or map:")
    return str(local)


def resolve(spec: Spec) -> tuple[list[Network], list[str]]:
    """The networks of a spec, and the requirements this machine does not meet (e.g. a hub model
    that is neither cached nor reachable). A network whose model cannot be read has unknown sizes
    (0); planning still works, running does not."""
    networks: list[Network] = []
    failed: dict[tuple, tuple[list[str], str]] = {}  # (source, revision) -> (entries, reason)
    for i, model in enumerate(spec.model):
        where = f"[[model]] #{i + 1} ({model.name})"
        precision = model.precision or spec.dynamics.precision
        if model.is_map:
            from models.maps import params_model

            n = getattr(params_model(model.map_name)(**model.params), "n", None)
            dims = (1, n or (2 if model.map_name == "henon" else 1), 0)
            location = model.source
        else:
            key = (model.source, model.revision)
            try:
                if key in failed:
                    raise ResolveError(failed[key][1])
                location = locate(model.source, build=False)
                dims = _tiny_dims(spec.input.tokens) if model.source == TINY_ALBERT else \
                    _albert_dims(location, model.revision, spec.input.tokens)
            except ResolveError as err:
                failed.setdefault(key, ([], str(err)))[0].append(where)
                location, dims = model.source, (spec.input.tokens, 0, 0)
        for r in range(model.replicates):
            networks.append(Network(len(networks), spec.experiment.seed, model, r, location, precision, *dims))
    unmet = [f"{', '.join(wheres)} source {source!r}: {reason}" for (source, _), (wheres, reason) in failed.items()]
    return networks, unmet


def tokenizer_location(spec: Spec, networks: list[Network]) -> str | None:
    if spec.input.tokenizer:
        return locate(spec.input.tokenizer, build=True)
    text = [n for n in networks if not n.model.is_map]
    return text[0].location if text else None


def _tiny_dims(n_tokens: int) -> tuple[int, int, int]:
    from models.tiny import TINY_CONFIG

    if n_tokens > TINY_CONFIG["max_position_embeddings"]:
        raise SpecProblem(("input", "tokens"), f"{n_tokens} exceeds the tiny ALBERT's max_position_embeddings = "
                          f"{TINY_CONFIG['max_position_embeddings']}")
    return n_tokens, TINY_CONFIG["hidden_size"], TINY_CONFIG["num_attention_heads"]


def build_builtins(networks: list[Network]) -> None:
    """Build the builtin models the networks use, if they are not built yet (before the first task)."""
    for source in {n.model.source for n in networks if n.model.source == TINY_ALBERT}:
        locate(source, build=True)


def _albert_dims(location: str, revision: str | None, n_tokens: int) -> tuple[int, int, int]:
    from models.albert import ModelLoadError, load_albert_config

    try:
        config = load_albert_config(location, revision=revision)
    except ModelLoadError as err:
        raise ResolveError(str(err)) from None
    if n_tokens > config.max_position_embeddings:
        raise SpecProblem(("input", "tokens"), f"{n_tokens} exceeds the model's max_position_embeddings = "
                          f"{config.max_position_embeddings} ({location})")
    return n_tokens, config.hidden_size, config.num_attention_heads
