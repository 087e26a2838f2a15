"""Completion records: one JSON file per finished task, in the runner's folder beside the store.

``<store>.runner/records/<task id>.json`` says that a task finished and what it was: its measure,
label, network, checkpoint, the resolved values its id hashes (``key``, for ``plan`` to name what
changed), seconds, device and time. Each file is written whole or not at all, and writing one
costs the same however many exist. A record belongs to one store (``store_id``): records of a
store that was removed and made again are not taken for the new one's. A finished task is known
only from its record, never inferred from the data.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

RECORDS = "records"


def records_dir(state_dir: Path) -> Path:
    return Path(state_dir) / RECORDS


def read_records(state_dir: Path, store_id: str | None) -> dict[str, dict]:
    """The records of the store ``store_id`` (none when the store has no id: it does not exist)."""
    folder = records_dir(state_dir)
    if store_id is None or not folder.is_dir():
        return {}
    out = {}
    for entry in os.scandir(folder):
        if not entry.name.endswith(".json") or entry.name.startswith("."):
            continue
        try:
            rec = json.loads(Path(entry.path).read_bytes())
        except (OSError, ValueError):  # removed meanwhile, or not ours: a record is written whole
            continue
        if isinstance(rec, dict) and rec.get("store_id") == store_id:
            out[entry.name[:-5]] = rec
    return out


def write_records(state_dir: Path, store_id: str, records: dict[str, dict]) -> None:
    from runner.store import atomic_write_bytes

    for task_id, rec in records.items():
        atomic_write_bytes(records_dir(state_dir) / f"{task_id}.json",
                           json.dumps({**rec, "store_id": store_id}, sort_keys=True, default=str).encode())


def drop_records(state_dir: Path, task_ids: list[str]) -> None:
    from runner.store import writing

    folder = records_dir(state_dir)
    with writing(folder):
        for task_id in task_ids:
            (folder / f"{task_id}.json").unlink(missing_ok=True)
