"""What a plan costs: device time and disk, from a short calibration of each study's step.

A study that :class:`Estimates` its own tasks (:meth:`Estimates.estimate`) times a few steps of
the work its tasks do, on this device, at a given precision, and scales them to the tasks' steps
and batch. Each calibration is cached (``$TRANSIENT_CACHE/calibration/``) under a key of what its
time depends on (device, model, precision, batch shape, ...), so a second ``plan`` costs nothing.
The engine adds the other precisions the device supports, and records the estimate when ``apply``
starts (an ``estimate`` event) so that ``show`` can set it against the measured time. Each whole
estimate is cached too (beside them, by device and spec hash): a run that started
before anything was calibrated is set against the estimate of a later ``plan --calibrate``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.filesize import decimal

from runner.core.commandline import program
from runner.core.plan import task_id

#: The precisions a spec can ask for (a study's ``precision`` key).
PRECISIONS = ("fp64", "fp32", "tf32", "bf16")


class NoEstimate(Exception):
    """Why a plan has no estimate (a model that is not cached, nothing calibrated yet, ...)."""


class UnknownSize(Exception):
    """Why a study cannot say the memory a run holds yet (raised by
    :meth:`Footprints.footprint`): a network's width is unknown until its model's
    config is read. ``plan`` says so rather than a size without it."""



class Estimates(ABC):
    """A study capability (:mod:`runner.plugin.study`): it estimates its tasks' cost (``plan``, ``--calibrate``)."""

    @abstractmethod
    def estimate(self, p, device, precision: str | None, calibrated) -> tuple[list, list[str]]:
        """What the tasks cost on ``device``: :class:`Unit` s (seconds, bytes) and notes on what is
        approximate, at the spec's precisions or all at ``precision``. Time a few steps of the real
        task through ``calibrated(key, measure)`` (cached per key); raise :class:`NoEstimate` saying
        why when it cannot (the fallback: no estimate)."""


class Footprints(ABC):
    """A study capability: it says the memory a run of a spec holds at once."""

    @abstractmethod
    def footprint(self, p) -> dict[str, int] | None:
        """In bytes: ``host`` (what stays in this process's memory whatever the device: coordinates, one
        segment of results, what measures keep) and ``device`` (the iterated batch and weights, on the
        GPU when the run uses one); None when it cannot say. Raise :class:`UnknownSize` when a size it
        depends on is not known yet (a model's width before its config is read): ``plan`` says so."""


class ValidatesPrecisions(ABC):
    """A study capability: it says whether its results were found to hold in other precisions."""

    @abstractmethod
    def precision_validity(self, p, device) -> dict[str, str]:
        """For each precision other than the spec's that ``plan`` estimates: one line on whether the
        spec's results were found to hold in it (validated against fp32, or not)."""

@dataclass
class Unit:
    """Tasks estimated together: what one label of the plan costs."""

    label: str
    runs: list[list[str]]
    """Task ids, grouped as they run (one pass of a network's measures is one run)."""
    seconds: float
    nbytes: int = 0
    """What its tasks write to disk."""
    lower_bound: bool = False
    """Some of its work is not timed (``seconds`` is at least what it takes)."""

    @property
    def tasks(self) -> list[str]:
        return [t for run in self.runs for t in run]


@dataclass
class Estimate:
    device: str
    units: list[Unit] = field(default_factory=list)
    others: dict[str, float | str] = field(default_factory=dict)
    """Total seconds of the same spec at each other precision (or why there is none)."""
    notes: list[str] = field(default_factory=list)
    """What is approximate."""
    missing: str | None = None
    """Why there is no estimate (then ``units`` is empty)."""
    memory: dict[str, int] | None = None
    """Bytes a run holds at once (:meth:`Footprints.footprint`), when the study says."""
    memory_unknown: str | None = None
    """Why the memory is not known yet (:class:`UnknownSize`): what ``plan`` says instead of a size."""
    validity: dict[str, str] = field(default_factory=dict)
    """What is known of the spec's results in each other precision (:meth:`ValidatesPrecisions.precision_validity`)."""

    @property
    def seconds(self) -> float:
        return sum(u.seconds for u in self.units)

    @property
    def nbytes(self) -> int:
        return sum(u.nbytes for u in self.units)

    def to_json(self) -> dict[str, Any]:
        memory = {"memory": self.memory} if self.memory else {}
        memory.update({"memory_unknown": self.memory_unknown} if self.memory_unknown else {})
        memory.update({"precision_validity": self.validity} if self.validity else {})
        if self.missing:
            return {"device": self.device, "missing": self.missing, **memory}
        return {"device": self.device, "seconds": round(self.seconds, 3), "device_hours": self.seconds / 3600,
                "bytes": self.nbytes, "units": [{**asdict(u), "seconds": round(u.seconds, 3)} for u in self.units],
                "other_precisions": self.others, "notes": self.notes, **memory}


def precisions(device) -> dict[str, str | None]:
    """Each precision on ``device``: None when it runs as itself, else why it is not its own
    (on the CPU tf32 is fp32: TensorFloat-32 is a CUDA matmul mode)."""
    import torch  # lazy: torch

    if device.type != "cuda":
        return {"fp64": None, "fp32": None, "tf32": "= fp32 on the CPU", "bf16": None}
    bf16 = None if torch.cuda.is_bf16_supported() else "not supported by this GPU"
    return {"fp64": None, "fp32": None, "tf32": None, "bf16": bf16}


def device_key(device) -> str:
    """The device as calibrations are cached: the GPU's name (whatever its index), or the CPU with
    its thread count."""
    from runner.core.device import describe  # lazy: pydantic

    return describe(device).split(" ", 1)[1] if device.type == "cuda" else describe(device)


#: Seconds ``plan`` may spend timing steps for a spec's estimate; past that it says "no estimate"
#: and how to get one (``plan --calibrate`` times without a limit, and later plans read the cache).
BUDGET_S = 5.0


def estimate(p, device=None, *, calibrate: bool = True, refresh: bool = False, others: bool = True,
             budget: float | None = BUDGET_S, calibrated: Calibrator | None = None) -> Estimate:
    """The cost of a prepared spec on ``device`` (default: the one it asks for): its study's
    estimate at the spec's precisions, and the totals at every other precision the device has.
    ``calibrate=False`` uses cached calibrations only; ``refresh`` calibrates again; calibrating
    stops after ``budget`` seconds in all (None: no limit). ``calibrated``: a calibrator to share
    (its own settings then hold)."""
    from runner.core.device import describe, device_unavailable, pick_device  # lazy: pydantic

    if device is None:
        problem = device_unavailable(p.device)
        if problem:
            return Estimate(p.device, missing=problem)
        device = pick_device(p.device)
    est = Estimate(describe(device))
    try:  # a plan is never refused for want of these figures
        est.memory = p.study.footprint(p) if isinstance(p.study, Footprints) else None
    except UnknownSize as why:
        est.memory_unknown = str(why)
    except Exception:
        pass
    with contextlib.suppress(Exception):
        est.validity = p.study.precision_validity(p, device) if isinstance(p.study, ValidatesPrecisions) else {}
    if p.unmet:
        est.missing = "requirements not met here"
        return est
    if not isinstance(p.study, Estimates):
        est.missing = f"the {p.study.name} study does not estimate its tasks"
        return est
    calibrated = calibrated or Calibrator(calibrate, refresh, budget=budget)
    try:
        est.units, est.notes = p.study.estimate(p, device, None, calibrated)
    except Exception as why:  # a plan is never refused for want of an estimate
        est.missing = _why(why)
        return est
    remember(est, p.spec.sha256(), calibrated.directory)
    if others:
        for precision, why in precisions(device).items():
            if why is not None:
                est.others[precision] = why
                continue
            try:
                units, _ = p.study.estimate(p, device, precision, calibrated)
                est.others[precision] = round(sum(u.seconds for u in units), 3)
            except Exception as err:
                est.others[precision] = _why(err)
    return est


def _remembered(device: str, spec_sha256: str, directory: Path | None = None) -> tuple[dict, Path]:
    """The key of a whole estimate and its file, beside the calibrations and in their format."""
    key = {"what": "estimate", "device": device, "spec_sha256": spec_sha256}
    return key, Calibrator(directory=directory, uncached="-").path(key)


def remember(est: Estimate, spec_sha256: str, directory: Path | None = None) -> None:
    """Cache a whole estimate of the spec of hash ``spec_sha256`` on ``est.device`` (for
    :func:`remembered`); a cache that cannot be written is no error."""
    key, path = _remembered(est.device, spec_sha256, directory)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"key": key, "result": est.to_json(), "utc": time.time()}, default=str))
        os.replace(tmp, path)


def remembered(device: str, spec_sha256: str, directory: Path | None = None) -> dict | None:
    """The last estimate (its JSON) of the spec of hash ``spec_sha256`` on ``device`` that any plan
    or apply computed from calibrations, or None: what ``show`` sets a run against when none was
    calibrated as it started (reads a file; times and imports nothing)."""
    key, path = _remembered(device, spec_sha256, directory)
    try:
        cached = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    est = cached.get("result") if isinstance(cached, dict) and cached.get("key") == key else None
    return est if isinstance(est, dict) and not est.get("missing") else None


def _why(err: Exception) -> str:
    return str(err) if isinstance(err, NoEstimate) else f"the estimate failed: {type(err).__name__}: {err}"


class Calibrator:
    """Cached calibrations: ``calibrator(key, measure)`` returns the cached result for ``key`` or,
    when allowed, runs ``measure()`` (a JSON-able dict) and caches it (else ``uncached`` says why not)."""

    def __init__(self, calibrate: bool = True, refresh: bool = False, directory: Path | None = None,
                 budget: float | None = None, uncached: str | None = None):
        self.calibrate, self.refresh = calibrate, refresh
        self.uncached = uncached or f"not calibrated on this device yet (`{program()} plan` calibrates)"
        self.directory = directory
        self.budget, self.spent = budget, 0.0
        self._now: dict[Path, dict] = {}  # measured by this calibrator (``refresh`` measures a key once)

    def path(self, key: dict) -> Path:
        from models.registry import cache_dir  # lazy: pydantic

        return (self.directory or cache_dir() / "calibration") / f"{task_id(key)}.json"

    def __call__(self, key: dict, measure: Callable[[], dict]) -> dict:
        path = self.path(key)
        if path in self._now:
            return self._now[path]
        if not self.refresh and path.is_file():
            try:
                cached = json.loads(path.read_text())
                if cached.get("key") == json.loads(json.dumps(key, default=str)):
                    return cached["result"]
            except (OSError, ValueError, AttributeError):
                pass  # unreadable: calibrate again
        if not self.calibrate:
            raise NoEstimate(self.uncached)
        left = None if self.budget is None else self.budget - self.spent
        if left is not None and left <= 0:
            raise self._over()
        t0 = time.monotonic()
        try:
            with time_limit(left):
                result = measure()
        except TimeLimit:
            raise self._over() from None
        finally:
            self.spent += time.monotonic() - t0
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"key": key, "result": result, "utc": time.time()}, default=str))
        os.replace(tmp, path)
        self._now[path] = result
        return result


    def _over(self) -> NoEstimate:
        return NoEstimate(f"timing its steps takes more than {self.budget:g} s here; `{program()} plan --calibrate "
                          "SPEC` times them without a limit, once: later plans read the cached times")


class TimeLimit(BaseException):
    """Raised inside a calibration that ran past its :func:`time_limit` (a BaseException: no
    ``except Exception`` in the timed code swallows it)."""


@contextlib.contextmanager
def time_limit(seconds: float | None):
    """Raise :class:`TimeLimit` in the code inside after ``seconds`` (None: no limit). A timer
    signal, so only in the main thread (elsewhere no limit); the signal is handled between
    Python bytecodes, so a single long kernel finishes first."""
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise TimeLimit

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 1e-3))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class Enough(Exception):
    """Raised by :class:`StepTimer` to end a calibration run."""


class StepTimer:
    """A reporter for a calibration run of a study's real task: times each step after ``warmup``
    (on CUDA synchronising around it) and stops the run, by raising :class:`Enough`, once it has
    timed ``min_steps`` and ``budget_s`` seconds, or ``max_steps``.

    A step's time is the mean of the timed steps without those over 3x their median: a process
    of another user preempting this one is not the step's cost (steps that do more, such as a
    renormalisation every few steps, stay well under that)."""

    def __init__(self, device, warmup: int = 2, min_steps: int = 5, max_steps: int = 200, budget_s: float = 0.5):
        self.device, self.warmup, self.min_steps, self.max_steps, self.budget_s = (
            device, warmup, min_steps, max_steps, budget_s)
        self.t_start = self._now()
        self.t_first: float | None = None  # when step 1 ended
        self.t_last: float | None = None
        self.durations: list[float] = []
        self.store = None

    def start(self) -> None:
        """Time the setup from now."""
        self.t_start = self._now()

    def _now(self) -> float:
        if self.device.type == "cuda":
            import torch  # lazy: torch

            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def progress(self, step: int) -> None:
        now = self._now()
        if step == 1:
            self.t_first = now
        if step > self.warmup and self.t_last is not None:
            self.durations.append(now - self.t_last)
        self.t_last = now
        if len(self.durations) >= self.min_steps and (sum(self.durations) >= self.budget_s
                                                     or len(self.durations) >= self.max_steps):
            raise Enough

    def result(self) -> dict:
        """``step_s`` (seconds per step) and ``setup_s`` (before the first step: building the model)."""
        if not self.durations:
            raise NoEstimate("the calibration run ended before its warm-up was over")
        kept = step_seconds(self.durations)
        setup_s = max((self.t_first or self.t_start) - self.t_start - kept, 0.0)
        return {"step_s": kept, "setup_s": setup_s, "steps_timed": len(self.durations)}

    def provide(self, resource: str) -> None: ...
    def note(self, event: str, **fields: Any) -> None: ...
    def warn(self, message: str) -> None: ...


def step_seconds(durations: list[float]) -> float:
    """The mean step time, without steps over 3x the median (another process ran meanwhile)."""
    median = statistics.median(durations)
    kept = [d for d in durations if d <= 3 * median]
    return sum(kept) / len(kept)


def duration(seconds: float) -> str:
    """``42 s``, ``3.5 min``, ``10.7 h``."""
    if seconds < 120:
        return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def render(est: Estimate, state: dict[str, str] | None = None) -> list[str]:
    """The lines ``plan`` prints (``state``: the plan's task states, for what is left to run)."""
    memory = [f"memory     unknown until {est.memory_unknown}"] if est.memory_unknown else []
    if est.memory:
        host, device = est.memory["host"], est.memory["device"]
        memory = [f"memory     about {decimal(host + device)} at once" if est.device.startswith("cpu") else
                  f"memory     about {decimal(host)} on the host, {decimal(device)} on {est.device}"]
    if est.missing:
        return [f"estimate   no estimate ({est.missing})"] + memory
    lines = [f"estimate   on {est.device}: device time, from a few timed steps of each task, and disk"]
    for u in est.units:
        lines.append(f"  {u.label:<28} {_at_least(u.lower_bound) + duration(u.seconds):>10}  {decimal(u.nbytes):>10}")
    lines.append(f"  {'total':<28} {_at_least(any(u.lower_bound for u in est.units)) + duration(est.seconds):>10}  {decimal(est.nbytes):>10}"
                 f"  ({est.seconds / 3600:.3g} device-hours)")
    if state and any(v == "done" for v in state.values()):
        left = sum(u.seconds for u in est.units if any(state.get(t) != "done" for t in u.tasks))
        lines.append(f"  {'still to run':<28} {duration(left):>10}")
    for other, value in est.others.items():
        if isinstance(value, str):
            shown = value if value.startswith("=") else f"no estimate ({value})"
        else:
            shown = f"{duration(value):>10}  {'':>10}  ({value / 3600:.3g} device-hours)"
        lines.append(f"  {'all in ' + other:<28} {shown}")
        if other in est.validity:
            lines.append(f"  {'':<28} {est.validity[other]}")
    lines += [f"  approximate: {n}" for n in est.notes]
    return lines + memory


def _at_least(lower_bound: bool) -> str:
    return ">= " if lower_bound else ""


def render_points(ests: list[Estimate], names: list[str]) -> list[str]:
    """The lines ``plan`` prints for a sweep: each point's total and the sweep's."""
    missing = next((e.missing for e in ests if e.missing), None)
    if missing:
        return [f"estimate   no estimate ({missing})"]
    lines = [f"estimate   on {ests[0].device}: device time, from a few timed steps of each task, and disk"]
    lines += [f"  {name:<28} {duration(e.seconds):>10}  {decimal(e.nbytes):>10}" for name, e in zip(names, ests)]
    seconds = sum(e.seconds for e in ests)
    lines.append(f"  {'total':<28} {duration(seconds):>10}  {decimal(sum(e.nbytes for e in ests)):>10}"
                 f"  ({seconds / 3600:.3g} device-hours)")
    for other in ests[0].others:
        values = [e.others.get(other) for e in ests]
        if all(isinstance(v, float) for v in values):
            lines.append(f"  {'all in ' + other:<28} {duration(sum(values)):>10}  {'':>10}  "
                         f"({sum(values) / 3600:.3g} device-hours)")
    lines += [f"  approximate: {n}" for n in ests[0].notes]
    return lines


def measured(est: dict, records: dict[str, dict]) -> list[tuple[str, float, float | None]]:
    """(label, predicted s, measured s or None) per unit of a recorded estimate (its JSON), from
    the tasks' completion records (the tasks of one run share its seconds; each group's seconds are
    its own, without the groups that ran inside it while it provided resources)."""
    out = []
    for u in est.get("units", []):
        if not u["runs"]:
            continue
        seconds, complete = 0.0, True
        for run in u["runs"]:
            done = [records[t]["seconds"] for t in run if t in records and records[t].get("seconds") is not None]
            if len(done) < len(run) or any(records[t].get("resumed_from") for t in run):
                complete = False
            seconds += max(done, default=0.0)
        out.append((u["label"], u["seconds"], seconds if complete else None))
    return out
