"""The bookkeeping of ``apply``, whatever executor runs the tasks: one recorder per run.

For each group the scheduler hands out it makes the :class:`~runner.run.execute.executor.Job` (the
group's sample shards with ``--shards``, a reporter that moves its progress bar, writes its events
and lets the scheduler run what waits for a resource it provides), announces it, and when the job
ends:

- merges its shards' results into the store (the session's ``merge``, given every shard's result);
- writes the completion records of its tasks (the one writer), with the chunks it wrote (the
  store's journal, :mod:`runner.storage.records`) and its seconds;
- writes ``task_done`` or ``task_failed``, the notes and warnings of a run elsewhere, and moves the
  progress view; a failed job fails only its tasks (their dependents stay pending).

A group's recorded seconds are its own: the groups run inside it while it provides resources
(measures between training steps) are not counted in it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runner.storage.events import EventLog
from runner.run.execute.executor import Done, Job, error_text, fatal
from runner.core.plan import Task
from runner.core.progress import ProgressView
from runner.storage.store import now
from runner.storage.manifest import ALGORITHM, chunk_digests
from runner.storage.records import attribute, forget_written, read_written
from runner.storage.store import Store
from runner.plugin.study import Prepared, Session, split_group


@dataclass(eq=False)
class _Running:
    bar: Any
    t0: float
    inside: float = 0.0
    """Seconds of the groups run inside this one (nested in its ``provide``)."""


class Recorder:
    def __init__(self, p: Prepared, session: Session, store: Store, events: EventLog, view: ProgressView, device,
                 shards: int = 1, before: dict[str, float] | None = None):
        self.p, self.session, self.store, self.events, self.view, self.device = p, session, store, events, view, device
        self.shards = shards
        self.before = before or {}
        """Task id -> seconds the finished result it extends took (kept in its record as ``seconds_before``)."""
        self.ran: list[str] = []
        self.failed: dict[str, str] = {}
        self._running: dict[Job, _Running] = {}

    def start(self, group: list[Task], provide: Callable[[str], None]) -> Job:
        """The job of ``group``, announced (event, progress bar) and timed from now."""
        lead = group[0]
        steps = max(t.steps for t in group)
        what = lead.name if len(group) == 1 else f"{len(group)} measures"
        bar = self.view.add(f"{self.p.labels[lead.network]} ({what})", steps) if steps else None
        parts = split_group(self.p, group, self.shards) if self.shards > 1 else None
        running = _Running(bar, 0.0)
        job = Job(group, parts, _Reporter(self, group, running, provide), self.session, self.store)
        self._running[job] = running
        self.events.emit("task_started", task=job.ids, network=lead.network, total_steps=steps)
        running.t0 = time.monotonic()
        return job

    def finish(self, done: Done) -> set[str]:
        """Take a job that ended (merge its shards, record it, say so); the ids that succeeded."""
        job = done.job
        running = self._running.pop(job)
        for event, fields in done.notes:
            self.events.emit(event, task=job.ids, network=job.group[0].network, **fields)
        for message in done.warnings:
            self.view.warn(message)
        error = done.error
        if error is None and job.parts is not None:
            error = self._merge(job, done.results)
        seconds = time.monotonic() - running.t0 - running.inside  # its own time, not theirs
        if error is not None:
            self._failed(job, error, running.bar)
            return set()
        return self._succeeded(job, seconds, combine(done.results), running.bar)

    def _merge(self, job: Job, results: list[dict]) -> str | None:
        try:
            with self.store.journal(job.ids):
                self.session.merge(job.group, job.parts, self.store, results)
        except BaseException as err:
            if fatal(err) or not isinstance(err, Exception):
                raise
            return error_text(err)
        return None

    def _failed(self, job: Job, msg: str, bar) -> None:
        group = job.group
        self.failed.update({i: msg for i in job.ids})
        self.events.emit("task_failed", task=job.ids, network=group[0].network, error=msg)
        if bar is not None:
            self.view.fail(bar, msg)
        else:
            self.view.warn(f"{self.p.labels[group[0].network]} {group[0].label} failed: {msg}")

    def _succeeded(self, job: Job, seconds: float, extra: dict, bar) -> set[str]:
        """Record a finished group in the store (the one writer of completion records) and say so."""
        group, ids = job.group, job.ids
        steps = max(t.steps for t in group)
        written = read_written(self.store.state_dir, ids)
        chunks = with_digests(self.store.root, attribute(group, written,
                                                         {v.name: v.measure for v in self.session.layout.vars.values()}))
        self.store.record_many({t.id: {**self._record(t, seconds, extra), "chunks": chunks[t.id]} for t in group})
        forget_written(self.store.state_dir, ids)
        self.ran += ids
        self.view.finished(seconds, steps)
        if bar is not None:
            self.view.done(bar)
        fields: dict[str, Any] = {"seconds": round(seconds, 3)}
        if "resumed_from" in extra:
            fields["resumed_from"] = extra["resumed_from"]
        if extra.get("loop_seconds") and steps:
            fields["steps_per_s"] = round((steps - extra.get("resumed_from", 0)) / max(extra["loop_seconds"], 1e-9), 3)
        fields.update(extra.get("event", {}))  # what the task adds to its event (a study's own timings)
        self.events.emit("task_done", task=ids, network=group[0].network, **fields)
        return set(ids)

    def _record(self, t: Task, seconds: float, extra: dict) -> dict:
        return {"measure": t.measure, "label": t.label, "network": t.network, "network_label": self.p.labels[t.network],
                "kind": t.kind, "checkpoint": t.checkpoint, "seconds": round(seconds, 3),
                "resumed_from": extra.get("resumed_from", 0), "device": str(extra.get("device", self.device)),
                "finished_utc": now(), "key": t.key,
                **({"seconds_before": self.before[t.id]} if t.id in self.before else {})}


def with_digests(path, chunks: dict[str, dict]) -> dict[str, dict]:
    """Each task's chunks (:func:`runner.storage.records.attribute`) with the digest of each chunk file
    as it is now (``blake2b``: key -> digest, :mod:`runner.storage.manifest`), each file read once."""
    wanted: dict[str, set[str]] = {}
    for entries in chunks.values():
        for name, entry in entries.items():
            wanted.setdefault(name, set()).update(entry["keys"])
    digests = {name: chunk_digests(path / name, sorted(keys)) for name, keys in wanted.items()}
    return {tid: {name: {**entry, ALGORITHM: {k: digests[name][k] for k in entry["keys"] if digests[name][k]}}
                  for name, entry in entries.items()} for tid, entries in chunks.items()}


def combine(results: list[dict]) -> dict:
    """The record fields of a group from the results of its parts (one, or one per shard): the
    first's, but resumed from the earliest point any part resumed from and with the loop seconds of
    all parts together."""
    if not results:
        return {}
    out = dict(results[0])
    if len(results) > 1:
        if any("resumed_from" in r for r in results):
            out["resumed_from"] = min(r.get("resumed_from", 0) for r in results)
        if any("loop_seconds" in r for r in results):
            out["loop_seconds"] = sum(r.get("loop_seconds", 0.0) for r in results)
    return out


class _Reporter:
    """What a group run in this process tells the engine: progress (bar, events), notes, warnings,
    and the resources it provides (the scheduler runs what waits for them at once, timed apart)."""

    def __init__(self, rec: Recorder, group: list[Task], running: _Running, provide: Callable[[str], None]):
        self.rec, self.running, self._provide = rec, running, provide
        self.ids, self.network = [t.id for t in group], group[0].network
        self.steps = max(t.steps for t in group)
        self.store = rec.store
        self._last_emit = 0.0

    def progress(self, step: int) -> None:
        bar = self.running.bar
        if bar is not None:
            self.rec.view.update(bar, step)
        t = time.monotonic()
        if t - self._last_emit > 1.0:
            self._last_emit = t
            self.rec.events.emit("progress", task=self.ids, network=self.network, step=step, total_steps=self.steps,
                                 steps_per_s=self.rec.view.rate(bar) if bar is not None else None)

    def provide(self, resource: str) -> None:
        t0 = time.monotonic()
        try:
            self._provide(resource)
        finally:
            self.running.inside += time.monotonic() - t0

    def note(self, event: str, **fields: Any) -> None:
        self.rec.events.emit(event, task=self.ids, network=self.network, **fields)

    def warn(self, message: str) -> None:
        self.rec.view.warn(message)
