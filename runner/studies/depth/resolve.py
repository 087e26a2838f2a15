"""Spec -> networks: each ``[[model]]`` entry and replicate, its family, seeds and state sizes.

Resolution reads configurations only (cheap); weights are loaded by the pass that iterates them,
and the builtin tiny ALBERT is built then. A model that cannot be read here (not cached, no
network) is an unmet requirement, not an error: the plan still shows its tasks.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from models.hub import ModelLoadError
from models.registry import Dims, family_for
from runner.core.requirements import Requirement
from runner.spec.specfile import SpecProblem
from runner.studies.depth.spec import DepthSpec, ModelSpec


@dataclass(frozen=True)
class Network:
    """One model instance: a ``[[model]]`` entry and a replicate index."""

    index: int
    experiment_seed: int
    model: ModelSpec
    replicate: int
    precision: str
    n_tokens: int
    n_hidden: int
    n_heads: int
    revision: str | None = None
    """The checkpoint of a series (``[[model]] revisions``) this network is, else None."""
    training_step: int | None = None

    @property
    def model_label(self) -> str:
        """The store's ``model``: the entry's name, with the checkpoint of a series (``albert@step1000``)."""
        return self.model.name if self.revision is None else f"{self.model.name}@{self.revision}"

    @property
    def label(self) -> str:
        return self.model_label if self.model.replicates == 1 else f"{self.model_label}/{self.replicate}"

    def seed(self, purpose: str) -> int:
        return derive_seed(self.experiment_seed, self.model.name, self.replicate, purpose)


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from the experiment seed and labels (stable across runs and platforms)."""
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def resolve(spec: DepthSpec) -> tuple[list[Network], list[str]]:
    """The networks of a spec, and the requirements this machine does not meet. A network whose
    model cannot be read has unknown sizes (0)."""
    networks: list[Network] = []
    failed: dict[tuple, tuple[list[str], str]] = {}  # (source, revision) -> (entries, reason)
    for i, entry in enumerate(spec.model):
        for model, revision, step in entry.series():
            where = f"[[model]] #{i + 1} ({entry.name}{'' if revision is None else ' revision ' + revision})"
            key = (model.source, model.revision)
            try:
                if key in failed:
                    raise failed[key][1]
                dims = model.family.dims(model.source, revision=model.revision, params=model.params,
                                         n_tokens=spec.input.tokens)
            except ModelLoadError as err:
                failed.setdefault(key, ([], err))[0].append(where)
                dims = Dims(spec.input.tokens, 0, 0)
            except ValueError as err:  # e.g. more tokens than the model's positions
                raise SpecProblem(("input", "tokens"), f"{err} ({model.source})") from None
            if dims.max_steps is not None and spec.dynamics.steps > dims.max_steps:
                raise SpecProblem(("dynamics", "steps"), f"{spec.dynamics.steps} steps, but {model.source} has "
                                  f"{dims.max_steps} layers (one step each)")
            precision = model.precision or spec.dynamics.precision
            for r in range(model.replicates):
                networks.append(Network(len(networks), spec.experiment.seed, model, r, precision, dims.n_tokens,
                                        dims.n_hidden, dims.n_heads, revision, step))
    unmet = [Requirement.from_error(f"{', '.join(wheres)} source {source!r}"
                                    f"{'' if rev is None else ' revision ' + repr(rev)}", err, kind="model",
                                    name=source if rev is None else f"{source}@{rev}")
             for (source, rev), (wheres, err) in failed.items()]
    return networks, unmet


def tokenizer_location(spec: DepthSpec) -> str | None:
    """What the input sentences are tokenized with: ``[input] tokenizer`` or the first text model."""
    source = spec.input.tokenizer or next((m.series()[0][0].source for m in spec.text_models), None)
    if source is None:
        return None
    return family_for(source).location(source, build=True)
