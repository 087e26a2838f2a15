"""Stops a local Ray cluster once the driver that started it is gone (``kill -9`` included).

``python reaper.py DRIVER_PID DRIVER_START_TIME SESSION_DIR``, started by the driver in a session
of its own (:func:`runner.run.execute.ray_cluster.start_reaper`): it polls the driver every 0.1 s and,
when it is gone, kills every process of the cluster with SIGKILL (Ray's agents ignore SIGTERM).
Which processes: the driver's descendants, as last seen (the snapshot is refreshed every second
while the driver lives: ``gcs_server``, ``raylet`` and the monitors are the driver's children, the
agents and workers the raylet's; when the driver dies, Ray stops some of them itself but not the
agents, which are then nobody's children), and the processes whose command line names the
cluster's Ray session folder, with their descendants. It imports psutil and :mod:`runner.core.processes`
only, so that it starts in a fraction of a second.
"""

from __future__ import annotations

import os
import sys
import time

import psutil

from runner.core.processes import alive

POLL_SECONDS = 0.1
SNAPSHOT_SECONDS = 1.0


def _same(pid: int, started: float) -> psutil.Process | None:
    return psutil.Process(pid) if alive(pid, started) else None


def descendants(pid: int) -> dict[int, float]:
    """``{pid: start time}`` of the descendants of process ``pid`` (but this one)."""
    out = {}
    try:
        for child in psutil.Process(pid).children(recursive=True):
            try:
                if child.pid != os.getpid():
                    out[child.pid] = child.create_time()
            except psutil.Error:
                continue
    except psutil.Error:
        pass
    return out


def cluster_processes(session_dir: str, known: dict[int, float] | None = None) -> list[psutil.Process]:
    """The processes of the cluster whose session folder is ``session_dir``, and those of ``known``
    (``{pid: start time}``) still running, with their descendants; descendants first."""
    roots = [proc for pid, started in (known or {}).items() if (proc := _same(pid, started)) is not None]
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if proc.pid != os.getpid() and any(session_dir in part for part in proc.info["cmdline"] or ()):
                roots.append(proc)
        except psutil.Error:
            continue
    found: dict[int, psutil.Process] = {}
    for root in roots:
        try:
            for child in root.children(recursive=True):
                if child.pid != os.getpid():
                    found.setdefault(child.pid, child)
        except psutil.Error:
            pass
    for root in roots:
        found.setdefault(root.pid, root)
    return list(found.values())


def stop_cluster(session_dir: str, known: dict[int, float] | None = None) -> int:
    """Kill every process of the cluster (SIGKILL: a cluster without its driver has nothing to
    save); the number killed."""
    procs = cluster_processes(session_dir, known)
    for proc in procs:
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=5)
    return len(procs)


def main(argv: list[str]) -> None:
    pid, started, session_dir = int(argv[0]), float(argv[1]), argv[2]
    known: dict[int, float] = {}
    seen = 0.0
    while alive(pid, started):
        if time.monotonic() - seen > SNAPSHOT_SECONDS:
            known.update(descendants(pid))
            seen = time.monotonic()
        time.sleep(POLL_SECONDS)
    stop_cluster(session_dir, known)


if __name__ == "__main__":
    main(sys.argv[1:])
