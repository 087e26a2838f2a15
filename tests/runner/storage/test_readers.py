"""Readers see whole versions (issue 36): a ``--replace`` that reshapes the store (its step axes grow),
killed at 20 points chosen at random among the points of the switch (a seeded draw; each point at
least once), while another process polls ``show --json``, ``status --json`` and the monitor's reader
beside it: no traceback, no "damaged", the store opens in xarray after every kill, and applying again
finishes with the store an uninterrupted replace gives, bit for bit.

The kills are SIGKILLs a run sends itself at a named point (``RUNNER_TEST_KILL``,
:func:`runner.core.interrupt.stall_point`), in a child forked from a process that has imported the
runner once (a kill costs the apply, not Python's start-up); the poller is a process of its own,
paused (by files, never by a sleep) while the store is put back between kills. Two more kills go
through the real CLI, stopped at a point (``RUNNER_TEST_STALL``) and killed from outside.
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from runner.storage.store import runner_dir
from tests.runner.helpers import cli_env, maps_spec, popen_cli, run_cli, wait_for, write_spec

#: Every point a replace passes (the hooks of runner.run.apply and runner.storage.store), in order.
POINTS = ["replace@1", "replace@2", "layout@1", "inputs@1", "switch@1", "switch@2", "switch@3", "logistic@20",
          "tanh@45", "attrs@1", "attrs@2"]
KILLS = 20
SEED = 36

POLLER = textwrap.dedent("""
    import contextlib, io, json, sys, time
    from pathlib import Path
    from runner.cli import main
    from runner.tui.reader import read_summaries

    store, control = Path(sys.argv[1]), Path(sys.argv[2])
    log = open(control / "polls.jsonl", "a")

    def run(*args):
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main([str(a) for a in args])
        except BaseException as e:  # noqa: BLE001 - a traceback is what this looks for
            import traceback
            return -1, out.getvalue(), err.getvalue() + "Traceback\\n" + traceback.format_exc()
        return code, out.getvalue(), err.getvalue()

    n = 0
    while not (control / "stop").exists():
        time.sleep(0.25)  # a poll interval, leaving the CPU to the run it watches
        if (control / "pause").exists():
            (control / "paused").touch()
            while (control / "pause").exists() and not (control / "stop").exists():
                time.sleep(0.01)
            (control / "paused").unlink(missing_ok=True)
            continue
        n += 1
        if not (store / "zarr.json").exists():
            continue
        code, out, err = run("show", store, "--json")
        entry = {"what": "show", "code": code, "traceback": "Traceback" in err, "damaged": "damaged" in out + err,
                 "err": err[-300:]}
        if n % 2 == 0:
            code, out, err = run("status", store, "--json")
            state = json.loads(out).get("state") if code == 0 and out.strip() else None
            log.write(json.dumps({"what": "status", "code": code, "traceback": "Traceback" in err,
                                  "damaged": state == "damaged", "state": state, "err": err[-300:]}) + "\\n")
        else:
            try:
                read_summaries(store)
                monitor = None
            except Exception as e:  # noqa: BLE001
                monitor = f"{type(e).__name__}: {e}"
            log.write(json.dumps({"what": "monitor", "code": 0 if monitor is None else -1,
                                  "traceback": monitor is not None, "damaged": False, "err": monitor or ""}) + "\\n")
        log.write(json.dumps(entry) + "\\n")
        log.flush()
""")

KILLER = textwrap.dedent("""
    import contextlib, io, json, os, shutil, signal, sys, time
    from pathlib import Path
    import numpy, xarray, zarr, torch  # noqa: F401 - imported once: each kill forks from here
    import runner.cli, runner.run.apply, runner.read.status, runner.storage.verify, runner.tui.reader  # noqa: F401
    import runner.studies.depth.study, models.maps  # noqa: F401 (this process does no zarr I/O: forks stay safe)

    folder, control = Path(sys.argv[1]), Path(sys.argv[2])
    points = json.loads(sys.argv[3])
    store, pristine = folder / "store", control / "pristine"
    log = open(control / "kills.jsonl", "a")

    def pause():
        (control / "pause").touch()
        while not (control / "paused").exists():
            time.sleep(0.01)

    def in_child(fn):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = fn()
            finally:
                os._exit(code)
        return os.waitpid(pid, 0)[1]

    def cli(*args):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = runner.cli.main([str(a) for a in args])
        return code, out.getvalue(), err.getvalue()

    def replace():
        os.environ["RUNNER_TEST_KILL"] = point
        return cli("apply", "spec.toml", "-q", "--replace")[0]

    def after():
        found = {}
        try:
            return checked(found)
        except Exception as e:  # noqa: BLE001 - said in the log, the test fails on it
            log.write(json.dumps({"point": point, "error": f"{type(e).__name__}: {e}", **found}) + "\\n")
            log.flush()
            return 1

    def checked(found):
        import numpy as np
        import xarray as xr
        with xr.open_zarr(store / "r.zarr", consolidated=False) as ds:  # the store opens, whatever was killed
            ds.load()
            found["opens"] = True
        code, out, err = cli("verify", store / "r.zarr")
        found["verify"] = code
        found["verify_out"] = out[-400:]
        code, out, err = cli("apply", "spec.toml", "-q", "--replace")
        found["resumed"] = code
        found["resume_err"] = err[-400:]
        with xr.open_zarr(store / "r.zarr", consolidated=False) as ds, \\
                xr.open_zarr(control / "reference" / "r.zarr", consolidated=False) as ref:
            found["equal"] = all(np.array_equal(ds[n].values, ref[n].values, equal_nan=True) and
                                 ds[n].dims == ref[n].dims and ds[n].attrs == ref[n].attrs for n in ref.variables)
            found["equal"] = found["equal"] and set(ds.variables) == set(ref.variables)
        log.write(json.dumps({"point": point, **found}) + "\\n")
        log.flush()
        return 0

    os.chdir(folder)
    for i, point in enumerate(points):
        pause()
        shutil.rmtree(store, ignore_errors=True)
        shutil.copytree(pristine, store)
        (control / "pause").unlink()
        status = in_child(replace)
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        log.write(json.dumps({"point": point, "killed": killed}) + "\\n")
        log.flush()
        in_child(after)
    pause()
""")


def _values(path: Path) -> dict:
    with xr.open_zarr(path, consolidated=False) as ds:
        return {n: (v.dims, v.attrs, v.values) for n, v in ds.load().variables.items()}


def _assert_equal(path: Path, reference: Path) -> None:
    got, want = _values(path), _values(reference)
    assert got.keys() == want.keys()
    for name, (dims, attrs, data) in want.items():
        assert got[name][:2] == (dims, attrs), name
        np.testing.assert_array_equal(got[name][2], data, err_msg=name)


@pytest.fixture
def replacing(tmp_path):
    """A finished store of 40 steps and its spec edited to 50 (the step axes grow: a reshape that
    needs --replace): (folder, control folder with ``pristine`` and ``reference`` stores)."""
    folder, control = tmp_path / "run", tmp_path / "control"
    folder.mkdir()
    control.mkdir()
    spec = write_spec(folder, maps_spec("r", steps=40, samples=8, n=8))
    assert run_cli("apply", spec, "-q", cwd=folder).returncode == 0
    shutil.copytree(folder / "store", control / "pristine")
    spec.write_text(spec.read_text().replace("steps = 40", "steps = 50"))
    ref = tmp_path / "ref"
    ref.mkdir()
    write_spec(ref, spec.read_text())
    assert run_cli("apply", "spec.toml", "-q", cwd=ref).returncode == 0
    shutil.copytree(ref / "store", control / "reference")
    return folder, control


def _poller(folder: Path, control: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", POLLER, str(folder / "store/r.zarr"), str(control)], cwd=folder,
                            env=cli_env(folder), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _polls(control: Path) -> list[dict]:
    return [json.loads(line) for line in (control / "polls.jsonl").read_text().splitlines()]


def _bad(polls: list[dict]) -> list[dict]:
    return [p for p in polls if p["traceback"] or p["damaged"] or p["code"] not in (0,)]


@pytest.fixture
def poller(replacing):
    """The process polling show, status and the monitor's reader, started for the test; stopped
    at its end whatever the test did (it polls until ``control/stop`` exists)."""
    folder, control = replacing
    proc = _poller(folder, control)
    yield proc
    (control / "stop").touch()
    try:
        proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_twenty_kills_of_a_replace_leave_whole_versions(replacing, poller):
    folder, control = replacing
    draw = random.Random(SEED)
    points = POINTS + [draw.choice(POINTS) for _ in range(KILLS - len(POINTS))]
    draw.shuffle(points)
    killer = subprocess.run([sys.executable, "-c", KILLER, str(folder), str(control), json.dumps(points)], cwd=folder,
                            env=cli_env(folder), capture_output=True, text=True, timeout=360)
    (control / "stop").touch()
    poller.communicate(timeout=120)
    assert killer.returncode == 0, killer.stderr
    lines = [json.loads(line) for line in (control / "kills.jsonl").read_text().splitlines()]
    kills, checks = lines[0::2], lines[1::2]
    assert [k["point"] for k in kills] == points and all(k["killed"] for k in kills), kills
    assert len(checks) == KILLS, (checks, killer.stderr)
    for c in checks:
        assert "error" not in c, c
        assert c["opens"] and c["verify"] == 0 and c["resumed"] == 0 and c["equal"], c
    polls = _polls(control)
    assert len(polls) >= KILLS and not _bad(polls), _bad(polls)[:5]


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("point", ["switch@2", "tanh@45"])
def test_a_replace_killed_from_outside_with_show_beside_it(point, replacing, poller):
    """The real CLI, stopped at a point (a file says so), then killed with SIGKILL while another
    process polls show --json; a healthy replace beside the poller then finishes whole."""
    folder, control = replacing
    store = folder / "store/r.zarr"
    proc = popen_cli("apply", "spec.toml", "-q", "--replace", cwd=folder, RUNNER_TEST_STALL=point)
    wait_for(lambda: (runner_dir(store) / "stalled").exists(), proc)
    wait_for(lambda: (control / "polls.jsonl").exists() and len(_polls(control)) >= 2, poller)  # polled while stopped
    if point == "tanh@45":  # a task of the replace is running: its values go to the next version (issue 51)
        _assert_equal(store, control / "pristine/r.zarr")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    (runner_dir(store) / "stalled").unlink()
    assert run_cli("verify", store, cwd=folder).returncode == 0
    again = run_cli("apply", "spec.toml", "-q", "--replace", cwd=folder)
    assert again.returncode == 0, again.stderr
    seen = len(_polls(control))
    wait_for(lambda: len(_polls(control)) >= seen + 2, poller)  # polled after the resume too
    (control / "stop").touch()
    poller.communicate(timeout=120)
    _assert_equal(store, control / "reference/r.zarr")
    assert not _bad(_polls(control)), _bad(_polls(control))[:5]


def test_a_switch_completed_after_a_kill_waits_for_the_readers(tmp_path):
    """A kill between a switch and its manifest's rename leaves the next manifest beside the store;
    the next apply renames it into place under the readers' lock, so a reader that has read the
    store's version never meets a manifest of another (issue 36; a fresh clone's twenty-kill test
    once caught ``show`` in between)."""
    import threading

    from runner.core.layout import with_internal
    from runner.storage.manifest import MANIFEST, NEXT, build, read_manifest, write_manifest
    from runner.storage.readers import LOCK, reading
    from runner.storage.store import Store

    store = Store(tmp_path / "s.zarr")
    store.path.mkdir()
    (store.path / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "group", "attributes":
                                                      with_internal({}, store_id="s", layout_id="new")}))
    store.state_dir.mkdir()
    (store.state_dir / LOCK).touch()
    for name, lid in ((MANIFEST, "old"), (NEXT, "new")):
        write_manifest(store.state_dir, build("s", {}, {}, layout_id=lid), name)
    with reading(store.state_dir):
        assert read_manifest(store.state_dir, "s", "new")["layout_id"] == "new"  # the next one is the store's
        finishing = threading.Thread(target=store.finish_switch)
        finishing.start()
        finishing.join(0.5)
        assert finishing.is_alive() and (store.state_dir / NEXT).exists()  # waits for the reader
    finishing.join(30)
    assert not finishing.is_alive() and not (store.state_dir / NEXT).exists()
    assert read_manifest(store.state_dir, "s", "new")["layout_id"] == "new"
