"""One table of trials on both kinds of location (issue 51, item 5): a store in a local folder and
the same store on S3 (moto's server), each killed, extended and damaged while another process polls
``status --json``, ``show --json`` and ``api.open`` beside it. What a trial expects is the same on
both: a version is staged and switched in on S3 as on a disk (:mod:`runner.storage.versioned`).
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
import xarray as xr

from tests.runner import s3_server
from tests.runner.helpers import cli_env, maps_spec, popen_cli, run_cli, wait_for, write_spec

POLLER = textwrap.dedent("""
    import contextlib, io, json, sys, time
    from pathlib import Path
    from runner import api
    from runner.cli import main

    store, control = sys.argv[1], Path(sys.argv[2])
    interval = float(sys.argv[3]) if len(sys.argv) > 3 else 0.2
    log = open(control / "polls.jsonl", "a")

    def cli(*args):
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(list(args))
        except BaseException:  # noqa: BLE001 - a traceback is what this looks for
            import traceback
            return -1, out.getvalue(), traceback.format_exc()
        return code, out.getvalue(), err.getvalue()

    while not (control / "stop").exists():
        time.sleep(interval)
        if (control / "pause").exists():  # the store is being put back between two trials
            (control / "paused").touch()
            while (control / "pause").exists() and not (control / "stop").exists():
                time.sleep(0.01)
            (control / "paused").unlink(missing_ok=True)
            continue
        phase = (control / "phase").read_text() if (control / "phase").exists() else ""
        code, out, err = cli("status", store, "--json")
        found = json.loads(out) if code == 0 and out.strip() else {}
        state = found.get("state")
        entry = {"phase": phase, "status": code, "state": state, "traceback": "Traceback" in err}
        if state == "damaged":  # what it found, for the failure's message
            entry["why"] = str(found.get("message"))[:600]
        code, out, err = cli("show", store, "--json")
        entry.update(show=code, damaged_show="damaged" in out + err, traceback_show="Traceback" in err,
                     said=(err or out)[-300:] if code else "")

        try:
            with api.open(store) as ds:
                ds.load()
            entry["open"] = "ok"
        except Exception as e:  # noqa: BLE001
            entry["open"] = type(e).__name__
        log.write(json.dumps(entry) + "\\n")
        log.flush()
""")


@dataclass(frozen=True)
class Where:
    kind: str
    store: str
    env: dict


@pytest.fixture(params=["local", "s3"])
def where(request) -> Where:
    if request.param == "local":
        return Where("local", "store/t.zarr", {})
    server = request.getfixturevalue("aws")
    return Where("s3", f"s3://{server.bucket()}/t.zarr", server.env)


LYAPUNOV = '[[measure]]\nkind = "lyapunov"\nk = 1e-8\ntau = 1'
"""The one measure of the seeded kills' spec (fewer objects per run: each is a request on S3)."""


def _spec(folder: Path, store: str, steps: int, name: str = "t", measures: str | None = None) -> Path:
    text = maps_spec(name, steps=steps, samples=8, n=8, checkpoint_every=20, measures=measures)
    return write_spec(folder, text.replace(f'store = "store/{name}.zarr"', f'store = "{store}"'), f"{name}.toml")


def _values(store: str) -> dict:
    from runner.storage.location import location, zarr_store

    with xr.open_zarr(zarr_store(location(store), read_only=True), consolidated=False) as ds:
        return {n: v.values.tobytes() if v.dtype.kind not in "OUS" else v.values.tolist()
                for n, v in ds.load().variables.items()}


def _reference(tmp_path: Path, steps: int) -> dict:
    folder = tmp_path / f"reference{steps}"
    folder.mkdir()
    _spec(folder, "store/t.zarr", steps)
    assert run_cli("apply", "t.toml", "-q", cwd=folder).returncode == 0
    return _values(str(folder / "store/t.zarr"))


class Poller:
    """The process polling the store while a trial runs; ``stop()`` returns its polls."""

    def __init__(self, where: Where, folder: Path, interval: float = 0.2):
        self.control = folder / "control"
        self.control.mkdir()
        self.proc = subprocess.Popen([sys.executable, "-c", POLLER, where.store, str(self.control), str(interval)],
                                     cwd=folder,
                                     env=cli_env(folder, **where.env), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)

    def polls(self) -> list[dict]:
        log = self.control / "polls.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    def pause(self) -> None:
        """Stop polling until :meth:`resume` (waits until the poller says it is paused)."""
        (self.control / "pause").touch()
        wait_for((self.control / "paused").exists, self.proc, timeout=120)

    def resume(self, phase: str) -> None:
        (self.control / "phase").write_text(phase)
        (self.control / "pause").unlink()

    def stop(self) -> list[dict]:
        (self.control / "stop").touch()
        self.proc.communicate(timeout=120)
        return self.polls()


def _bad(where: Where, polls: list[dict]) -> list[dict]:
    """The polls that saw a traceback, a store that does not open, or damage. ``VersionSwitched`` is
    ``api.open``'s word for a dataset opened before a switch and read after it: the reader opens again."""
    return [p for p in polls if p["traceback"] or p["traceback_show"]
            or p["open"] not in ("ok", "NotAStore", "VersionSwitched")
            or p["state"] == "damaged" or p["damaged_show"]]


def _stalled(where: Where, folder: Path):
    """The file a run stalled at a point (``RUNNER_TEST_STALL``) writes beside the store, until removed."""
    from runner.storage.location import location
    from runner.storage.store import runner_dir

    return runner_dir(location(_path(where, folder))) / "stalled"


def _kill_at(where: Where, folder: Path, point: str, poller: Poller) -> None:
    proc = popen_cli("apply", "t.toml", "-q", cwd=folder, RUNNER_TEST_STALL=point, **where.env)
    marker = _stalled(where, folder)
    wait_for(marker.exists, proc, timeout=120)
    seen = len(poller.polls())
    wait_for(lambda: len(poller.polls()) >= seen + 2, poller.proc, timeout=120)  # polled while it runs
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    marker.unlink()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_kill_during_a_run_then_apply_equals_an_uninterrupted_run(where, tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    _spec(folder, where.store, 120)
    poller = Poller(where, folder)
    _kill_at(where, folder, "tanh@50", poller)
    again = run_cli("apply", "t.toml", "-q", cwd=folder, **where.env)
    assert again.returncode == 0, again.stderr
    polls = poller.stop()
    assert polls and not _bad(where, polls), _bad(where, polls)[:3]
    assert _values(_path(where, folder)) == _reference(tmp_path, 120)
    assert run_cli("verify", _path(where, folder), cwd=folder, **where.env).returncode == 0


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_kill_during_an_extension_leaves_the_shorter_run_and_apply_extends_it(where, tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    spec = _spec(folder, where.store, 60)
    assert run_cli("apply", "t.toml", "-q", cwd=folder, **where.env).returncode == 0
    before = _values(_path(where, folder))
    spec.write_text(spec.read_text().replace("steps = 60", "steps = 80"))
    poller = Poller(where, folder)
    _kill_at(where, folder, "tanh@70", poller)
    assert _values(_path(where, folder)) == before  # the next version is where its values went
    again = run_cli("apply", "t.toml", "-q", cwd=folder, **where.env)
    assert again.returncode == 0, again.stderr
    polls = poller.stop()
    assert polls and not _bad(where, polls), _bad(where, polls)[:3]
    assert _values(_path(where, folder)) == _reference(tmp_path, 80)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_chunk_written_again_is_found_and_apply_recomputes_it(where, tmp_path):
    from runner.storage.location import location
    from runner.storage.store import held_stage

    folder = tmp_path / "run"
    folder.mkdir()
    _spec(folder, where.store, 40)
    assert run_cli("apply", "t.toml", "-q", cwd=folder, **where.env).returncode == 0
    path = location(_path(where, folder))
    chunk = next(p for p, _ in sorted((path / "lyapunov").files().items()) if p.startswith("c/"))
    body = bytearray((path / "lyapunov" / chunk).read_bytes())
    body[-1] ^= 0xFF
    (path / "lyapunov" / chunk).write_bytes(bytes(body))
    found = run_cli("verify", str(path), cwd=folder, **where.env)
    assert found.returncode == 74 and "lyapunov" in found.stdout + found.stderr, found.stdout + found.stderr
    poller = Poller(where, folder)
    # repaired in the next version: the store stays as it was until the run ends
    proc = popen_cli("apply", "t.toml", "-q", cwd=folder, RUNNER_TEST_STALL="logistic@20", **where.env)
    marker = _stalled(where, folder)
    wait_for(marker.exists, proc, timeout=120)
    assert (location(_path(where, folder)) / "lyapunov" / chunk).read_bytes() == bytes(body)  # read afresh
    assert held_stage(_path(where, folder)) is not None
    marker.unlink()
    assert proc.wait() == 0
    polls = poller.stop()
    assert not [p for p in polls if p["traceback"] or p["traceback_show"]], polls[:3]
    assert run_cli("verify", str(path), cwd=folder, **where.env).returncode == 0
    assert _values(str(path)) == _reference(tmp_path, 40)


def _path(where: Where, folder: Path) -> str:
    return where.store if where.kind == "s3" else str(folder / where.store)


# --- 20 seeded kills over a replace, an extension and a repair (issue 51), on both kinds of location

KILLS = 20
SEED = 51


@dataclass(frozen=True)
class Operation:
    """A change to a finished store of 40 steps: the spec it applies, the flags, and the points it passes."""

    name: str
    points: tuple[str, ...]
    edit: tuple[str, str] | None = None
    flags: tuple[str, ...] = ()


OPERATIONS = (
    Operation("replace", ("replace@1", "replace@2", "layout@1", "switch@1", "switch@2", "switch@3", "logistic@30",
                          "tanh@30", "attrs@1", "attrs@2"), ("samples = 8", "samples = 6"), ("--replace",)),
    Operation("extension", ("layout@1", "switch@1", "switch@2", "switch@3", "tanh@50", "attrs@1", "attrs@2"),
              ("steps = 40", "steps = 60")),
    Operation("repair", ("switch@1", "switch@2", "switch@3", "logistic@20", "attrs@1")),
)


def _draw() -> list[tuple[Operation, str]]:
    """The seeded draw of (operation, point): every operation's points, in a seeded order, 20 of them."""
    pairs = [(op, point) for op in OPERATIONS for point in op.points]
    return random.Random(SEED).sample(pairs, KILLS)


class Keeper:
    """Puts a store (with its runner and history folders) back as it was: a folder copy on a disk, an
    object copy on S3."""

    def __init__(self, where: Where, folder: Path):
        self.where, self.folder = where, folder
        if where.kind == "s3":
            self.client = s3_server.S3Server(where.env["AWS_ENDPOINT_URL"], None).client()
            self.bucket = where.store.split("/")[2]

    def _keys(self, prefix: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def save(self, name: str) -> None:
        if self.where.kind == "local":
            shutil.copytree(self.folder / "store", self.folder.parent / name)
            return
        for key in self._keys("t."):
            self.client.copy_object(Bucket=self.bucket, Key=f"{name}/{key}", CopySource={"Bucket": self.bucket, "Key": key})

    def restore(self, name: str) -> None:
        if self.where.kind == "local":
            shutil.rmtree(self.folder / "store", ignore_errors=True)
            shutil.copytree(self.folder.parent / name, self.folder / "store")
            return
        gone = self._keys("t.")
        for i in range(0, len(gone), 1000):
            self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in gone[i:i + 1000]]})
        for key in self._keys(f"{name}/"):
            self.client.copy_object(Bucket=self.bucket, Key=key[len(name) + 1:],
                                    CopySource={"Bucket": self.bucket, "Key": key})


def _damage(store: str) -> None:
    """One byte of the first chunk of ``lyapunov`` written again, changed."""
    from runner.storage.location import location

    path = location(store)
    chunk = next(p for p, _ in sorted((path / "lyapunov").files().items()) if p.startswith("c/"))
    body = bytearray((path / "lyapunov" / chunk).read_bytes())
    body[-1] ^= 0xFF
    (path / "lyapunov" / chunk).write_bytes(bytes(body))


def _opens(store: str):
    """What ``api.open`` gives: the store's values, or the name of what it raised."""
    from runner import api

    try:
        with api.open(store) as ds:
            return {n: v.values.tobytes() if v.dtype.kind not in "OUS" else v.values.tolist()
                    for n, v in ds.load().variables.items()}
    except Exception as err:  # noqa: BLE001 - a damaged store before its repair: said by name
        return type(err).__name__


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_twenty_seeded_kills_over_replace_extension_and_repair_leave_a_whole_version(where, tmp_path):
    """Each kill (the run killing itself at a drawn point of a replace, an extension or a repair)
    leaves the version before or the one after, whole: ``api.open`` reads one of the two (a store
    still damaged, before its repair is switched in, is refused as damaged or fails its chunk's
    checksum: a repair forgets the damaged task's record first), ``verify`` agrees, and
    the next apply ends equal to an uninterrupted run. A process polls throughout: no traceback, and
    no "damaged" but while a repair's store is damaged."""
    folder = tmp_path / "run"
    folder.mkdir()
    spec = _spec(folder, where.store, 40, measures=LYAPUNOV)
    base = spec.read_text()
    assert run_cli("apply", "t.toml", "-q", cwd=folder, **where.env).returncode == 0
    keeper = Keeper(where, folder)
    keeper.save("pristine")
    _damage(_path(where, folder))
    keeper.save("damaged")
    before = _values(str(_operated(tmp_path, None)))
    after = {op.name: _values(str(_operated(tmp_path, op))) for op in OPERATIONS}
    poller = Poller(where, folder, interval=1.0)  # a poll a second: the 2 cores stay the run's
    poller.pause()
    outcomes = []
    for op, point in _draw():
        keeper.restore("damaged" if op.name == "repair" else "pristine")
        spec.write_text(base.replace(*op.edit) if op.edit else base)
        poller.resume(op.name)
        killed = run_cli("apply", "t.toml", "-q", *op.flags, cwd=folder, RUNNER_TEST_KILL=point, **where.env)
        seen = _opens(_path(where, folder))
        old = ("StoreDamaged", "ValueError") if op.name == "repair" else (before,)
        verified = run_cli("verify", _path(where, folder), cwd=folder, **where.env).returncode
        resumed = run_cli("apply", "t.toml", "-q", *op.flags, cwd=folder, **where.env)
        outcomes.append({"op": op.name, "point": point, "killed": killed.returncode in (-9, 137),
                         "seen": "old" if seen in old else "new" if seen == after[op.name] else str(seen)[:80],
                         "verify": verified, "resumed": resumed.returncode,
                         "equal": _values(_path(where, folder)) == after[op.name]})
        poller.pause()
    polls = poller.stop()
    (tmp_path / "outcomes.json").write_text(json.dumps(outcomes, indent=1))  # what each kill left, to read after
    bad = [o for o in outcomes if not o["killed"] or o["seen"] not in ("old", "new") or o["resumed"] != 0
           or not o["equal"]
           or o["verify"] not in ((0, 74) if o["op"] == "repair" and o["seen"] == "old" else (0,))]
    assert not bad, json.dumps(bad, indent=1)
    assert {o["op"] for o in outcomes} == {op.name for op in OPERATIONS}
    damaged = ("StoreDamaged", "ValueError")  # a repair's store before the switch: refused, or its chunk's checksum
    readers = [p for p in polls if p["traceback"] or p["traceback_show"]
               or p["open"] not in ("ok", "NotAStore", "VersionSwitched", *damaged)
               or ((p["state"] == "damaged" or p["damaged_show"] or p["open"] in damaged) and p["phase"] != "repair")]
    assert polls and not readers, json.dumps(readers[:3], indent=1)


def _operated(tmp_path: Path, op: Operation | None) -> Path:
    """A local store of the seeded kills' spec, after an uninterrupted ``op`` (None: as applied first)."""
    folder = tmp_path / f"reference-{op.name if op else 'first'}"
    folder.mkdir()
    spec = _spec(folder, "store/t.zarr", 40, measures=LYAPUNOV)
    assert run_cli("apply", "t.toml", "-q", cwd=folder).returncode == 0
    if op is None:
        return folder / "store/t.zarr"
    if op.edit:
        spec.write_text(spec.read_text().replace(*op.edit))
    else:
        _damage(str(folder / "store/t.zarr"))
    assert run_cli("apply", "t.toml", "-q", *op.flags, cwd=folder).returncode == 0
    return folder / "store/t.zarr"
