"""A process as a lock names its holder: host, pid and start time, so that a reused pid is never
taken for the holder. The S3 lock (:mod:`runner.storage.bucket_lock`), the workers' lease
(:mod:`runner.run.execute.lease`) and the Ray reaper (:mod:`runner.run.execute.reaper`) share it. It imports
psutil only, so that the reaper starts in a fraction of a second."""

from __future__ import annotations

import os
import socket

import psutil


def start_time(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch), or None if it is gone."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def alive(pid: int, started: float) -> bool:
    """The process ``pid`` runs and is the one that started at ``started`` (not a reused pid)."""
    now = start_time(pid)
    return now is not None and abs(now - started) < 0.01


def me() -> dict:
    """This process as a holder: ``{"host", "pid", "started"}``."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "started": start_time(os.getpid())}


def gone_here(holder: dict) -> bool:
    """The holder ran on this host and its process is gone (exact and immediate). False for a holder
    on another host, or one that names no pid or start time: only its lease's age says it is gone."""
    pid, started = holder.get("pid"), holder.get("started")
    if holder.get("host") != socket.gethostname() or not isinstance(pid, int):
        return False
    return not alive(pid, started) if isinstance(started, (int, float)) else start_time(pid) is None
