"""Studies: the plugins that turn a spec into tasks and run them. The engine knows none by name.

A study subclasses :class:`Study` and is registered with :func:`register`; the engine finds the
studies through :mod:`runner.plugin.loader` and names none. Every study provides the core:

- ``name``, and its spec: ``spec_factory`` (the root model, its tables with the papers' defaults;
  the ``[[measure]]`` entries are the study's registered measures, :mod:`runner.plugin.measures`)
  and ``table_models`` for ``explain``; a spec names its study in ``[experiment] study``, or the
  study is inferred from its tables;
- ``prepare``: the resolved spec as a :class:`Prepared` (tasks with ids and dependencies, the
  requirements this machine does not meet, the memory and disk the run needs) without building
  models or reading data;
- ``open``: a :class:`Session` for a run, which builds what the tasks need and runs them.

Anything more is a capability the study declares by subclassing it (``class MyStudy(Study,
Describes, Shards)``) and implementing all of its members; :func:`register` refuses a study that
declares one and lacks a member, or has a member of one it does not declare. The engine asks
``isinstance(study, Shards)``, never for a method by name. The capabilities: :class:`ChecksFiles`,
:class:`ViewsMeasures`, :class:`Describes`, :class:`PlanFields`, :class:`HasExamples`,
:class:`Explains`, :class:`WorkerSessions`, :class:`Shards`, :class:`TimesThreads`,
:class:`Extends`, :class:`DrawsFigures`, and the estimator's own (:class:`runner.core.estimate.Estimates`,
:class:`~runner.core.estimate.Footprints`, :class:`~runner.core.estimate.ValidatesPrecisions`).
The functions below the classes are what the engine calls: each asks for the capability and
says what a study without it does.

Variables carry their own plotting and summary hints (:func:`runner.plugin.measures.hints`), so ``show``,
``status`` and the monitor read any store without the study's code.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from models.registry_base import Registry
from runner.core import errors
from runner.core.errors import UsageError
from runner.core.estimate import Estimates, Footprints, ValidatesPrecisions
from runner.core.layout import Layout
from runner.core.plan import Task
from runner.plugin.loader import load_plugins
from runner.plugin.measures import measure_problems
from runner.spec.footprint import Need
from runner.spec.specfile import SpecError, SpecFile, StudySpec

if TYPE_CHECKING:  # pragma: no cover
    from runner.storage.store import Store

_STUDIES: dict[str, type[Study]] = {}
_REGISTRY: Registry[type[Study]] = Registry("study", _STUDIES)

S = TypeVar("S")


class ShardError(UsageError):
    """A group of tasks that cannot be split into sample shards; the message says which measure and why."""


class SourceUnavailable(errors.Unavailable):
    """A model, tokenizer or data set that cannot be loaded now; the message says which and why."""


@dataclass
class Prepared(Generic[S]):
    """A validated spec resolved into tasks, before anything runs; ``S``: the type of the study's ``state``."""

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
    state: S | None = None
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
    """What :meth:`Extends.extensions` says of a finished result a longer run would replace: ``how``
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
        ``task_done`` event (a study's own timings). ``shard`` is given only to a :class:`Shards`
        study: one of its shards, whose results the session keeps beside the store for
        :meth:`ShardedSession.merge` (a study that never splits may leave the parameter out)."""


class ShardedSession(Session, Protocol):
    """The session of a :class:`Shards` study."""

    def merge(self, group: list[Task], shards: list[Any], store: Store, results: list[dict[str, Any]]) -> None:
        """Write into ``store`` what every shard of ``group`` wrote; ``results`` are the shards' ``run``
        results, in the order of ``shards``."""


class Study(ABC):
    """The core every study has (see the module docstring); capabilities are mixed in."""

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

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "description" not in cls.__dict__ and cls.__doc__:
            cls.description = " ".join(cls.__doc__.split())

    def spec_model(self) -> type[StudySpec]:
        return type(self).spec_factory()

    def tables(self) -> dict[str, type]:
        return dict(self.table_models)

    @abstractmethod
    def prepare(self, spec: StudySpec, sf: SpecFile) -> Prepared:
        """The spec resolved into tasks (:class:`Prepared`), without building models or reading data."""

    @abstractmethod
    def open(self, p: Prepared, device: Any, say: Callable[[str], None]) -> Session:
        """The session of a run of ``p`` on ``device`` (the store is locked); ``say`` shows progress lines."""


#: The core's members a study must give itself (the class attributes without a default).
REQUIRED = ("name", "spec_factory")


class ChecksFiles(ABC):
    """A study whose specs name files: it checks them before any compute."""

    @abstractmethod
    def check(self, spec: StudySpec, sf: SpecFile) -> list[str]:
        """Problems the file system shows (as ``sf.problem`` lines): missing files, bad paths."""


class ViewsMeasures(ABC):
    """A study whose measures see a typed summary of the spec rather than the spec itself (measures
    shared with other studies all understand it)."""

    @abstractmethod
    def measure_view(self, spec: StudySpec) -> Any:
        """What its measures' ``problems(view)`` see of ``spec`` (:meth:`runner.plugin.measures.Measure.problems`)."""


class Describes(ABC):
    """A study that says more in ``plan`` than its task list."""

    @abstractmethod
    def describe(self, p: Prepared) -> list[str]:
        """The lines ``plan`` prints above the task list (every resolved parameter)."""


class PlanFields(ABC):
    """A study with fields of its own in ``plan --json``."""

    @abstractmethod
    def plan_json(self, p: Prepared) -> dict[str, Any]:
        """Study-specific fields of ``plan --json`` (e.g. the checkpoint schedule)."""


class HasExamples(ABC):
    """A study that gives small specs of itself (the conformance checks plan and run them)."""

    @abstractmethod
    def example_spec(self) -> dict[str, Any]:
        """A minimal spec of this study (its tables as a dict, one measure at least) that plans without
        reading data: what :func:`runner.plugin.checks.check_study` plans."""

    def examples(self) -> list[dict[str, Any]]:
        """Small specs a measure of this study can run on in seconds, offline, from the lightest
        (:func:`runner.run.conformance.check_runs` replaces their measures by the one it checks and takes
        the first on which it plans and applies to a network); :meth:`example_spec` unless overridden."""
        return [self.example_spec()]


class Explains(ABC):
    """A study that lays out a measure's variables for ``runner explain``."""

    @abstractmethod
    def variables_of(self, kind: str) -> list | None:
        """The variables (:class:`runner.core.layout.Var`) measure ``kind`` writes, as a store holds them,
        laid out for a small example spec with no data read; None when this measure needs data to say."""


class WorkerSessions(ABC):
    """A study whose session in a worker of a distributed executor reads what the driver wrote."""

    @abstractmethod
    def open_worker(self, p: Prepared, device: Any, store: Store) -> Session:
        """The session of a worker, on the store the driver laid out and wrote the inputs into
        (:meth:`Session.write_inputs`): it reads its inputs from there instead of drawing them again."""


class Shards(ABC):
    """A study whose groups split into sample shards (``--shards``); its sessions are :class:`ShardedSession` s."""

    @abstractmethod
    def split(self, p: Prepared, group: list[Task], shards: int) -> list[Any] | None:
        """``shards`` picklable descriptions of parts of ``group`` over sample ranges, which the
        session runs with ``run(group, report, shard)`` (anywhere) and combines with
        ``merge(group, shards, store, results)``; None when the group runs whole. Raises
        :class:`ShardError` when its measures cannot be split."""


class TimesThreads(ABC):
    """A study that can time one step of its heaviest work, for the thread policy (:mod:`runner.run.threads`)."""

    @abstractmethod
    def thread_probe(self, p: Prepared, device: Any) -> Callable[[], Any] | None:
        """One step of the study's heaviest work on the model and batch at hand (a function of no
        arguments), timed at each thread count; None when there is none to time without downloading
        or building anything."""

    @abstractmethod
    def thread_key(self, p: Prepared) -> dict[str, Any]:
        """What the probe's timing depends on (its model, batch, precision), for the cache."""


class Extends(ABC):
    """A study whose finished results a longer run continues instead of recomputing."""

    @abstractmethod
    def extensions(self, p: Prepared, replaced: dict[str, list[str]],
                   records: dict[str, dict]) -> dict[str, Extension]:
        """Of the finished results ``p`` would replace (planned task id -> the finished ids in its
        slot), those its tasks continue instead of recomputing (a run only made longer), and for
        other lengthenings why not: task id -> :class:`Extension`."""


class DrawsFigures(ABC):
    """A study with figures of its own (``runner figures``)."""

    figure_recipes: ClassVar[str]
    """The module that registers them (:mod:`runner.read.figures`); imported only when figures are
    drawn, so that no other command pays for matplotlib."""


#: Every capability a study may declare, and the members each asks of it.
CAPABILITIES: dict[type, tuple[str, ...]] = {
    ChecksFiles: ("check",), ViewsMeasures: ("measure_view",), Describes: ("describe",),
    PlanFields: ("plan_json",), HasExamples: ("example_spec", "examples"), Explains: ("variables_of",),
    WorkerSessions: ("open_worker",), Shards: ("split",), TimesThreads: ("thread_probe", "thread_key"),
    Extends: ("extensions",), DrawsFigures: ("figure_recipes",), Estimates: ("estimate",),
    Footprints: ("footprint",), ValidatesPrecisions: ("precision_validity",),
}


def contract_problems(cls: type) -> list[str]:
    """What ``cls`` lacks of the core and of the capabilities it declares, and the members it has of
    capabilities it does not declare (which the engine would never call)."""
    own = [k for k in cls.__mro__ if k is not object and k is not Study and k not in CAPABILITIES]
    defined = {name for k in own for name in vars(k)}
    out = [f"it gives no `{name}`" for name in REQUIRED if not any(name in vars(k) for k in cls.__mro__)]
    out += [f"it does not implement {name}()" for name in ("prepare", "open") if name in cls.__abstractmethods__]
    for capability, members in CAPABILITIES.items():
        label = capability.__name__
        if issubclass(cls, capability):
            missing = [m for m in members if m in cls.__abstractmethods__ or m not in defined | set(vars(capability))]
            out += [f"it declares {label} but does not implement {', '.join(missing)}"] if missing else []
        elif stray := sorted(defined & set(members)):
            out.append(f"it has {', '.join(stray)} but does not declare {label} (subclass "
                       f"{capability.__module__}.{label} so that the engine uses it)")
    return out


def register(cls: type[Study]) -> type[Study]:
    """Class decorator: make a study available to specs (one whose name is taken: only with
    ``replaces = True``). A class that breaks the contract is refused (TypeError naming it and what)."""
    name = f"{cls.__module__}.{cls.__qualname__}"
    problems = contract_problems(cls) if issubclass(cls, Study) else ["it does not subclass runner.plugin.study.Study"]
    if problems:
        raise TypeError(f"study {name}: " + "; ".join(problems))
    try:
        return _REGISTRY.add(cls.name, cls, replaces=cls.replaces)
    except ValueError as err:
        raise TypeError(f"study {name}: {err}") from None


def studies() -> dict[str, type[Study]]:
    """Every registered study: the built-in ones and those of installed plugins."""
    load_plugins()
    return dict(_STUDIES)


# ---------------------------------------------------------------- what the engine calls

def spec_problems(study: Study, spec: StudySpec, sf: SpecFile) -> list[str]:
    """Every measure's problems on the study's view of ``spec`` (:class:`ViewsMeasures`; else the spec),
    then its files' (:class:`ChecksFiles`), as lines."""
    view = study.measure_view(spec) if isinstance(study, ViewsMeasures) else spec
    found = [sf.problem(loc, message, study.spec_model()) for loc, message in measure_problems(study.name, spec, view)]
    return found + (study.check(spec, sf) if isinstance(study, ChecksFiles) else [])


def plan_lines(p: Prepared) -> list[str]:
    """The lines ``plan`` prints above the task list (none for a study that does not :class:`Describes`)."""
    return p.study.describe(p) if isinstance(p.study, Describes) else []


def plan_fields(p: Prepared) -> dict[str, Any]:
    """The study's own fields of ``plan --json`` (:class:`PlanFields`)."""
    return p.study.plan_json(p) if isinstance(p.study, PlanFields) else {}


def example_specs(study: Study) -> list[dict[str, Any]]:
    """The study's small specs, lightest first (:class:`HasExamples`); none for one without."""
    return study.examples() if isinstance(study, HasExamples) else []


def study_variables(study: Study, kind: str) -> list | None:
    """The variables measure ``kind`` writes, laid out by the study (:class:`Explains`); None when it cannot say."""
    return study.variables_of(kind) if isinstance(study, Explains) else None


def worker_session(p: Prepared, device: Any, store: Store) -> Session:
    """The session of a worker of a distributed executor (:class:`WorkerSessions`; else the study's
    :meth:`Study.open`, which draws its inputs again)."""
    if isinstance(p.study, WorkerSessions):
        return p.study.open_worker(p, device, store)
    return p.study.open(p, device, lambda _message: None)


def split_group(p: Prepared, group: list[Task], shards: int) -> list[Any] | None:
    """The sample shards of ``group`` (:class:`Shards`); None when it runs whole."""
    return p.study.split(p, group, shards) if isinstance(p.study, Shards) else None


def extensions_of(p: Prepared, replaced: dict[str, list[str]], records: dict[str, dict]) -> dict[str, Extension]:
    """Which replaced results ``p``'s tasks continue (:class:`Extends`); none: every change replaces."""
    return p.study.extensions(p, replaced, records) if isinstance(p.study, Extends) else {}


def figure_modules() -> list[str]:
    """The modules of every registered study's figure recipes (:class:`DrawsFigures`)."""
    return [cls.figure_recipes for cls in studies().values() if issubclass(cls, DrawsFigures)]


#: Command-line flags that apply only to studies with a capability, and what the capability does.
FLAG_CAPABILITIES: dict[str, tuple[type, str]] = {
    "--shards": (Shards, "split their passes into sample shards"),
    "--calibrate": (Estimates, "estimate their cost"),
    "--recalibrate": (Estimates, "estimate their cost")}


def flag_problem(study: Study, flag: str) -> str | None:
    """Why ``flag`` does not apply to a spec of ``study`` (naming the studies it applies to), or None."""
    capability, what = FLAG_CAPABILITIES[flag]
    if isinstance(study, capability):
        return None
    able = sorted(name for name, cls in studies().items() if issubclass(cls, capability))
    return (f"{flag} applies only to studies that {what} ({', '.join(able) or 'none installed'}); "
            f"this spec is a {study.name} spec")


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
            raise SpecError(sf.path, [sf.problem(("experiment", "study"), _REGISTRY.unknown(named))])
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
