"""The suite's launcher (tests/runner/launcher.py) behaves as a fresh ``python -m runner.cli`` does:
the same exit codes and output, a real process for signals, and a shell command (``RUNNER=``)
whose scripts see the command's exit status, streams and working directory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tests.runner import launcher
from tests.runner.helpers import cli_env, maps_spec, wait_for, write_spec


def fresh(*args, cwd, env):
    return subprocess.run([sys.executable, "-m", "runner.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_a_forked_command_answers_as_a_fresh_interpreter_does(tmp_path):
    env = cli_env(tmp_path)
    for args, code in ((["--version"], 0), (["plan"], 2), (["status", tmp_path / "none.zarr"], 66)):
        forked, started = launcher.run(args, cwd=tmp_path, env=env, timeout=300), fresh(*args, cwd=tmp_path, env=env)
        assert (forked.returncode, forked.stdout, forked.stderr) == (code, started.stdout, started.stderr), args
        assert started.returncode == code, args


def test_a_forked_command_is_its_own_process_and_dies_of_a_signal(tmp_path):
    spec = write_spec(tmp_path, maps_spec("slow", steps=20))
    proc = launcher.popen(["apply", spec], cwd=tmp_path, env=cli_env(tmp_path, RUNNER_TEST_STALL="logistic@10"))
    wait_for(lambda: (tmp_path / "store/slow.runner/stalled").exists(), proc)
    assert int((tmp_path / "store/slow.runner/stalled").read_text().split()[0]) == proc.pid
    proc.kill()
    assert proc.wait(timeout=60) == -signal.SIGKILL


def test_the_shell_command_passes_the_status_streams_and_folder(tmp_path):
    runner = launcher.command(tmp_path)
    env = cli_env(tmp_path)
    script = f'cd {tmp_path} && {runner} --version; echo "v=$?"; {runner} plan; echo "p=$?"; ' \
             f'{runner} status none.zarr 2>/dev/null; echo "s=$?"'
    out = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert out.stdout.startswith("runner ") and "v=0" in out.stdout and "p=2" in out.stdout and "s=66" in out.stdout
    assert "usage:" in out.stderr


def test_the_server_outlives_clients_that_die_mid_request_and_a_cpu_hog(tmp_path):
    """Under load, a shell script killed with its client left the server a connection with no request
    (or no one to answer): the server died, and every later command of the test process failed with
    ConnectionRefusedError (issue 52, item 5). With two processes spinning on the 2 cores, clients that
    die before asking and after asking leave the server serving, and a command still dies of its signal."""
    import json
    import socket

    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        path = launcher._socket_path()
        silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        silent.connect(path)
        silent.close()  # gone before it asked
        gone = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        gone.connect(path)
        req = {"args": ["--version"], "cwd": str(tmp_path), "env": cli_env(tmp_path), "root": str(launcher.ROOT),
               "new_session": False}
        null = [os.open(os.devnull, os.O_RDWR) for _ in range(3)]
        socket.send_fds(gone, [json.dumps(req).encode()], null)
        gone.close()  # gone before its answer: the server's reply and its child's status go nowhere
        for fd in null:
            os.close(fd)
        for _ in range(3):
            done = launcher.run(["--version"], cwd=tmp_path, env=cli_env(tmp_path), timeout=300)
            assert done.returncode == 0 and done.stdout.startswith("runner ")
        spec = write_spec(tmp_path, maps_spec("slow", steps=20))
        proc = launcher.popen(["apply", spec], cwd=tmp_path, env=cli_env(tmp_path, RUNNER_TEST_STALL="logistic@10"))
        wait_for(lambda: (tmp_path / "store/slow.runner/stalled").exists(), proc)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 130
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
