"""The depth-dynamics spec: ``[experiment]``, ``[[model]]``, ``[input]``, ``[dynamics]``, ``[[measure]]``.

Every default is the paper's parameter (Inoue et al. 2021): 1000 sentences of 32 tokens, 500
steps, the initial networks' truncated normal (0.02, 2 sigma), and each measure's own defaults.
The ``[[measure]]`` entries are the study's registered measures (:mod:`runner.plugin.measures`).
"""

from __future__ import annotations

import functools
import math
from typing import Any, ClassVar, Literal

from pydantic import Field, ValidationError, create_model, model_validator

from models.registry import family_for
from models.source import Source, SourceText
from models.suites import parse_revisions, step_of
from runner.core.device import DeviceName
from runner.plugin.measures import measures, params_union
from runner.plugin.timings import StepMeasure
from runner.spec.specfile import Name, StudySpec, Table, repeated
from runner.studies.depth.precision import UNIT_ROUNDOFF

Precision = Literal["fp32", "fp64", "tf32", "bf16"]


class InitScheme(Table):
    scheme: Literal["truncated_normal"] = "truncated_normal"
    """Weight distribution of the paper's initial networks (ALBERT's own initialiser)."""
    std: float = Field(0.02, gt=0)
    """Standard deviation sigma of N(0, sigma^2) (paper: 0.02)."""
    clip: float = Field(2.0, gt=0)
    """Samples are clipped to +-clip*sigma (paper: 2)."""


class ModelSpec(Table):
    name: Name
    """Label of this model in the store's ``model`` coordinate."""
    source: SourceText
    """``hf:<hub id>``, ``path:<dir>`` or a plain directory, ``builtin:tiny-albert``, or
    ``map:logistic`` / ``map:henon`` / ``map:tanh`` for the reference maps."""
    revision: str | None = None
    """Hub revision (branch, tag or commit) to pin."""
    revisions: str | list[str] | None = None
    """A checkpoint series, one network per checkpoint (training as time): hub revisions as a pattern
    ``"step{0..143000:1000}"`` or a list, or the step folders of a local directory ``source``
    (``<dir>/step1000/config.json``); the store records each network's ``revision`` and ``training_step``."""
    init: InitScheme | None = None
    """Re-draw every weight with this scheme (the paper's initial networks); None keeps the trained weights."""
    replicates: int = Field(1, ge=1)
    """Independently seeded copies (initial networks, or maps with random weights)."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Parameters of a reference map (r; a, b; g, n)."""
    precision: Precision | None = None
    """Overrides ``[dynamics] precision`` for this model (e.g. fp64 for maps)."""

    @property
    def family(self):
        return family_for(self.source)

    @property
    def is_map(self) -> bool:
        return self.family is not None and not self.family.text

    def series(self) -> list[tuple[ModelSpec, str | None, int | None]]:
        """One (entry, revision, training step) per checkpoint: the entry itself when it names no
        ``revisions``; else a copy per revision that loads it (the hub's ``revision``, or the local
        directory's step folder as ``source``)."""
        if self.revisions is None:
            return [(self, None, None)]

        out = []
        for r in parse_revisions(self.revisions):
            local = self.family.local_dir(self.source)
            update = ({"source": self.family.checkpoint_source(self.source, local / r)} if local is not None
                      else {"revision": r})
            out.append((self.model_copy(update={**update, "revisions": None}), r, step_of(r)))
        return out

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        family = self.family
        if family is None:
            raise ValueError(f"unknown source {self.source!r}; use hf:<id>, path:<dir>, builtin:tiny-albert or map:<name>")
        problem = family.check(self.source, self.params, self.init)
        if problem:
            raise ValueError(problem)
        if self.revisions is not None:
            if not family.series:
                raise ValueError("revisions name checkpoints on the hub or step folders of a local directory of an "
                                 f"ALBERT (hf:<id>, path:<dir>) or a layers: stack, not of {self.source!r}")
            if self.init is not None:
                raise ValueError("init re-draws every weight, so every checkpoint of the series would be the same "
                                 "network; leave init out of a series")
            if self.revision is not None:
                raise ValueError("give either revision (one checkpoint) or revisions (a series), not both")
            for r in parse_revisions(self.revisions):
                step_of(r)
        params_model = family.params_model(self.source)
        if params_model is not None:
            try:
                params_model.model_validate(self.params, strict=True)
            except ValidationError as err:
                detail = "; ".join(f"params.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors())
                raise ValueError(detail) from None
        return self


class InputSpec(Table):
    source: SourceText = Source("hf:wikimedia/wikipedia")
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
    pair: list[str] | None = None
    """Sentence pairs instead of sentences: the two fields of a pair (GLUE STS-B: ``["sentence1",
    "sentence2"]``), encoded as ``[CLS] a [SEP] b [SEP]`` (``runner.studies.depth.samples.draw_pairs``);
    needs ``score``. ``field`` is then unused."""
    score: str | None = None
    """The field holding a pair's annotated score (STS-B: ``label``, 0-5); stored as ``score`` on
    ``sample``, read by the STS-B and handwriting readouts."""

    @model_validator(mode="after")
    def _pairs(self) -> InputSpec:
        if self.pair is not None and len(self.pair) != 2:
            raise ValueError(f"pair names the two fields of a sentence pair; got {len(self.pair)}: {self.pair}")
        if (self.pair is None) != (self.score is None):
            raise ValueError("pair and score go together: a sentence pair needs its score field, and a score "
                             "its pair of sentence fields")
        return self

    def key(self) -> dict[str, Any]:
        """What the drawn samples depend on (pair and score only when set: older task ids stand)."""
        return self.model_dump(mode="json", exclude={"streaming"} | ({"pair", "score"} if self.pair is None else set()))


#: The largest relative token spread the reduced iteration may merge into one token.
MAX_REDUCE_SPREAD = 1e-4


class DynamicsSpec(Table):
    steps: int = Field(500, ge=1)
    """t = 0 .. steps applications of f (paper: 500 short-term, 1e6 long-term)."""
    precision: Precision = "fp32"
    """fp32 (default), fp64, tf32 (CUDA matmuls in TensorFloat-32) or bf16; each measure says in
    which it can be trusted (runner/studies/depth/precision.py), and a spec asking for another is
    refused before anything runs."""
    untrusted_precision: bool = False
    """Run measures in a precision they are not trusted in (to compare precisions, as
    benchmarks/precision.py does)."""
    untrusted_perturbation: bool = False
    """Run a perturbation (the Lyapunov exponent's k) that is not small against a map's domain, which
    is refused otherwise: its twin leaves the linear regime, or the domain (to study just that)."""
    device: DeviceName = "auto"
    """``auto`` (CUDA when present, else CPU), ``cpu``, ``cuda``, ``cuda:1``..."""
    implementation: Literal["fused", "transformers"] = "fused"
    """ALBERT layer: ``fused`` (one QKV GEMM, SDPA, one-kernel GELU) or the ``transformers`` module."""
    checkpoint_every: int | None = Field(None, ge=1)
    """Steps between durable points (results written, state saved); default chosen from steps."""
    batch_size: int | None = Field(None, ge=1)
    """Sequences per application of f (default: all at once; halved automatically on OOM)."""
    compile: bool = False
    """Compile f with ``torch.compile`` (inductor): fused kernels where it helps, chiefly on GPUs (the
    issue's H100 probe: bf16 ALBERT-large about 1.9x faster compiled). Results equal the eager map to
    rounding, not bit for bit, so the option joins the trajectory's task key when on."""
    early_exit: bool = False
    """A sample whose whole state (x and its twins) repeats bit for bit leaves f's batch; its later
    values are replayed from its cycle (runner/studies/depth/exit.py). Off by default: results equal
    a full run only where f gives each row the same bits in a smaller batch (docs/architecture.md)."""
    exit_period: int = Field(2, ge=1)
    """Cycles whose period divides lcm(exit_period, every twin measure's tau) are detected (1: fixed
    points only); an exited sample keeps that many copies of its state."""
    reduce: Literal["none", "synchronized"] = "none"
    """``synchronized``: a sample whose tokens have synchronised runs as one token, broadcast (maps
    that treat tokens alike: ALBERT; runner/studies/depth/reduce.py). Results agree with a full run
    statistically, not bit for bit, so the option joins the trajectory's task key when on."""
    reduce_tolerance: float = Field(100.0, gt=0, allow_inf_nan=False)
    """A sample reduces when every row's token spread sqrt(D(t)) / rms token norm is below this many
    unit roundoffs u of the precision (fp32: 100 u = 6e-6)."""
    reduce_every: int = Field(50, ge=1)
    """Steps between checks for samples that have synchronised."""
    reduce_guard_steps: int = Field(20, ge=0)
    """Full-width steps of the guard: a perturbation that sums to zero over the tokens must shrink
    over them (transverse stability); 0: no guard (reduction assumed, not checked)."""
    reduce_guard_size: float = Field(1e-3, gt=0, lt=1, allow_inf_nan=False)
    """The guard's perturbation, relative rms to the state."""
    reduce_guard_every: int = Field(10_000, ge=1)
    """Steps between guards of the samples already reduced (each also at its entry)."""

    def reduction(self) -> dict[str, Any] | None:
        """The reduction's parameters (in the trajectory key), None when off."""
        if self.reduce == "none":
            return None
        return {"reduce": self.reduce, **{k: getattr(self, k) for k in type(self).model_fields
                                          if k.startswith("reduce_")}}


class DepthSpec(StudySpec):
    """A depth-dynamics spec (its ``measure`` list is typed by :func:`spec_model`)."""

    model: list[ModelSpec] = Field(min_length=1)
    input: InputSpec = InputSpec()
    dynamics: DynamicsSpec = DynamicsSpec()
    measure: list[Any] = Field(min_length=1)

    #: As a measure's view (:class:`~runner.plugin.timings.StepView`): where the run's length is set.
    steps_name: ClassVar[str] = "[dynamics] steps"

    @property
    def steps(self) -> int:
        """Steps of the run (a measure's view, :class:`~runner.plugin.timings.StepView`)."""
        return self.dynamics.steps

    def problems(self) -> list[tuple[tuple, str]]:
        out = repeated(self.model, "model")
        kinds = [m.kind for m in self.measure]
        registry = measures("depth")
        for i, k in enumerate(kinds):
            if k in kinds[:i]:
                out.append((("measure", i, "kind"), f"each measure kind may appear once; {k!r} is repeated"))
            source = registry[k].tags.derived and registry[k].tags.derived.source
            if source and source not in kinds:
                out.append((("measure", i, "kind"), f"measure {k} needs a {source} measure"))
        every = self.dynamics.checkpoint_every
        if every and every % self.stride_lcm():
            out.append((("dynamics", "checkpoint_every"),
                        f"{every} must be a multiple of every measure's `every` and `tau` (their lcm is "
                        f"{self.stride_lcm()}), so that segments align with chunks"))
        if self.dynamics.early_exit:
            for i, m in enumerate(self.model):
                if not m.family.autonomous:
                    out.append((("model", i, "source"), f"{m.source} is a different map at every step, so a repeated "
                                "state does not repeat its future; set [dynamics] early_exit = false"))
            for i, m in enumerate(self.measure):
                reg = registry[m.kind]
                if reg.tags.timing == "step" and reg.tags.step.period(m) is None:
                    out.append((("dynamics", "early_exit"), f"measure {m.kind} ([[measure]] #{i + 1}) does not allow "
                                "early exit (its values could differ from a full run); set early_exit = false"))
        out += self._reduce_problems()
        return out  # each measure's own problems: Measure.problems, asked by the engine

    @property
    def text_models(self) -> list[ModelSpec]:
        return [m for m in self.model if not m.is_map]

    def measures(self) -> dict[str, Any]:
        return {m.kind: m for m in self.measure}

    def _reduce_problems(self) -> list[tuple[tuple, str]]:
        d, out = self.dynamics, []
        if d.reduce == "none":
            return out
        if d.early_exit:
            out.append((("dynamics", "reduce"), "reduce and early_exit both take rows out of f's batch; choose one "
                        "(set early_exit = false or reduce = \"none\")"))
        floor = {p: d.reduce_tolerance * u for p, u in UNIT_ROUNDOFF.items()}
        for i, m in enumerate(self.model):
            precision = m.precision or d.precision
            if floor[precision] > MAX_REDUCE_SPREAD:
                out.append((("dynamics", "reduce_tolerance"), f"{d.reduce_tolerance:g} unit roundoffs of {precision} "
                            f"(model {m.name}) let tokens {floor[precision]:.1e} apart (relative rms) count as one; "
                            f"at most {MAX_REDUCE_SPREAD:g} is allowed: lower reduce_tolerance to "
                            f"{MAX_REDUCE_SPREAD / UNIT_ROUNDOFF[precision]:.3g} or run in fp32"))
                break
            if d.reduce_guard_steps and d.reduce_guard_size < 10 * floor[precision]:
                out.append((("dynamics", "reduce_guard_size"), f"{d.reduce_guard_size:g} is within ten times the "
                            f"reduction's tolerance in {precision} ({floor[precision]:.1e}, model {m.name}): the "
                            "guard would measure rounding; raise it or lower reduce_tolerance"))
                break
        return out

    def exit_period(self) -> int | None:
        """P of early exit (:mod:`runner.studies.depth.exit`); None when it is off."""
        if not self.dynamics.early_exit:
            return None
        registry = measures("depth")
        tags = [(registry[m.kind].tags, m) for m in self.measure]
        return math.lcm(self.dynamics.exit_period, *(t.step.period(m) or 1 for t, m in tags if t.timing == "step"))

    def stride_lcm(self) -> int:
        """Least common multiple of the measures' declared strides (their tags' ``strides``)."""
        registry = measures("depth")
        instances = [registry[m.kind](m) for m in self.measure]
        return math.lcm(*(s for i in instances if isinstance(i, StepMeasure) for s in i.stride_values()))


def spec_model() -> type[DepthSpec]:
    """The spec with the measures registered now (a plugin's measures included)."""
    return _spec_model(tuple(sorted(measures("depth"))))


@functools.cache
def _spec_model(kinds: tuple[str, ...]) -> type[DepthSpec]:
    return create_model("DepthSpec", __base__=DepthSpec,
                        measure=(list[params_union("depth")], Field(min_length=1)))  # type: ignore[valid-type]


TABLES = {"model": ModelSpec, "init": InitScheme, "input": InputSpec, "dynamics": DynamicsSpec}
