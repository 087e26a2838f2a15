"""How many CPU threads torch uses: the runner chooses, the user can override.

torch's default is one intra-op thread per core, which on a shared machine oversubscribes the cores
other jobs hold: OpenMP's barriers then wait for descheduled threads, and a 2-core machine with one
busy core ran the quickstart's tiny model 7x slower with 2 threads than with 1. The policy:

1. an explicit count (``runner apply --threads N``, ``[experiment] threads``, or ``OMP_NUM_THREADS``
   set by the user) is used as given;
2. otherwise the candidates are 1 thread, the CPUs that are idle now (the CPUs this process may
   use, by affinity and cgroup quota, less the runnable threads of other processes) and all usable
   CPUs; a study that can time one step of its work (:meth:`runner.plugin.study.TimesThreads.thread_probe`)
   times each candidate on the model and batch at hand and the fastest wins; without a probe the
   idle count is used. Timings are cached beside the estimate's calibrations, under a key that
   includes the idle count, so a busy machine and a quiet one each measure once.

OpenMP keeps its default waits (a short spin, then sleep): measured on the quickstart with 2 idle
cores, passive waits (``OMP_WAIT_POLICY=PASSIVE``) made 2 threads 18% slower, and on a busy
machine the policy runs no more threads than there are idle CPUs (unless timing shows more pay),
so that nothing spins on a core another job needs.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from runner.core.estimate import NoEstimate

#: Seconds of timing per candidate (at least two steps each, after one untimed warm-up step).
PROBE_S = 0.3
#: The most threads a run may be told to use (``--threads``, the API's ``threads``, as ``[experiment]
#: threads``): beyond it thread creation fails mid-run, after the store was opened.
MAX_THREADS = 4096


def threads_problem(requested: int | None, source: str = "--threads") -> str | None:
    """Why ``requested`` threads cannot be asked for (``source`` names the flag or argument), or None."""
    if requested is None or 1 <= requested <= MAX_THREADS:
        return None
    return f"{source}: give a number from 1 to {MAX_THREADS}, not {requested}"


@dataclass(frozen=True)
class ThreadChoice:
    threads: int
    usable: int
    """CPUs this process may use (affinity, cgroup quota)."""
    busy: int
    """Runnable threads of other processes seen when choosing."""
    why: str
    """How the count was chosen, for ``plan``, ``show`` and the store's provenance."""

    def describe(self) -> str:
        return f"{self.threads} CPU thread{'s' * (self.threads != 1)} ({self.why})"

    def to_json(self) -> dict:
        return asdict(self)


def usable_cpus(cgroup: Path = Path("/sys/fs/cgroup")) -> int:
    """CPUs this process may run on: its affinity mask, capped by a cgroup CPU quota (v2 ``cpu.max``
    or v1 ``cpu.cfs_quota_us``), rounded up."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    quota = _cgroup_quota(cgroup)
    return max(1, min(n, math.ceil(quota)) if quota else n)


def _cgroup_quota(root: Path) -> float | None:
    try:
        fields = (root / "cpu.max").read_text().split()
        if fields and fields[0] != "max":
            return int(fields[0]) / int(fields[1])
    except (OSError, ValueError, IndexError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return quota / period if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None


def other_runnable(samples: int = 5, loadavg: Path = Path("/proc/loadavg"), own: Path = Path("/proc/self/task")) -> int:
    """Runnable threads of other processes, now: the median of a few readings of the kernel's count
    of runnable threads (``/proc/loadavg``'s fourth field), less this process's own running
    threads (the reader included). 0 where the kernel does not say."""
    seen = []
    for i in range(samples):
        try:
            running = int(loadavg.read_text().split()[3].split("/")[0])
        except (OSError, ValueError, IndexError):
            return 0
        seen.append(max(0, running - max(1, _running_threads(own))))
        if i < samples - 1:
            time.sleep(0.01)
    return sorted(seen)[len(seen) // 2]


def _running_threads(tasks: Path) -> int:
    """This process's threads in state R (running or runnable)."""
    n = 0
    try:
        for stat in tasks.glob("*/stat"):
            try:
                n += stat.read_text().rsplit(")", 1)[1].split()[0] == "R"
            except (OSError, IndexError):
                continue
    except OSError:
        return 1
    return n


def requested_by_environment() -> int | None:
    """``OMP_NUM_THREADS`` when the user set it to a single count."""
    try:
        n = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        return None
    return n if n >= 1 else None


def choose(requested: int | None = None, source: str = "--threads", *, probe: Callable[[], Callable[[], object] | None]
           | None = None, key: dict | None = None, calibrated=None, usable: int | None = None,
           busy: int | None = None) -> ThreadChoice:
    """The thread count to use. ``probe()`` returns a function running one step of the work (or
    None when it cannot); ``calibrated`` (a :class:`runner.core.estimate.Calibrator`) caches its timings
    under ``key``. ``usable`` and ``busy`` default to what this machine says now."""
    usable = usable or usable_cpus()
    if requested:
        return ThreadChoice(requested, usable, 0, f"{source} {requested}")
    env = requested_by_environment()
    if env:
        return ThreadChoice(env, usable, 0, f"OMP_NUM_THREADS={env}")
    if usable == 1:
        return ThreadChoice(1, usable, 0, "one usable CPU")
    busy = other_runnable() if busy is None else busy
    idle = max(1, usable - busy)
    candidates = sorted({1, idle, usable})
    load = f"{usable} usable CPUs, {busy} runnable thread{'s' * (busy != 1)} of other processes"
    if probe is None:
        return ThreadChoice(idle, usable, busy, f"{load}: the idle ones")

    def measure() -> dict:
        step = probe()
        if step is None:  # nothing to time yet (its model is built or downloaded by the first apply)
            raise NoEstimate("nothing to time yet")
        return {str(n): rate for n, rate in time_candidates(step, candidates).items()}

    try:
        key = {"what": "threads", **(key or {}), "usable": usable, "idle": idle}
        rates = calibrated(key, measure) if calibrated is not None else measure()
    except Exception as err:  # a run is never refused for want of a timing
        why = "not timed" if isinstance(err, NoEstimate) else f"timing failed: {type(err).__name__}"
        return ThreadChoice(idle, usable, busy, f"{load}: the idle ones ({why})")
    if not rates:
        return ThreadChoice(idle, usable, busy, f"{load}: the idle ones")
    best = max(rates, key=lambda n: (rates[n], -int(n)))
    timed = ", ".join(f"{n}: {rates[n]:.0f}" if rates[n] >= 10 else f"{n}: {rates[n]:.2g}" for n in sorted(rates, key=int))
    return ThreadChoice(int(best), usable, busy, f"{load}; steps/s by thread count {timed}")


def time_candidates(step: Callable[[], object], candidates: list[int], seconds: float = PROBE_S) -> dict[int, float]:
    """Steps per second of ``step`` at each thread count: two interleaved rounds (so that a change
    of load hits every candidate), the best of each; one step each when a step is slow."""
    import torch  # lazy: torch

    before = torch.get_num_threads()
    rates: dict[int, float] = {}
    try:
        t0 = time.perf_counter()
        step()  # warm-up: first-call allocations and kernel selection
        slow = time.perf_counter() - t0 > seconds
        for _ in range(1 if slow else 2):
            for n in candidates:
                torch.set_num_threads(n)
                steps, t0 = 0, time.perf_counter()
                while steps < (1 if slow else 2) or time.perf_counter() - t0 < seconds / 2:
                    step()
                    steps += 1
                rates[n] = max(rates.get(n, 0.0), steps / (time.perf_counter() - t0))
    finally:
        torch.set_num_threads(before)
    return rates


def for_run(p, device, requested: int | None = None, calibrated=None) -> ThreadChoice:
    """The choice for a prepared spec on ``device``: ``requested`` (``--threads``), else the spec's
    ``[experiment] threads``, else the policy, timing the study's probe on the CPU."""
    if requested:
        return choose(requested, "--threads")
    if p.spec.experiment.threads:
        return choose(p.spec.experiment.threads, "[experiment] threads =")
    if device.type != "cpu":  # GPU steps are asynchronous: host threads only feed them
        return choose()
    from runner.plugin.study import TimesThreads  # lazy: numpy, pydantic

    if not isinstance(p.study, TimesThreads):
        return choose(probe=lambda: None, key={"study": p.study.name}, calibrated=calibrated)
    return choose(probe=lambda: p.study.thread_probe(p, device), key=p.study.thread_key(p), calibrated=calibrated)


def use(choice: ThreadChoice) -> None:
    import torch  # lazy: torch

    torch.set_num_threads(choice.threads)

