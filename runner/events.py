"""Progress events: one JSON object per line in ``<store>.runner/events.jsonl``.

``apply`` is the only writer (it holds the store's lock); ``status`` and the monitor read the file
from another process, tracking a byte offset and ignoring a trailing partial line.

Event kinds and their fields (besides ``ts``, ``event``, ``run``):

- ``run_started``: ``spec``, ``spec_sha256``, ``device``, ``tasks`` (list of {id, network, measure, kind, steps, state})
- ``task_started``: ``task`` (list of ids run together), ``network``, ``start_step``, ``total_steps``
- ``progress``: ``task``, ``step``, ``total_steps``, ``steps_per_s``
- ``task_done``: ``task``, ``seconds``
- ``task_failed``: ``task``, ``error``
- ``nonfinite``: ``network``, ``samples`` (count diverged so far)
- ``run_finished``: ``status`` (done | interrupted | failed), ``seconds``
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator


class EventLog:
    """Appends events; flushes every line so a reader in another process sees it at once."""

    def __init__(self, path: Path):
        self.path = path
        self.run = uuid.uuid4().hex[:8]
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "a", encoding="utf-8")

    def emit(self, event: str, **fields: Any) -> None:
        record = {"ts": time.time(), "event": event, "run": self.run, "pid": os.getpid(), **fields}
        self._file.write(json.dumps(record, default=str) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


@dataclass
class EventReader:
    """Reads the events appended since the last call (complete lines only)."""

    path: Path
    offset: int = 0
    _partial: bytes = field(default=b"", repr=False)

    def read_new(self) -> list[dict]:
        if not self.path.exists():
            return []
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            chunk = f.read()
        self.offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        return [json.loads(line) for line in lines if line.strip()]


def read_events(path: Path) -> Iterator[dict]:
    yield from EventReader(path).read_new()
