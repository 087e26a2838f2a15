"""TOML manifest -> typed, validated :class:`Spec`.

Every table is a frozen pydantic model with ``extra="forbid"``, so a typo is an error, and every
default equals the parameter of the paper the measure comes from (Inoue et al. 2021 for the depth
dynamics). :func:`load_spec` reports *all* problems at once, each as
``FILE:LINE: [table] key: message``, before anything is computed.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import Field, ValidationError, field_validator, model_validator

from runner.specfile import (Experiment, Name, SpecError, SpecFile, StudySpec, Table, read_toml,  # noqa: F401
                             validate)
from runner.data.sources import anchor
from runner.tasks.device import device_problem

Precision = Literal["fp32", "fp64", "tf32"]
_Table = Table
Study = StudySpec


# --------------------------------------------------------------------------- tables


class InitScheme(_Table):
    scheme: Literal["truncated_normal"] = "truncated_normal"
    """Weight distribution of the paper's initial networks (ALBERT's own initialiser)."""
    std: float = Field(0.02, gt=0)
    """Standard deviation sigma of N(0, sigma^2) (paper: 0.02)."""
    clip: float = Field(2.0, gt=0)
    """Samples are clipped to +-clip*sigma (paper: 2)."""


class ModelSpec(_Table):
    name: Name
    """Label of this model in the store's ``model`` coordinate."""
    source: str
    """``hf:<hub id>``, ``path:<dir>`` or a plain directory, ``builtin:tiny-albert``, or
    ``map:logistic`` / ``map:henon`` / ``map:tanh`` for the reference maps."""
    revision: str | None = None
    """Hub revision (branch, tag or commit) to pin."""
    init: InitScheme | None = None
    """Re-draw every weight with this scheme (the paper's initial networks); None keeps the trained weights."""
    replicates: int = Field(1, ge=1)
    """Independently seeded copies (initial networks, or maps with random weights)."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Parameters of a reference map (r; a, b; g, n)."""
    precision: Precision | None = None
    """Overrides ``[dynamics] precision`` for this model (e.g. fp64 for maps)."""

    @property
    def is_map(self) -> bool:
        return self.source.startswith("map:")

    @property
    def map_name(self) -> str:
        return self.source.removeprefix("map:")

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        if self.is_map:
            from models.maps import MAPS, params_model

            if self.map_name not in MAPS:
                raise ValueError(f"unknown map {self.map_name!r}; choose one of {sorted(MAPS)}")
            if self.init is not None:
                raise ValueError("init applies to ALBERT models, not to reference maps")
            try:
                params_model(self.map_name).model_validate(self.params, strict=True)
            except ValidationError as err:
                detail = "; ".join(f"params.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors())
                raise ValueError(detail) from None
        elif self.params:
            raise ValueError("params applies to reference maps (source = 'map:...') only")
        return self


class InputSpec(_Table):
    source: str = "hf:wikimedia/wikipedia"
    """``hf:<dataset id>``, a local .txt/.jsonl/.parquet file, or ``builtin:pydoc-topics``."""
    subset: str | None = "20231101.en"
    """Dataset configuration (the English Wikipedia dump for the paper)."""
    split: str = "train"
    field: str = "text"
    """Column holding the text."""
    samples: int = Field(1000, ge=1)
    """Number of sentences (paper: 1000); reference maps draw this many initial states."""
    tokens: int = Field(32, ge=2)
    """Exactly this many tokens per sentence, N_w (paper: 32)."""
    tokenizer: str | None = None
    """Tokenizer source; defaults to the first text model's source."""
    streaming: bool = True
    """Stream hub datasets instead of downloading them whole."""


class DynamicsSpec(_Table):
    steps: int = Field(500, ge=1)
    """t = 0 .. steps applications of f (paper: 500 short-term, 1e6 long-term)."""
    precision: Precision = "fp32"
    """fp32 (default), fp64, or tf32 (opt-in; biases negative exponents, see docs)."""
    device: str = "auto"
    """``auto`` (CUDA when present, else CPU), ``cpu``, ``cuda``, ``cuda:1``..."""

    @field_validator("device")
    @classmethod
    def _device(cls, value: str) -> str:
        problem = device_problem(value)
        if problem:
            raise ValueError(problem)
        return value
    implementation: Literal["fused", "transformers"] = "fused"
    """ALBERT layer: ``fused`` (one QKV GEMM, SDPA, one-kernel GELU) or the ``transformers`` module."""
    checkpoint_every: int | None = Field(None, ge=1)
    """Steps between durable points (results written, state saved); default chosen from steps."""
    batch_size: int | None = Field(None, ge=1)
    """Sequences per application of f (default: all at once; halved automatically on OOM)."""


# --------------------------------------------------------------------------- measures


class _Measure(_Table):
    def params(self) -> dict[str, Any]:
        return self.model_dump(exclude={"kind"})


class TokenDeviation(_Measure):
    """Token deviation D(t) (Eq. 5) and synchronization offset (Fig. 2A-B)."""

    kind: Literal["token_deviation"]
    threshold: float = Field(1e-5, gt=0)
    """Synchronization offset = first t with D(t) < threshold (paper: 1e-5)."""
    every: int = Field(1, ge=1)
    """Keep D(t) every n steps (the offset itself is exact at any stride)."""


class Lyapunov(_Measure):
    """Local Lyapunov exponent lambda(t), Algorithm A1 (Appendix C)."""

    kind: Literal["lyapunov"]
    k: float = Field(1.0, gt=0)
    """Perturbation norm (paper: 1.0)."""
    tau: int = Field(10, ge=1)
    """Renormalisation interval (paper: 10 short-term, 50 long-term)."""


class EffectiveDimension(_Measure):
    """Effective dimension N_eff(t) of the state cloud across samples (Eq. 6, Fig. 2C)."""

    kind: Literal["effective_dimension"]
    every: int = Field(1, ge=1)


class TransientChaos(_Measure):
    """Transient-chaos length per sample from the exponent series (Fig. 4D)."""

    kind: Literal["transient_chaos"]


class Trajectory(_Measure):
    """Selected elements of selected token vectors (Fig. 2A top, Fig. 4A)."""

    kind: Literal["trajectory"]
    samples: list[int] = Field(default_factory=lambda: [0], min_length=1)
    tokens: list[int] = Field(default_factory=lambda: list(range(10)), min_length=1)
    elements: list[int] = Field(default_factory=lambda: [0], min_length=1)
    every: int = Field(1, ge=1)


class Attention(_Measure):
    """Attention probabilities of selected samples every n steps (Fig. 2A bottom)."""

    kind: Literal["attention"]
    samples: list[int] = Field(default_factory=lambda: [0], min_length=1)
    every: int = Field(50, ge=1)
    """Paper: every 50 steps."""


class PCA(_Measure):
    """PCA projection of a window of one trajectory (Fig. 4C)."""

    kind: Literal["pca"]
    samples: list[int] = Field(default_factory=lambda: [0], min_length=1)
    start: int = Field(0, ge=0)
    stop: int | None = Field(None, ge=1)
    """Last step of the window (default: the last step)."""
    every: int = Field(1, ge=1)
    components: int = Field(2, ge=1, le=16)
    max_points: int = Field(5000, ge=2)
    """Refuse windows with more points than this (they are held in memory)."""


Measure = Annotated[
    Union[TokenDeviation, Lyapunov, EffectiveDimension, TransientChaos, Trajectory, Attention, PCA],
    Field(discriminator="kind"),
]


# --------------------------------------------------------------------------- the spec


class Spec(StudySpec):
    """A depth-dynamics spec."""

    model: list[ModelSpec] = Field(min_length=1)
    input: InputSpec = InputSpec()
    dynamics: DynamicsSpec = DynamicsSpec()
    measure: list[Measure] = Field(min_length=1)

    def problems(self) -> list[tuple[tuple, str]]:
        out: list[tuple[tuple, str]] = []
        names = [m.name for m in self.model]
        for i, n in enumerate(names):
            if n in names[:i]:
                out.append((("model", i, "name"), f"model names must be unique; {n!r} is repeated"))
        kinds = [m.kind for m in self.measure]
        for i, k in enumerate(kinds):
            if k in kinds[:i]:
                out.append((("measure", i, "kind"), f"each measure kind may appear once; {k!r} is repeated"))
        if "transient_chaos" in kinds and "lyapunov" not in kinds:
            out.append((("measure", kinds.index("transient_chaos"), "kind"),
                        "measure transient_chaos needs a lyapunov measure"))
        steps = self.dynamics.steps
        every = self.dynamics.checkpoint_every
        if every and every % self.stride_lcm():
            out.append((("dynamics", "checkpoint_every"),
                        f"{every} must be a multiple of every measure's `every` and `tau` (their lcm is "
                        f"{self.stride_lcm()}), so that segments align with chunks"))
        for i, m in enumerate(self.measure):
            for key in ("tau", "every"):
                value = getattr(m, key, None)
                if value is not None and value > steps and not (key == "every" and isinstance(m, PCA)):
                    out.append((("measure", i, key), f"{value} is larger than [dynamics] steps = {steps}; "
                                "the measure would keep no value"))
            for s in getattr(m, "samples", []):
                if not 0 <= s < self.input.samples:
                    out.append((("measure", i, "samples"),
                                f"sample {s} out of range (input.samples = {self.input.samples})"))
            if isinstance(m, Trajectory) and self.text_models:
                bad = [t for t in m.tokens if not 0 <= t < self.input.tokens]
                if bad:
                    out.append((("measure", i, "tokens"),
                                f"tokens {bad} out of range (input.tokens = {self.input.tokens})"))
            if isinstance(m, PCA):
                stop = m.stop or steps
                if not m.start < stop <= steps:
                    out.append((("measure", i, "stop" if m.stop else "start"),
                                f"need start < stop <= [dynamics] steps ({steps}); got start = {m.start}, stop = {stop}"))
                elif (stop - m.start) // m.every + 1 > m.max_points:
                    out.append((("measure", i, "max_points"),
                                f"the window holds {(stop - m.start) // m.every + 1} points, more than max_points = "
                                f"{m.max_points}; raise max_points, shorten the window or raise every"))
        return out

    # --- conveniences used by the planner
    @property
    def text_models(self) -> list[ModelSpec]:
        return [m for m in self.model if not m.is_map]

    def measures(self) -> dict[str, Any]:
        return {m.kind: m for m in self.measure}

    def stride_lcm(self) -> int:
        """Least common multiple of the strides (``every``) and intervals (``tau``) of the measures."""
        return math.lcm(*(getattr(m, a, 1) for m in self.measure for a in ("every", "tau")))


MEASURE_TYPES = {t.model_fields["kind"].annotation.__args__[0]: t for t in Measure.__origin__.__args__}  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- loading


def load_spec(path: str | Path) -> Spec:
    """Read, parse and validate a spec; raise :class:`SpecError` listing every problem."""
    return load_spec_file(read_toml(path))


def load_spec_file(sf: SpecFile) -> Spec:
    spec = validate(Spec, sf)
    spec = _anchor_paths(spec, sf.path.parent)
    problems = check_files(spec, sf)
    if problems:
        raise SpecError(sf.path, problems)
    return spec


def _anchor_paths(spec: Spec, base: Path) -> Spec:
    models = [m.model_copy(update={"source": anchor(m.source, base)}) for m in spec.model]
    inp = spec.input.model_copy(update={"source": anchor(spec.input.source, base)})
    return spec.model_copy(update={"model": models, "input": inp})


def check_files(spec: Spec, sf: SpecFile) -> list[str]:
    """Local paths named by the spec must exist (hub ids are checked when resolved); the store
    path must be new, an empty folder, or a store of this runner."""
    from runner.store import store_path_problem

    problems = []
    for i, m in enumerate(spec.model):
        local = local_path(m.source)
        if local is not None and not local.is_dir():
            problems.append(sf.problem(("model", i, "source"), f"no such directory {local}"))
    if spec.text_models:
        from runner.data.sources import InputError, check_source

        try:
            check_source(spec.input.source, subset=spec.input.subset, split=spec.input.split, field=spec.input.field)
        except InputError as err:
            problems.append(sf.problem(("input", "source"), str(err)))
    store = store_path_problem(spec.store_path())
    if store:
        problems.append(sf.problem(("experiment", "store" if spec.experiment.store else "name"), store))
    return problems


def local_path(source: str) -> Path | None:
    """The directory a model source names, or None for hub ids, builtins and maps."""
    if source.startswith("path:"):
        return Path(source.removeprefix("path:"))
    if re.match(r"^[a-z]+:", source):
        return None
    return Path(source)
