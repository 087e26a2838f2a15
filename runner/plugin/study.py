"""Studies: the plugins that turn a spec into tasks and run them. The engine knows none by name.

A study subclasses :class:`Study` and is registered with :func:`register`; the engine finds the
studies through :mod:`runner.plugin.loader` and names none. A study provides:

- its spec: ``spec_model()`` (its tables, with the papers' defaults; the ``[[measure]]`` entries
  are the study's registered measures, :mod:`runner.plugin.measures`) and ``tables()`` for ``explain``;
  a spec names its study in ``[experiment] study``, or the study is inferred from its tables;
- ``check``: the problems only the file system can show (missing files), before any compute;
- ``prepare``: the resolved spec as a :class:`Prepared` (tasks with ids and dependencies, the
  requirements this machine does not meet, the memory and disk the run needs, the text ``plan``
  shows) without building models or reading data;
- ``open``: a :class:`Session` for a run, which builds what the tasks need and runs them;
- optionally ``estimate``: the device time and disk of its tasks, from a short calibration;
- optionally ``figure_recipes``: the module of its figure recipes (``runner figures``).

Variables carry their own plotting and summary hints (:func:`runner.plugin.measures.hints`), so ``show``,
``status`` and the monitor read any store without the study's code.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from runner.core import errors
from runner.core.errors import UsageError
from runner.core.layout import Layout
from runner.plugin.loader import load_plugins
from runner.plugin.measures import measure_problems
from runner.core.plan import Task
from runner.spec.footprint import Need
from runner.spec.specfile import SpecError, SpecFile, StudySpec
from runner.core.estimate import NoEstimate

if TYPE_CHECKING:  # pragma: no cover
    from runner.storage.store import Store

_STUDIES: dict[str, type[Study]] = {}


class ShardError(UsageError):
    """A group of tasks that cannot be split into sample shards; the message says which measure and why."""


class SourceUnavailable(errors.Unavailable):
    """A model, tokenizer or data set that cannot be loaded now; the message says which and why."""


@dataclass
class Prepared:
    """A validated spec resolved into tasks, before anything runs."""

    study: Study
    spec: StudySpec
    spec_file: SpecFile
    tasks: list[Task]
    labels: list[str]
    """Network labels, indexed by ``Task.network``."""
    device: str = "auto"
    """The device the spec asks for."""
    unmet: list[str] = field(default_factory=list)
    """Requirements this machine does not meet; ``apply`` refuses while there are any."""
    state: Any = None
    """The study's own resolved data (networks, schedule, ...)."""
    attrs: dict[str, str] = field(default_factory=dict)
    """Root attributes the engine adds to the store (the point of a sweep)."""
    needs: list[Need] = field(default_factory=list)
    """What the run holds in memory at once and writes to disk (:class:`runner.spec.footprint.Need`), which
    the engine checks against this machine before anything runs (:func:`runner.spec.footprint.check`)."""

    @property
    def store_path(self) -> Path:
        return self.spec.store_path()


@dataclass(frozen=True)
class Extension:
    """What :meth:`Study.extensions` says of a finished result a longer run would replace: ``how``
    its task continues it (``extends``), or why it cannot (``extends = False``: it is recomputed).
    ``keep``: the finished result is the new task's (the same inputs, only their task ids changed):
    its record is taken over and nothing runs."""

    how: str
    extends: bool = True
    keep: bool = False


def plain_key(key: Any) -> Any:
    """A task key as its record stores it (JSON: tuples as lists, anything else as text), to compare
    a planned key with a recorded one."""
    return json.loads(json.dumps(key, sort_keys=True, default=str))


class Reporter(Protocol):
    """What a running group tells the engine, and the store it writes its results to."""

    store: Store
    """The store to write to (``store.write(name, region, values)``; ``store.state_dir`` for files
    beside it). In ``apply`` it is the locked store; in a worker of a distributed executor, a handle
    attached to it (:meth:`runner.storage.store.Store.attach`)."""

    def progress(self, step: int) -> None:
        """The group reached ``step`` (of its tasks' ``steps``)."""

    def provide(self, resource: str) -> None:
        """``resource`` exists now (a checkpoint); in this process the tasks waiting for it run at
        once, before this returns; elsewhere they run when the group ends."""

    def note(self, event: str, **fields: Any) -> None:
        """Write an event of this group to the event log (:mod:`runner.storage.events`)."""

    def warn(self, message: str) -> None:
        """Show the user a warning."""


class Session(Protocol):
    """A study's run: built by :meth:`Study.open` once the store is locked."""

    layout: Layout

    def write_inputs(self, store: Store) -> None:
        """Write what does not belong to a task (input ids, word frequencies), once the arrays exist."""

    def available(self) -> set[str]:
        """Resources that already exist (checkpoints on disk)."""

    def run(self, group: list[Task], report: Reporter, shard: Any = None) -> dict[str, Any] | None:
        """Run a group of ready tasks, writing through ``report.store``; return extra fields for their
        records (``resumed_from``, ``device``, ``loop_seconds``) and, as ``event``, fields for their
        ``task_done`` event (a study's own timings). ``shard`` is given only to a study
        whose :meth:`Study.split` splits groups: one of its shards, whose results the session keeps
        beside the store for :meth:`merge` (a study that never splits may leave the parameter out)."""

    def merge(self, group: list[Task], shards: list[Any], store: Store, results: list[dict[str, Any]]) -> None:
        """Only for a study that splits groups: write into ``store`` what every shard of ``group``
        wrote; ``results`` are the shards' ``run`` results, in the order of ``shards``."""


class Study:
    name: ClassVar[str]
    description: ClassVar[str] = ""
    """One line for ``runner explain``; a subclass that sets none has its docstring."""
    replaces: ClassVar[bool] = False
    """A plugin study that takes the name of one already registered says so here (else it is refused)."""
    spec_factory: ClassVar[Callable[[], type[StudySpec]]]
    """Returns the root model of the study's specs (with the measures registered now)."""
    table_models: ClassVar[dict[str, type]] = {}
    """Spec tables by name, for ``runner explain``."""
    references: ClassVar[tuple[str, ...]] = ()
    """The papers the study reproduces (the store's ``references``, with each variable's own)."""
    figure_recipes: ClassVar[str | None] = None
    """The module that registers the study's figures (:mod:`runner.read.figures`); imported only when
    figures are drawn, so that no other command pays for matplotlib."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "description" not in cls.__dict__ and cls.__doc__:
            cls.description = " ".join(cls.__doc__.split())

    def spec_model(self) -> type[StudySpec]:
        return type(self).spec_factory()

    def tables(self) -> dict[str, type]:
        return dict(self.table_models)

    def check(self, spec: StudySpec, sf: SpecFile) -> list[str]:
        """Problems the file system shows (as ``sf.problem`` lines): missing files, bad paths."""
        return []

    def measure_view(self, spec: StudySpec) -> Any:
        """What its measures' ``problems(view)`` see of ``spec`` (:meth:`Measure.problems
        <runner.plugin.measures.Measure.problems>`): by default the spec itself; a study whose
        measures are shared with others gives a typed summary they all understand."""
        return spec

    def all_problems(self, spec: StudySpec, sf: SpecFile) -> list[str]:
        """Every measure's problems on :meth:`measure_view`, then :meth:`check`'s (files), as lines."""
        root = self.spec_model()
        found = [sf.problem(loc, message, root) for loc, message in
                 measure_problems(self.name, spec, self.measure_view(spec))]
        return found + self.check(spec, sf)

    def prepare(self, spec: StudySpec, sf: SpecFile) -> Prepared:
        raise NotImplementedError

    def describe(self, p: Prepared) -> list[str]:
        """The lines ``plan`` prints above the task list (every resolved parameter)."""
        return []

    def plan_json(self, p: Prepared) -> dict[str, Any]:
        """Study-specific fields of ``plan --json`` (e.g. the checkpoint schedule)."""
        return {}

    def open(self, p: Prepared, device: Any, say: Callable[[str], None]) -> Session:
        raise NotImplementedError

    def example_spec(self) -> dict[str, Any] | None:
        """A minimal spec of this study (its tables as a dict, one measure at least) that plans without
        reading data: what :func:`runner.plugin.checks.check_study` plans; None when the study gives none."""
        return None

    def examples(self) -> list[dict[str, Any]]:
        """Small specs a measure of this study can run on in seconds, offline, from the lightest
        (:func:`runner.run.conformance.check_runs` replaces their measures by the one it checks and takes
        the first on which it plans and applies to a network); by default :meth:`example_spec` alone."""
        example = self.example_spec()
        return [] if example is None else [example]

    def open_worker(self, p: Prepared, device: Any, store: Store) -> Session:
        """The session of a worker of a distributed executor, on the store the driver laid out and
        wrote the inputs into (:meth:`Session.write_inputs`): a study that can reads its inputs from
        there instead of drawing them again from their source. By default: :meth:`open`, then the
        session's ``attach(store, worker=True)`` where it has one (measure on that store, and look
        for what other workers saved since)."""
        session = self.open(p, device, lambda _message: None)
        attach = getattr(session, "attach", None)
        if attach is not None:
            attach(store, worker=True)
        return session

    def variables_of(self, kind: str) -> list | None:
        """The variables (:class:`runner.core.layout.Var`) measure ``kind`` writes, as a store holds them,
        laid out for a small example spec with no data read (``runner explain``); None when the study
        cannot say."""
        return None

    def split(self, p: Prepared, group: list[Task], shards: int) -> list[Any] | None:
        """``shards`` picklable descriptions of parts of ``group`` over sample ranges, which the
        session runs with ``run(group, report, shard)`` (anywhere) and combines with
        ``merge(group, shards, store, results)``; None when the group runs whole. Raises :class:`ShardError`
        when its measures cannot be split. By default nothing is split."""
        return None

    def estimate(self, p: Prepared, device: Any, precision: str | None, calibrated) -> tuple[list, list[str]]:
        """What the tasks cost on ``device``: :class:`runner.core.estimate.Unit` s (seconds, bytes) and
        notes on what is approximate, at the spec's precisions or all at ``precision``. Time a few
        steps of the real task through ``calibrated(key, measure)`` (cached per key); raise
        :class:`runner.core.estimate.NoEstimate` saying why when it cannot (the fallback: no estimate)."""
        raise NoEstimate(f"the {self.name} study does not estimate its tasks")

    def footprint(self, p: Prepared) -> dict[str, int] | None:
        """Memory a run of the spec holds at once, in bytes: ``host`` (what stays in this process's
        memory whatever the device: coordinates, one segment of results, what measures keep) and
        ``device`` (the iterated batch and weights, on the GPU when the run uses one); None when
        the study does not say. Raise :class:`runner.core.estimate.UnknownSize` when a size it
        depends on is not known yet (a model's width before its config is read): ``plan`` says
        so instead of a number."""
        return None

    def precision_validity(self, p: Prepared, device: Any) -> dict[str, str]:
        """For each precision other than the spec's that ``plan`` estimates: one line on whether the
        spec's results were found to hold in it (validated against fp32, or not); empty when the
        study says nothing."""
        return {}

    def thread_probe(self, p: Prepared, device: Any) -> Callable[[], Any] | None:
        """One step of the study's heaviest work on the model and batch at hand (a function of no
        arguments), which the thread policy (:mod:`runner.run.threads`) times at each thread count;
        None when there is none to time without downloading or building anything."""
        return None

    def extensions(self, p: Prepared, replaced: dict[str, list[str]],
                   records: dict[str, dict]) -> dict[str, Extension]:
        """Of the finished results ``p`` would replace (planned task id -> the finished ids in its
        slot), those its tasks continue instead of recomputing (a run only made longer), and for
        other lengthenings why not: task id -> :class:`Extension`. Default: none, every change
        replaces."""
        return {}

    def thread_key(self, p: Prepared) -> dict[str, Any]:
        """What the probe's timing depends on (its model, batch, precision), for the cache."""
        return {"study": self.name}


def declares(study: Study | type[Study], hook: str) -> bool:
    """Whether a study provides ``hook`` itself (``split``: its groups split into sample shards;
    ``estimate``: it estimates its cost) rather than the base class's fallback. A command-line
    flag that needs a hook is refused for a study without it (:func:`flag_problem`)."""
    cls = study if isinstance(study, type) else type(study)
    return getattr(cls, hook) is not getattr(Study, hook)


#: Command-line flags that apply only to studies providing a hook, and what the hook does.
FLAG_HOOKS = {"--shards": ("split", "split their passes into sample shards"),
              "--calibrate": ("estimate", "estimate their cost"),
              "--recalibrate": ("estimate", "estimate their cost")}


def flag_problem(study: Study, flag: str) -> str | None:
    """Why ``flag`` does not apply to a spec of ``study`` (naming the studies it applies to), or None."""
    hook, what = FLAG_HOOKS[flag]
    if declares(study, hook):
        return None
    able = sorted(name for name, cls in studies().items() if declares(cls, hook))
    return (f"{flag} applies only to studies that {what} ({', '.join(able) or 'none installed'}); "
            f"this spec is a {study.name} spec")


def register(cls: type[Study]) -> type[Study]:
    """Class decorator: make a study available to specs (one whose name is taken: only with
    ``replaces = True``)."""
    known = _STUDIES.get(cls.name)
    name = f"{cls.__module__}.{cls.__qualname__}"
    if known is not None and f"{known.__module__}.{known.__qualname__}" != name and not cls.replaces:
        raise TypeError(f"study {name}: the name {cls.name!r} is {known.__module__}.{known.__qualname__}'s; "
                        "give it another name, or set `replaces = True` on it to replace that study")
    _STUDIES[cls.name] = cls
    return cls


def studies() -> dict[str, type[Study]]:
    """Every registered study: the built-in ones and those of installed plugins."""
    load_plugins()
    return dict(_STUDIES)


def study_for(sf: SpecFile) -> Study:
    """The study a spec belongs to: ``[experiment] study``, or else the one whose tables it has.

    A study fits a spec when the spec has every table the study requires and none it does not
    know; when none fits (a misspelt table), the study that knows most of its tables is taken, so
    that its own validation names what is wrong. Two candidates: the message says to choose."""
    known = studies()
    experiment = sf.data.get("experiment")
    named = experiment.get("study") if isinstance(experiment, dict) else None
    if named is not None:
        if named not in known:
            raise SpecError(sf.path, [sf.problem(("experiment", "study"), f"unknown study {named!r}; "
                                                 f"known: {', '.join(sorted(known))}")])
        return known[named]()
    tables = set(sf.data)
    fields = {name: cls().spec_model().model_fields for name, cls in known.items()}
    fits = [name for name, f in fields.items()
            if tables <= set(f) and all(k in tables for k, v in f.items() if v.is_required())]
    if not fits:
        overlap = {name: len(tables & set(f)) for name, f in fields.items()}
        best = max(overlap.values(), default=0)
        fits = [name for name, n in overlap.items() if n == best and n > 0]
    if len(fits) == 1:
        return known[fits[0]]()
    if not fits:
        raise SpecError(sf.path, [sf.problem(("experiment",), "which study is this? Set [experiment] study to one "
                                             f"of {', '.join(sorted(known))}")])
    raise SpecError(sf.path, [sf.problem(("experiment",), f"the tables fit the studies {' and '.join(sorted(fits))}; "
                                         "set [experiment] study to say which")])
