"""``runner`` commands in real child processes forked from a warm interpreter: the suite's launcher.

A fresh ``python -m runner.cli`` spends seconds of CPU importing torch, xarray and zarr before it
reads its arguments, and the suite runs hundreds of commands. The launcher starts one server per
test process, which imports those libraries (never the runner, whose modules may read the
environment when imported) and then forks one child per command. The child takes the command's
working directory, environment (``OMP_NUM_THREADS``, ``PYTHONPATH``, the test hooks), standard
streams and arguments, and runs ``runner.cli.main`` as ``python -m runner.cli`` does, exit handlers
included. It is a real process with its own pid: exit codes, pipes, signals and ``kill -9`` behave
as for :mod:`subprocess`, which :class:`Launched` mimics (``poll``, ``wait``, ``communicate``,
``send_signal``). ``TRANSIENT_TEST_FRESH=1`` starts a fresh interpreter per command instead, and a
few end-to-end tests keep doing so (``tests/runner/test_cli.py``).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

#: What a fresh runner process spends its start-up importing (never a module of this project).
PRELOAD = ("numpy", "torch", "pandas", "xarray", "zarr", "pydantic", "filelock", "safetensors", "psutil")

SERVER = r"""
import ctypes, importlib, json, os, signal, socket, sys, threading
try:  # go with the test process that started it, however it ends (Linux; elsewhere atexit kills it)
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
except (OSError, AttributeError):
    pass
signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C meant for a command is the command's (children reset it)
for name in sys.argv[2].split(","):
    try:
        importlib.import_module(name)
    except ImportError:
        pass
base_path = list(sys.path)
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(sys.argv[1])
srv.listen(64)
print("ready", flush=True)


def reap(pid, conn):
    _, status = os.waitpid(pid, 0)
    try:
        conn.sendall((json.dumps({"status": os.waitstatus_to_exitcode(status)}) + "\n").encode())
    except OSError:  # the client went away: nobody to tell
        pass
    finally:
        conn.close()


def child(req, fds):
    import io, signal
    if req["new_session"]:
        os.setsid()
    for i, fd in enumerate(fds):
        os.dup2(fd, i)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    extra = [p for p in req["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [req["cwd"], *extra, *[p for p in base_path[1:] if p not in extra]]
    unbuffered = bool(req["env"].get("PYTHONUNBUFFERED"))
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    out, err = io.FileIO(1, "w", closefd=False), io.FileIO(2, "w", closefd=False)
    sys.stdout = io.TextIOWrapper(out if unbuffered else io.BufferedWriter(out), encoding="utf-8",
                                  write_through=unbuffered)
    sys.stderr = io.TextIOWrapper(err if unbuffered else io.BufferedWriter(err), encoding="utf-8",
                                  errors="backslashreplace", line_buffering=True, write_through=unbuffered)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    import random
    random.seed()
    sys.argv = [os.path.join(req["root"], "runner", "cli.py"), *req["args"]]
    code = 0
    try:
        from runner.cli import main
        code = main()
    except SystemExit as err:
        code = err.code
    except KeyboardInterrupt:
        import traceback
        traceback.print_exc()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 1
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    import atexit, threading as t
    t._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)


def closing(conn, fds):
    for fd in fds:
        os.close(fd)
    conn.close()


while True:
    conn, _ = srv.accept()
    fds = []
    try:
        msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        req = json.loads(msg)
    except (OSError, ValueError):  # a client gone before it asked (killed with its script): nothing to run
        closing(conn, fds)
        continue
    pid = os.fork()
    if pid == 0:
        srv.close()
        conn.close()
        try:
            child(req, fds)
        finally:
            os._exit(70)
    for fd in fds:
        os.close(fd)
    try:
        conn.sendall((json.dumps({"pid": pid}) + "\n").encode())
    except OSError:  # the client went away meanwhile: its command runs on, and is reaped
        pass
    threading.Thread(target=reap, args=(pid, conn), daemon=True).start()
"""

ROOT = Path(__file__).resolve().parents[2]
_server: dict = {}
_lock = threading.Lock()


def _socket_path() -> str:
    """The server of this test process, started on first use (its start-up is paid once)."""
    with _lock:
        if _server.get("pid") != os.getpid():
            folder = tempfile.mkdtemp(prefix="runner-launcher-")
            path = os.path.join(folder, "s")
            env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
            # a session of its own: a signal to the test's process group never reaches the server
            proc = subprocess.Popen([sys.executable, "-c", SERVER, path, ",".join(PRELOAD)], stdout=subprocess.PIPE,
                                    env=env, cwd=folder, start_new_session=True)
            assert proc.stdout.readline().strip() == b"ready", "the launcher's server did not start"
            atexit.register(lambda: (proc.kill(), proc.wait(), shutil.rmtree(folder, ignore_errors=True)))
            _server.update(pid=os.getpid(), path=path, proc=proc)
        return _server["path"]


class Launched:
    """A ``runner`` command in a forked child, with :class:`subprocess.Popen`'s interface."""

    def __init__(self, args: list[str], *, cwd: Path, env: dict[str, str], stdout=subprocess.PIPE,
                 stderr=subprocess.PIPE, text: bool = True, start_new_session: bool = False):
        self.args = ["runner", *map(str, args)]
        self.returncode: int | None = None
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.connect(_socket_path())
        stdin = os.open(os.devnull, os.O_RDONLY)
        out_r, out_w = os.pipe() if stdout == subprocess.PIPE else (None, os.open(os.devnull, os.O_WRONLY))
        if stderr == subprocess.STDOUT:
            err_r, err_w = None, out_w
        else:
            err_r, err_w = os.pipe() if stderr == subprocess.PIPE else (None, os.open(os.devnull, os.O_WRONLY))
        req = {"args": [str(a) for a in args], "cwd": str(cwd), "env": dict(env), "root": str(ROOT),
               "new_session": start_new_session}
        socket.send_fds(self._sock, [json.dumps(req).encode()], [stdin, out_w, err_w])
        for fd in {stdin, out_w, err_w}:
            os.close(fd)
        self._buffer = b""
        self.pid = self._message()["pid"]
        mode = "r" if text else "rb"
        self.stdout = os.fdopen(out_r, mode, encoding="utf-8" if text else None) if out_r is not None else None
        self.stderr = os.fdopen(err_r, mode, encoding="utf-8" if text else None) if err_r is not None else None

    def _message(self, timeout: float | None = None) -> dict | None:
        self._sock.settimeout(timeout)
        while b"\n" not in self._buffer:
            try:
                chunk = self._sock.recv(4096)
            except (socket.timeout, BlockingIOError):
                return None
            if not chunk:
                raise RuntimeError("the launcher's server went away")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def poll(self) -> int | None:
        if self.returncode is None:
            msg = self._message(timeout=0)
            if msg is not None:
                self.returncode = msg["status"]
                self._sock.close()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            msg = self._message(timeout=timeout)
            if msg is None:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self.returncode = msg["status"]
            self._sock.close()
        return self.returncode

    def communicate(self, input=None, timeout: float | None = None):
        """The rest of each pipe (through its stream: what a ``readline`` read ahead is kept), then
        the exit status; :class:`subprocess.TimeoutExpired` past ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not hasattr(self, "_read"):  # one reader per pipe, kept across calls (a retry after a timeout)
            self._read = {}
            self._readers = [threading.Thread(target=lambda s=s: self._read.__setitem__(s, s.read()), daemon=True)
                             for s in (self.stdout, self.stderr) if s is not None and not s.closed]
            for r in self._readers:
                r.start()
        for r in self._readers:
            r.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if r.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout)
        for stream in self._read:
            stream.close()
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return self._read.get(self.stdout), self._read.get(self.stderr)

    def send_signal(self, sig: int) -> None:
        """As :meth:`subprocess.Popen.send_signal`: nothing once the child has ended."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # ended since the poll
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for stream in (self.stdout, self.stderr):
            if stream is not None and not stream.closed:
                stream.close()
        if self.returncode is None:
            self.wait()


CLIENT = r"""
import json, os, signal, socket, sys
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(sys.argv[1])
req = {"args": sys.argv[3:], "cwd": os.getcwd(), "env": dict(os.environ), "root": sys.argv[2], "new_session": False}
socket.send_fds(sock, [json.dumps(req).encode()], [0, 1, 2])
lines = sock.makefile("rb")
pid = json.loads(lines.readline())["pid"]
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(sig, lambda signum, frame: os.kill(pid, signum))
status = json.loads(lines.readline())["status"]
if status < 0:
    signal.signal(-status, signal.SIG_DFL)
    os.kill(os.getpid(), -status)
sys.exit(status)
"""


def command(folder: Path) -> Path:
    """An executable ``folder/runner`` for shell scripts (``RUNNER=...``): each call forks its command
    from this test process's warm server, its streams, working directory and environment its own,
    its exit status (or signal) the script's to see. With ``TRANSIENT_TEST_FRESH=1``, the installed
    ``runner`` script instead."""
    path = Path(folder) / "runner"
    if fresh():
        path.write_text(f"#!/bin/sh\nexec {sys.executable} -m runner.cli \"$@\"\n")
    else:
        client = Path(folder) / "runner_client.py"
        client.write_text(CLIENT)
        path.write_text(f"#!/bin/sh\nexec {sys.executable} -I -S {client} {_socket_path()} {ROOT} \"$@\"\n")
    path.chmod(0o755)
    return path


def fresh() -> bool:
    return os.environ.get("TRANSIENT_TEST_FRESH") == "1"


def popen(args, *, cwd: Path, env: dict[str, str], **kw):
    """``runner ARGS`` in the background: a forked child (or a fresh interpreter with ``TRANSIENT_TEST_FRESH=1``)."""
    if fresh():
        return subprocess.Popen([sys.executable, "-m", "runner.cli", *map(str, args)], cwd=cwd, env=env,
                                stdout=kw.get("stdout", subprocess.PIPE), stderr=kw.get("stderr", subprocess.PIPE),
                                text=kw.get("text", True), start_new_session=kw.get("start_new_session", False))
    return Launched(args, cwd=cwd, env=env, **kw)


def run(args, *, cwd: Path, env: dict[str, str], timeout: float | None = None, text: bool = True
        ) -> subprocess.CompletedProcess:
    """``runner ARGS`` to its end, as :func:`subprocess.run` with ``capture_output=True``."""
    proc = popen(args, cwd=cwd, env=env, text=text)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
