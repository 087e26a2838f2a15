"""The default executor: runs each group of ready tasks in this process, through the study's session.

It records finished tasks in the store (with the chunks each wrote, :mod:`runner.records`), writes progress events, drives the progress bars, and
keeps going when one group fails (its dependents stay pending). Stops (Ctrl-C, SIGTERM) and store
write errors end the whole run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from runner import interrupt
from runner.events import EventLog
from runner.progress import ProgressView
from runner.provenance import now
from runner.records import attribute, forget_written, read_written
from runner.store import Store, StoreWriteError
from runner.study import Prepared, Session


class LocalExecutor:
    def __init__(self, p: Prepared, session: Session, store: Store, events: EventLog, view: ProgressView, device,
                 options=None):
        self.p, self.session, self.store, self.events, self.view, self.device = p, session, store, events, view, device
        self.options = options
        self.ran: list[str] = []
        self.failed: dict[str, str] = {}
        self._nested: list[float] = []
        """Per group running now (outermost first): seconds of the groups run inside it (a task that
        provides resources while it runs lets the tasks that need them run meanwhile)."""

    def schedule(self, scheduler) -> list:
        """Run everything the scheduler hands out, one group at a time; return the tasks left pending."""
        return scheduler.run(self)

    def close(self) -> None:
        pass

    def run(self, group: list, provide: Callable[[str], None]) -> set[str]:
        interrupt.check()
        bar = self.started(group)
        report = _Reporter(self, [t.id for t in group], group[0].network, max(t.steps for t in group), bar, provide)
        t0 = time.monotonic()
        self._nested.append(0.0)
        try:
            shards = self.split(group)
            with self.store.journal([t.id for t in group]):  # the chunks it writes go into its records
                if shards is None:
                    extra = self.session.run(group, report) or {}
                else:  # one after the other here (an executor with workers runs them at once)
                    extra = [self.session.run(group, report, shard) or {} for shard in shards][0]
                    self.session.merge(group, shards, self.store)
        except (KeyboardInterrupt, StoreWriteError):
            raise
        except Exception as err:  # one group failing must not stop the others
            self.failed_group(group, f"{type(err).__name__}: {err}", bar)
            return set()
        finally:
            inside = self._nested.pop()
            took = time.monotonic() - t0
            if self._nested:
                self._nested[-1] += took
        return self.succeeded(group, took - inside, extra, bar)  # its own time, not theirs

    def split(self, group: list) -> list | None:
        """The sample shards of ``group`` (``--shards``), or None to run it whole."""
        shards = self.options.shards if self.options is not None else 1
        return self.p.study.split(self.p, group, shards) if shards > 1 else None

    def started(self, group: list):
        """Announce a group (event, progress bar); returns its bar (None for a task without steps)."""
        lead = group[0]
        steps = max(t.steps for t in group)
        what = lead.name if len(group) == 1 else f"{len(group)} measures"
        bar = self.view.add(f"{self.p.labels[lead.network]} ({what})", steps) if steps else None
        self.events.emit("task_started", task=[t.id for t in group], network=lead.network, total_steps=steps)
        return bar

    def failed_group(self, group: list, msg: str, bar) -> None:
        ids = [t.id for t in group]
        self.failed.update({i: msg for i in ids})
        self.events.emit("task_failed", task=ids, network=group[0].network, error=msg)
        if bar is not None:
            self.view.fail(bar, msg)
        else:
            self.view.warn(f"{self.p.labels[group[0].network]} {group[0].label} failed: {msg}")

    def succeeded(self, group: list, seconds: float, extra: dict, bar) -> set[str]:
        """Record a finished group in the store (the one writer of completion records) and say so."""
        ids = [t.id for t in group]
        steps = max(t.steps for t in group)
        chunks = attribute(group, read_written(self.store.state_dir, ids),
                           {v.name: v.measure for v in self.session.layout.vars.values()})
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
        self.events.emit("task_done", task=ids, network=group[0].network, **fields)
        return set(ids)

    def _record(self, t, seconds: float, extra: dict) -> dict:
        return {"measure": t.measure, "label": t.label, "network": t.network, "network_label": self.p.labels[t.network],
                "kind": t.kind, "checkpoint": t.checkpoint, "seconds": round(seconds, 3),
                "resumed_from": extra.get("resumed_from", 0), "device": str(extra.get("device", self.device)),
                "finished_utc": now(), "key": t.key}


class _Reporter:
    def __init__(self, ex: LocalExecutor, ids: list[str], network: int, steps: int, bar, provide):
        self.ex, self.ids, self.network, self.steps, self.bar, self._provide = ex, ids, network, steps, bar, provide
        self.store = ex.store
        self._last_emit = 0.0

    def progress(self, step: int) -> None:
        if self.bar is not None:
            self.ex.view.update(self.bar, step)
        t = time.monotonic()
        if t - self._last_emit > 1.0:
            self._last_emit = t
            self.ex.events.emit("progress", task=self.ids, network=self.network, step=step, total_steps=self.steps,
                                steps_per_s=self.ex.view.rate(self.bar) if self.bar is not None else None)

    def provide(self, resource: str) -> None:
        self._provide(resource)

    def note(self, event: str, **fields: Any) -> None:
        self.ex.events.emit(event, task=self.ids, network=self.network, **fields)

    def warn(self, message: str) -> None:
        self.ex.view.warn(message)
