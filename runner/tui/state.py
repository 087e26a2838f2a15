"""The monitor's model: the store's status folded from events, with display strings (no Textual here).

``RunState.build(status, now)`` takes what :func:`runner.read.status.fold_status` returns (the same fold
``runner status`` prints) and adds per-task elapsed time and ETA and the whole run's progress and ETA.
``now`` is passed in so that tests and snapshots can freeze the clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

STATES = ("pending", "running", "done", "failed", "interrupted")


def fmt_duration(seconds: float | None) -> str:
    """``1h02m``, ``3m05s``, ``12s``, ``0.4s``; ``-`` when unknown."""
    if seconds is None or seconds != seconds or seconds < 0:
        return "-"
    if seconds < 10:
        return f"{seconds:.1f}s"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def fmt_rate(rate: float | None) -> str:
    if not rate:
        return "-"
    return f"{rate:,.0f}" if rate >= 100 else f"{rate:.1f}"


@dataclass
class TaskRow:
    id: str
    network: int | None
    network_label: str
    measure: str
    kind: str
    state: str
    step: int = 0
    steps: int = 0
    steps_per_s: float | None = None
    elapsed_s: float | None = None
    eta_s: float | None = None
    error: str | None = None
    started: float | None = None
    not_applicable: str | None = None
    """Why the measure does not apply to the network (the task only records that)."""
    group: str | None = None
    """Ready tasks of one group run together (and share their recorded seconds)."""

    @property
    def fraction(self) -> float:
        if self.state == "done":
            return 1.0
        return min(1.0, self.step / self.steps) if self.steps else 0.0


@dataclass
class RunState:
    store: str
    state: str = "absent"
    device: str | None = None
    updated: float | None = None
    message: str | None = None
    tasks: list[TaskRow] = field(default_factory=list)
    fraction: float = 0.0
    eta_s: float | None = None
    elapsed_s: float | None = None
    started: float | None = None

    @property
    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in STATES}
        for t in self.tasks:
            out[t.state] = out.get(t.state, 0) + 1
        return out

    def task(self, task_id: str) -> TaskRow | None:
        return next((t for t in self.tasks if t.id == task_id), None)

    def summary_line(self) -> str:
        c = self.counts
        parts = [f"{c['done']}/{len(self.tasks)} done"]
        parts += [f"{c[s]} {s}" for s in ("running", "failed", "interrupted") if c[s]]
        return ", ".join(parts)

    @classmethod
    def build(cls, status: dict, now: float, started: float | None = None) -> "RunState":
        rows = []
        for t in status.get("tasks", []):
            steps = int(t.get("steps") or 0)
            step = int(t.get("step") or 0)
            state = t.get("state", "pending")
            state = "done" if state == "n/a" else state  # finished; the row says n/a from not_applicable
            elapsed = None
            if state == "done":
                elapsed = t.get("seconds")
            elif t.get("started") is not None:
                end = now if state == "running" else (t.get("updated") or t["started"])
                elapsed = max(0.0, end - t["started"])
            eta = None
            if state == "running" and steps and t.get("steps_per_s"):
                eta = max(0.0, (steps - step) / t["steps_per_s"])
            rows.append(TaskRow(id=t["id"], network=t.get("network"), network_label=str(t.get("network_label") or "-"),
                                measure=str(t.get("measure") or "-"), kind=str(t.get("kind") or "-"), state=state,
                                step=step, steps=steps, steps_per_s=t.get("steps_per_s") if state == "running" else None,
                                elapsed_s=elapsed, eta_s=eta, error=t.get("error"), started=t.get("started"),
                                not_applicable=t.get("not_applicable"), group=t.get("group")))
        rs = cls(store=status["store"], state=status.get("state", "unknown"), device=status.get("device"),
                 updated=status.get("updated"), message=status.get("message"), tasks=rows, started=started)
        rs._progress(now)
        return rs

    def _progress(self, now: float) -> None:
        """Whole-run progress by steps: the tasks with steps of one network and kind run as one
        (the measures of one pass over a network's steps; one training loop). The
        ETA adds the groups without steps still to run at the mean duration of those done (until
        one is done, it counts the steps only)."""
        passes: dict = {}
        stepless: dict[str, list] = {}  # group -> [all done, seconds]
        for t in self.tasks:
            if t.steps:
                key = (t.network, t.kind)
                cur = passes.get(key)
                if cur is None or t.fraction < cur.fraction:
                    passes[key] = t
            else:
                g = stepless.setdefault(t.group or t.id, [True, 0.0])
                g[0] = g[0] and t.state == "done"
                g[1] = max(g[1], t.elapsed_s or 0.0) if t.state == "done" else g[1]
        total = sum(t.steps for t in passes.values())
        done = sum(t.fraction * t.steps for t in passes.values())
        finished = [seconds for all_done, seconds in stepless.values() if all_done]
        if total:
            self.fraction = done / total
        elif self.tasks:
            self.fraction = len(finished) / max(len(stepless), 1)
        rate = next((t.steps_per_s for t in self.tasks if t.state == "running" and t.steps_per_s), None)
        groups_left = len(stepless) - len(finished)
        if self.state == "done":
            self.fraction, self.eta_s = 1.0, 0.0
        elif self.state == "running" and (rate or total == done) and (total or finished):
            steps_eta = (total - done) / rate if total > done else 0.0
            self.eta_s = steps_eta + groups_left * sum(finished) / max(len(finished), 1)
        if self.started is not None:
            self.elapsed_s = (now if self.state == "running" else (self.updated or now)) - self.started
