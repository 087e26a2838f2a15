"""The Ray cluster of an ``apply``: the one it joins (``--address``), answered or refused in
seconds, and the local one it starts, which never outlives it.

- :func:`check_address`: before anything is loaded, a TCP connection to the address's host and
  port (5 s at most); nothing answering is :class:`ClusterUnreachable` (exit 66) naming the
  address, instead of Ray's minutes of retries.
- A local cluster (no ``--address``) is started as the driver's child processes. Ray does not
  stop all of them when the driver is killed (``kill -9``: its agents live on, and the docs
  measured ``gcs_server``, ``raylet`` and a worker that went on writing 22 s later). So the driver
  starts a reaper (:mod:`runner.run.execute.reaper`, a process of its own) that stops the cluster as
  soon as the driver is gone, and writes the cluster's identity (its Ray session folder, the
  driver's pid and start time, the cluster's processes then) into
  ``<store>.runner/ray_cluster.json``; an ``apply`` that takes the store's lock stops what that
  file names if the reaper could not (:func:`stop_leftover`). A cluster joined with ``--address``
  is the user's: it is never stopped.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from runner.core import processes
from runner.core.errors import Unavailable
from runner.run.execute.reaper import descendants, stop_cluster
from runner.storage.location import Location, location, write_atomic

CLUSTER_FILE = "ray_cluster.json"
CONNECT_SECONDS = 5.0
RAY_CLIENT_PORT = 10001


class ClusterUnreachable(Unavailable):
    """``--address`` names a Ray cluster that does not answer (66)."""


def host_and_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of ``ray://host:port`` (port 10001 when left out) or ``host:port``; None for
    the addresses Ray resolves itself (``auto``, ``local``). :class:`ClusterUnreachable` when it is
    neither."""
    if address in ("auto", "local"):
        return None
    rest = address.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    if not sep and address.startswith("ray://"):
        host, port = rest, str(RAY_CLIENT_PORT)
    host = host.strip("[]")  # [::1]:6379
    if not host or not port.isdigit() or "/" in rest:
        raise ClusterUnreachable(f"--address {address!r}: give HOST:PORT (the head's GCS port, 6379 by default), "
                                 "ray://HOST:PORT (the Ray client's, 10001) or auto")
    return host, int(port)


def check_address(address: str | None, timeout: float = CONNECT_SECONDS) -> None:
    """Refuse, within ``timeout`` seconds, an address where nothing accepts a connection."""
    target = host_and_port(address) if address else None
    if target is None:
        return
    try:
        socket.create_connection(target, timeout=timeout).close()
    except OSError as err:
        why = "timed out" if isinstance(err, TimeoutError) else (err.strerror or str(err))
        raise ClusterUnreachable(f"--address {address}: no Ray cluster answers there ({why}); start one "
                                 "(`ray start --head`) or give the head's address") from None


# --- a local cluster and its end


def note_cluster(state_dir: Location, session_dir: str) -> None:
    """Say in ``state_dir`` which local cluster this driver started (for :func:`stop_leftover`)."""
    me = processes.me()
    info = {"session_dir": session_dir, "driver_pid": me["pid"], "driver_started": me["started"],
            "host": me["host"], "processes": descendants(me["pid"])}
    write_atomic(location(state_dir) / CLUSTER_FILE, (json.dumps(info) + "\n").encode())


def forget_cluster(state_dir: Location) -> None:
    (location(state_dir) / CLUSTER_FILE).unlink(missing_ok=True)


def stop_leftover(state_dir: Location) -> int:
    """Stop the local cluster an earlier ``apply`` of this store started, if its driver is gone and
    the cluster is still there (called under the store's lock); the number of processes stopped."""
    path = location(state_dir) / CLUSTER_FILE
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):
        return 0

    if info.get("host") != socket.gethostname() or processes.alive(info["driver_pid"], info["driver_started"]):
        return 0  # another machine's cluster, or its driver still runs (then it holds the lock: not here)
    stopped = stop_cluster(info["session_dir"], {int(pid): t for pid, t in info.get("processes", {}).items()})
    path.unlink(missing_ok=True)
    return stopped


def start_reaper(session_dir: str) -> subprocess.Popen:
    """The process that stops the cluster of ``session_dir`` once this process is gone, whatever
    ends it. Run by file path: it imports psutil and runner.core.processes only."""
    me = processes.me()
    script = Path(__file__).resolve().with_name("reaper.py")
    root = str(script.parents[3])  # the project, where runner.core.processes is found, installed or not
    return subprocess.Popen([sys.executable, str(script), str(me["pid"]), repr(me["started"]), session_dir],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, close_fds=True, env={**os.environ, "PYTHONPATH": root})
