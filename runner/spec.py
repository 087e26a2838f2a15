"""TOML manifest -> typed, validated :class:`Spec`.

Every table is a frozen pydantic model with ``extra="forbid"``, so a typo is an error, and every
default equals the parameter of the paper the measure comes from (Inoue et al. 2021 for the depth
dynamics). :func:`load_spec` reports *all* problems at once, each as
``FILE:LINE: [table] key: message``, before anything is computed.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import tomli
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

MAX_SPEC_BYTES = 1 << 20
Precision = Literal["fp32", "fp64", "tf32"]


class SpecError(Exception):
    """A spec that cannot be run; ``problems`` holds one line per problem."""

    def __init__(self, path: Path | str, problems: list[str]):
        self.path = str(path)
        self.problems = problems
        super().__init__("\n".join(problems))


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


# --------------------------------------------------------------------------- tables


class Experiment(_Table):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    """Experiment name; the store defaults to ``store/<name>.zarr``."""
    description: str = ""
    """One line saying what the experiment reproduces."""
    seed: int = 0
    """Master seed: sample draws, initial networks and perturbations derive from it."""
    store: str | None = None
    """Path of the zarr store (default ``store/<name>.zarr``, relative to the working directory)."""


class InitScheme(_Table):
    scheme: Literal["truncated_normal"] = "truncated_normal"
    """Weight distribution of the paper's initial networks (ALBERT's own initialiser)."""
    std: float = Field(0.02, gt=0)
    """Standard deviation sigma of N(0, sigma^2) (paper: 0.02)."""
    clip: float = Field(2.0, gt=0)
    """Samples are clipped to +-clip*sigma (paper: 2)."""


class ModelSpec(_Table):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
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
                params_model(self.map_name)(**self.params)
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


class Study(_Table):
    """What every spec has: an ``[experiment]``, a store, and a hash of its resolved content."""

    experiment: Experiment

    def store_path(self) -> Path:
        return Path(self.experiment.store or f"store/{self.experiment.name}.zarr")

    def canonical_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))

    def sha256(self) -> str:
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()


class Spec(Study):
    """A depth-dynamics spec."""

    model: list[ModelSpec] = Field(min_length=1)
    input: InputSpec = InputSpec()
    dynamics: DynamicsSpec = DynamicsSpec()
    measure: list[Measure] = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> Spec:
        names = [m.name for m in self.model]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"model names must be unique; repeated: {dupes}")
        kinds = [m.kind for m in self.measure]
        dupes = sorted({k for k in kinds if kinds.count(k) > 1})
        if dupes:
            raise ValueError(f"each measure kind may appear once; repeated: {dupes}")
        if "transient_chaos" in kinds and "lyapunov" not in kinds:
            raise ValueError("measure transient_chaos needs a lyapunov measure")
        every = self.dynamics.checkpoint_every
        if every and every % self.stride_lcm():
            raise ValueError(f"[dynamics] checkpoint_every: {every} must be a multiple of every measure's `every` "
                             f"and `tau` (their lcm is {self.stride_lcm()}), so that segments align with chunks")
        for m in self.measure:
            for s in getattr(m, "samples", []):
                if not 0 <= s < self.input.samples:
                    raise ValueError(f"measure {m.kind}: sample {s} out of range (input.samples = {self.input.samples})")
            if isinstance(m, Trajectory):
                bad = [t for t in m.tokens if not 0 <= t < self.input.tokens]
                if bad and self.text_models:
                    raise ValueError(f"measure trajectory: tokens {bad} out of range (input.tokens = {self.input.tokens})")
            if isinstance(m, PCA):
                stop = m.stop or self.dynamics.steps
                if not m.start < stop <= self.dynamics.steps:
                    raise ValueError(f"measure pca: need start < stop <= dynamics.steps ({self.dynamics.steps})")
                if (stop - m.start) // m.every + 1 > m.max_points:
                    raise ValueError(f"measure pca: the window holds more than max_points = {m.max_points} points")
        return self

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


def read_toml(path: Path) -> tuple[str, dict]:
    """The text and parsed tables of a spec file; :class:`SpecError` if it is missing, huge or not TOML."""
    if not path.is_file():
        raise SpecError(path, [f"{path}: no such spec file"])
    raw = path.read_bytes()
    if len(raw) > MAX_SPEC_BYTES:
        raise SpecError(path, [f"{path}: larger than {MAX_SPEC_BYTES} bytes; is this a spec?"])
    text = raw.decode("utf-8")
    try:
        return text, tomli.loads(text)
    except tomli.TOMLDecodeError as err:
        raise SpecError(path, [f"{path}:{err.lineno}:{err.colno}: invalid TOML: {err.msg}"]) from None


def load_spec(path: str | Path) -> Spec:
    """Read, parse and validate a spec; raise :class:`SpecError` listing every problem."""
    path = Path(path)
    text, data = read_toml(path)
    try:
        spec = Spec.model_validate(data)
    except ValidationError as err:
        raise SpecError(path, [_describe(path, text, data, e) for e in err.errors()]) from None
    spec = _anchor_paths(spec, path.parent)
    problems = check_files(spec, path, text)
    if problems:
        raise SpecError(path, problems)
    return spec


def _anchor(source: str, base: Path) -> str:
    """A relative local path as seen from the spec's folder when it exists there, else as typed
    (relative to the working directory)."""
    local = local_path(source)
    if local is None or local.is_absolute() or not (base / local).exists():
        return source
    return ("path:" if source.startswith("path:") else "") + str(base / local)


def _anchor_paths(spec: Spec, base: Path) -> Spec:
    models = [m.model_copy(update={"source": _anchor(m.source, base)}) for m in spec.model]
    inp = spec.input
    if local_path(inp.source) is not None and not inp.source.startswith("hf:"):
        inp = inp.model_copy(update={"source": _anchor(inp.source, base)})
    return spec.model_copy(update={"model": models, "input": inp})


def check_files(spec: Spec, path: Path, text: str) -> list[str]:
    """Local paths named by the spec must exist (hub ids are checked when resolved)."""
    problems = []
    for i, m in enumerate(spec.model):
        local = local_path(m.source)
        if local is not None and not local.is_dir():
            line = _locate(text, ("model", i, "source"))
            problems.append(f"{path}:{line}: [[model]] #{i + 1} ({m.name}) source: no such directory {local}")
    if spec.text_models:
        from runner.inputs import InputError, check_source

        try:
            check_source(spec.input.source, subset=spec.input.subset, split=spec.input.split, field=spec.input.field)
        except InputError as err:
            problems.append(f"{path}:{_locate(text, ('input', 'source'))}: [input] source: {err}")
    return problems


def local_path(source: str) -> Path | None:
    """The directory a model source names, or None for hub ids, builtins and maps."""
    if source.startswith("path:"):
        return Path(source.removeprefix("path:"))
    if re.match(r"^[a-z]+:", source):
        return None
    return Path(source)


# --------------------------------------------------------------------------- error messages


def _describe(path: Path, text: str, data: dict, error: dict) -> str:
    loc = [p for p in error["loc"]]
    msg = error["msg"].removeprefix("Value error, ")
    named = re.match(r"^\[(\w+)\] (\w+): ", msg)  # a cross-table rule that names its table and key
    if not loc and named:
        return f"{path}:{_locate(text, (named[1], named[2]))}: {msg}"
    # discriminated unions add the tag as a path segment: measure.1.lyapunov.tau
    if len(loc) >= 3 and loc[0] == "measure" and isinstance(loc[2], str) and loc[2] in MEASURE_TYPES:
        del loc[2]
    if len(loc) >= 3 and loc[0] == "model" and loc[2] == "params":
        loc = loc[:3]
    line = _locate(text, tuple(loc))
    where = _table_name(loc, data)
    key = ".".join(str(p) for p in loc[2 if _is_array(loc) else 1 :])
    if len(loc) == 1 and error["type"] in ("extra_forbidden", "missing"):
        what = "unknown table" + _suggest(loc, data) if error["type"] == "extra_forbidden" else "required table is missing"
        return f"{path}:{line}: [{loc[0]}]: {what}"
    if error["type"] == "extra_forbidden":
        msg = "unknown key" + _suggest(loc, data)
    elif error["type"] == "missing":
        msg = "required key is missing"
    return f"{path}:{line}: {where}{' ' + key if key else ''}: {msg}"


def _is_array(loc: list) -> bool:
    return len(loc) >= 2 and loc[0] in ("model", "measure") and isinstance(loc[1], int)


def _table_name(loc: list, data: dict) -> str:
    if not loc:
        return "(top level)"
    if _is_array(loc):
        entry = data.get(loc[0], [])[loc[1]] if isinstance(data.get(loc[0]), list) else {}
        label = entry.get("name") or entry.get("kind") if isinstance(entry, dict) else None
        return f"[[{loc[0]}]] #{loc[1] + 1}" + (f" ({label})" if label else "")
    if loc[0] in ("model", "measure"):
        return f"[[{loc[0]}]]"
    return f"[{loc[0]}]" if len(loc) > 1 or loc[0] in Spec.model_fields else "(top level)"


def _suggest(loc: list, data: dict) -> str:
    key = loc[-1]
    parent: Any = Spec
    if len(loc) == 1:
        fields = Spec.model_fields
    else:
        table = loc[0]
        if table == "measure" and _is_array(loc):
            kind = data["measure"][loc[1]].get("kind")
            fields = MEASURE_TYPES[kind].model_fields if kind in MEASURE_TYPES else {}
        else:
            parent = {"experiment": Experiment, "model": ModelSpec, "input": InputSpec, "dynamics": DynamicsSpec}.get(table)
            fields = parent.model_fields if parent else {}
    close = difflib.get_close_matches(str(key), list(fields), n=1)
    return f" (did you mean {close[0]!r}?)" if close else f" (known keys: {', '.join(fields)})"


def _locate(text: str, loc: tuple) -> int:
    """Line of the TOML text where ``loc`` (table, [index,] key) is set; the table header if the key is absent."""
    table = loc[0] if loc else None
    index = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else 0
    key = next((p for p in loc[1:] if isinstance(p, str)), None)
    header_line, seen, inside = 1, -1, False
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        m = re.match(r"^\[\[?\s*([A-Za-z0-9_.-]+)\s*\]\]?", stripped)
        if m:
            inside = False
            if m.group(1) == table:
                seen += 1 if stripped.startswith("[[") else 0
                if not stripped.startswith("[[") or seen == index:
                    inside, header_line = True, n
            continue
        if inside and key and re.match(rf"^{re.escape(key)}\s*=", stripped):
            return n
    return header_line
