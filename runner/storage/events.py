"""Progress events: one JSON object per line in ``<store>.runner/events.jsonl``.

``apply`` is the only writer (it holds the store's lock); ``status`` and the monitor read the file
from another process, tracking a byte offset and ignoring a trailing partial line.

Event kinds and their fields (besides ``ts``, ``event``, ``run``, ``pid``; the first two also
``host`` and ``started``, the writer's start time):

- ``run_started``: ``spec``, ``spec_sha256``, ``device``, ``tasks`` (list of {id, network, measure, kind, steps, state}),
  ``estimate`` (the plan's, from cached calibrations: ``runner.core.estimate.Estimate.to_json``, ``device``,
  ``seconds``, ``bytes``, ``units`` of {label, runs, seconds, nbytes, lower_bound}, or ``missing``: why none)
- ``task_started``: ``task`` (list of ids run together), ``network``, ``start_step``, ``total_steps``
- ``progress``: ``task``, ``step``, ``total_steps``, ``steps_per_s``
- ``task_done``: ``task``, ``seconds``
- ``task_failed``: ``task``, ``error``
- ``run_preparing``: ``spec``, ``store``, ``stage`` (written as soon as the store is locked, before
  inputs are drawn and models built, so a monitor sees the run from its first second)
- ``nonfinite``: ``task``, ``network``, ``samples`` (count diverged so far), ``first_step``, ``step``
- ``checkpoint`` (training): ``task``, ``network``, ``checkpoint``, ``step``, ``path``
- ``run_finished``: ``status`` (done | interrupted | failed), ``seconds``

A crash can leave a torn last line: the writer starts a new line before its first event, and
readers skip any line that is not a whole JSON object.

On object storage (:mod:`runner.storage.location`), where an object cannot be appended to, the log is one
object that the writer rewrites whole, at most once a second, from a thread of its own (closing
writes the rest); a reader fetches only the bytes past its offset (a ranged
GET).
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from runner.core import processes
from runner.storage.objects import Remote

UPLOAD_SECONDS = 1.0
WRITER_EVENTS = ("run_preparing", "run_started")
"""Events that also name their writer's ``host`` and ``started`` (:func:`runner.core.processes.me`)."""


class EventLog:
    """Appends events; flushes every line so a reader in another process sees it at once."""

    def __init__(self, path: Path | Remote):
        self.path = path
        self.run = uuid.uuid4().hex[:8]
        self._fd: int | None = None
        if isinstance(path, Remote):
            self._remote = RemoteLog(path)
            return
        self._remote = None
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        size = os.fstat(self._fd).st_size
        if size:
            with open(path, "rb") as f:
                f.seek(size - 1)
                torn = f.read(1) != b"\n"
            if torn:  # the last writer died mid-line: end that line so ours stays whole
                self._write(b"\n")

    def emit(self, event: str, **fields: Any) -> None:
        """Append one event as one line (one write call). Progress is not worth a run: if the log
        cannot be written (disk full), the run goes on without it."""
        record = {"ts": time.time(), "event": event, "run": self.run, "pid": os.getpid(), **fields}
        if event in WRITER_EVENTS:  # who writes: status tells a live run from a dead one by it
            record.update(processes.me())
        line = (json.dumps(record, default=str) + "\n").encode()
        if self._remote is not None:
            self._remote.append(line)
            return
        self._write(line)

    def _write(self, data: bytes) -> None:
        if self._fd is None:
            return
        try:
            os.write(self._fd, data)
        except OSError:
            self.close()

    def close(self) -> None:
        if self._remote is not None:
            self._remote.close()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class RemoteLog:
    """The event log as one object on object storage, rewritten whole (see the module docstring)."""

    def __init__(self, path: Remote):
        self.path = path
        try:
            self.data = bytearray(path.read_bytes())
        except FileNotFoundError:  # a first run (any other failure is raised: the log is never lost)
            self.data = bytearray()
        if self.data and not self.data.endswith(b"\n"):
            self.data += b"\n"
        self.dirty = False
        self._lock, self._upload = threading.Lock(), threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._later, name="event-log", daemon=True)
        self._thread.start()

    def append(self, line: bytes) -> None:
        """Add ``line``; the thread uploads it within :data:`UPLOAD_SECONDS` (never the caller's thread)."""
        with self._lock:
            self.data += line
            self.dirty = True

    def _later(self) -> None:
        while not self._stop.wait(UPLOAD_SECONDS):
            self.flush()

    def flush(self) -> None:
        with self._upload:  # one upload at a time, each of a longer log than the one before
            with self._lock:
                if not self.dirty:
                    return
                data, self.dirty = bytes(self.data), False
            try:
                self.path.write_bytes(data)
            except Exception:  # noqa: BLE001 - progress is not worth a run: the next flush tries again
                with self._lock:
                    self.dirty = True

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.flush()


@dataclass
class EventReader:
    """Reads the events appended since the last call (complete lines only)."""

    path: Path | Remote
    offset: int = 0
    _partial: bytes = field(default=b"", repr=False)

    def read_new(self) -> list[dict]:
        if isinstance(self.path, Remote):
            try:
                size = self.path.fs.size(self.path.key)
                chunk = self.path.fs.cat_file(self.path.key, start=self.offset) if size > self.offset else b""
            except FileNotFoundError:
                return []
        elif not self.path.exists():
            return []
        else:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        self.offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        return [e for e in map(_parse, lines) if e is not None]


def _parse(line: bytes) -> dict | None:
    """An event, or None for a blank, torn or foreign line."""
    if not line.strip():
        return None
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) and "event" in event else None


def read_events(path: Path) -> Iterator[dict]:
    yield from EventReader(path).read_new()
