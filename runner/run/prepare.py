"""A spec resolved into tasks: read it (with ``--set`` overrides), validate it and let its study
prepare it, for every point of its sweep. Nothing is built or read beyond the spec's files: what
``plan``, ``apply`` and the workers of a distributed executor all start from.
"""

from __future__ import annotations

from pathlib import Path

from runner.spec import footprint
from runner.spec.specfile import SpecError, SpecFile, SpecProblem, read_toml, validate
from runner.storage.store import check_reachable, foreign_or_corrupt, store_path_problem
from runner.storage.store_errors import StoreUnusable
from runner.plugin.study import Prepared, spec_problems, study_for
from runner.spec.sweep import Sweep, expand, point_problem, split
from runner.spec import overrides as ov


def read_spec(spec_path: str | Path | SpecFile, overrides=()) -> SpecFile:
    """A spec file's tables (or a :class:`SpecFile` read before) with ``overrides``
    (``"model[0].seed=3"`` texts, :mod:`runner.spec.overrides`) set."""
    sf = spec_path if isinstance(spec_path, SpecFile) else read_toml(spec_path)
    return ov.apply(sf, [o if isinstance(o, ov.Override) else ov.parse(o) for o in overrides])


def validate_spec(spec_path: str | Path, overrides=()):
    """Read and validate a spec of any study (its files and store path checked); no resolution.
    For a spec with a sweep, the spec without it (its store: the sweep's)."""
    base, axes = split(read_spec(spec_path, overrides))
    return _validated(base, sweep=axes is not None)[1]


def _validated(sf, sweep: bool = False, point: bool = False):
    study = study_for(sf)
    spec = validate(study.spec_model(), sf)
    check_reachable(spec.store_path())  # a bucket that cannot be reached: said before anything else is checked
    problems = spec_problems(study, spec, sf)
    store = store_path_problem(spec.store_path(), sweep, point)
    if store:
        located = sf.problem(("experiment", "store" if spec.experiment.store else "name"), store)
        if not problems and foreign_or_corrupt(spec.store_path()):  # not the spec's fault: what is there (66)
            raise StoreUnusable(located)
        problems.append(located)
    if problems:
        raise SpecError(sf.path, problems)
    return study, spec


def prepare(spec_path: str | Path | SpecFile, overrides=()) -> Prepared:
    """Validate a spec without a sweep and resolve it into tasks (see :func:`prepare_all`)."""
    sf = read_spec(spec_path, overrides)
    if split(sf)[1] is not None:
        raise SpecError(sf.path, [f"{sf.path}: this spec has a [sweep]; run its points with `runner apply`"])
    return _prepare(sf)


def prepare_all(spec_path: str | Path | SpecFile, overrides=()) -> tuple[Sweep | None, list[Prepared]]:
    """Validate a spec (a file, with ``overrides`` set; or a :class:`SpecFile`) and resolve it into
    tasks: one :class:`Prepared`, or one per point of its sweep. Raises :class:`SpecError` listing
    every problem; requirements this machine does not meet are collected in ``unmet``, not raised."""
    sf = read_spec(spec_path, overrides)
    base, axes = split(sf)
    if axes is None:
        return None, [_prepare(sf)]
    spec = _validated(base, sweep=True)[1]
    problem = point_problem(axes)
    if problem:
        raise SpecError(sf.path, [sf.problem(*problem)])
    sweep = expand(base, axes, spec.store_path())
    prepared, problems = [], {}
    for point in sweep.points:
        try:
            p = _prepare(point.spec_file, point=True)
        except SpecError as err:
            for m in err.problems:  # one line per problem, naming the points that have it
                problems.setdefault(m, []).append(point.name)
            continue
        p.attrs["sweep_point"] = point.values
        prepared.append(p)
    if problems:
        raise SpecError(sf.path, [f"{m} (sweep point{'s' * (len(names) > 1)} {', '.join(names)})"
                                  for m, names in problems.items()])
    return sweep, prepared


def _prepare(sf, point: bool = False) -> Prepared:
    study, spec = _validated(sf, point=point)
    try:
        p = study.prepare(spec, sf)
        footprint.check(p.needs, spec.store_path())  # what the study declares it needs, against this machine
    except SpecProblem as err:
        raise SpecError(sf.path, [sf.problem(err.loc, err.message, type(spec), err.also)]) from None
    if sf.overrides:  # in the provenance, beside the spec's text
        p.attrs["overrides"] = [o.text for o in sf.overrides]
    return p
