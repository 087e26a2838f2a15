"""runner.core.processes: a lock's holder named by host, pid and start time (real processes, no mocks)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from runner.core import processes


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])


def test_a_holder_is_gone_once_its_process_ends_and_a_reused_pid_is_not_it():
    proc = _sleeper()
    try:
        started = processes.start_time(proc.pid)
        holder = {"host": socket.gethostname(), "pid": proc.pid, "started": started}
        assert started is not None and processes.alive(proc.pid, started)
        assert not processes.gone_here(holder)
        assert processes.gone_here({**holder, "started": started - 60})  # same pid, another process
    finally:
        proc.kill()
        proc.wait()
    assert processes.start_time(proc.pid) is None and not processes.alive(proc.pid, started)
    assert processes.gone_here(holder)
    assert processes.gone_here({k: v for k, v in holder.items() if k != "started"})  # an older holder: pid only


def test_a_holder_on_another_host_is_never_taken_for_gone_here():
    assert not processes.gone_here({"host": f"not-{socket.gethostname()}", "pid": 2**22 + 7, "started": 1.0})
    me = processes.me()
    assert me["host"] == socket.gethostname() and me["pid"] == os.getpid() and processes.alive(os.getpid(), me["started"])
    child = _sleeper()
    try:  # started after this process, and before now
        assert me["started"] <= processes.start_time(child.pid) <= time.time() + 1
    finally:
        child.kill()
        child.wait()


def test_status_tells_a_dead_run_here_from_a_run_on_another_host(tmp_path):
    from runner.read.status import fold_status

    proc = _sleeper()
    proc.kill()
    proc.wait()
    task = {"id": "t", "network": 0, "network_label": "lm", "measure": "m", "kind": "iterate", "steps": 10}

    def state(host: str) -> str:
        writer = {"pid": proc.pid, "host": host, "started": 1.0}
        events = [{"ts": 1.0, "event": "run_started", "run": "r", "tasks": [task], **writer},
                  {"ts": 2.0, "event": "task_started", "run": "r", "task": ["t"], "pid": proc.pid}]
        return fold_status(tmp_path, events, {})["state"]

    assert state(socket.gethostname()) == "interrupted"  # its writer is gone from this machine
    assert state("another-host") == "running"  # a store on S3 written elsewhere: not said to be dead
