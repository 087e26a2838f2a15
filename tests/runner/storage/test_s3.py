"""Stores on object storage (issue 26): a real S3-compatible server (moto's server mode) on
127.0.0.1, the real CLI in a subprocess, and the same spec applied to a local store as reference."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator

import numpy as np
import pytest
import xarray as xr

from tests.runner import s3_server
from tests.runner.helpers import RUNNER, cli_env, maps_spec, popen_cli, run_cli, wait_for, write_spec

@pytest.fixture
def s3(aws):
    """The server, a new bucket, and this process's AWS variables pointing at it."""
    return aws, aws.bucket()


def _spec(tmp_path, name: str, store: str, **kw) -> None:
    write_spec(tmp_path, maps_spec(name, **kw).replace(f'store = "store/{name}.zarr"', f'store = "{store}"'),
               f"{name}.toml")


def _data(store: str):
    from runner.storage.location import location, zarr_store

    return xr.open_zarr(zarr_store(location(store), read_only=True), consolidated=False).drop_attrs().load()


def _exists(client, bucket: str, key: str) -> bool:
    try:
        client.head_object(Bucket=bucket, Key=key)
        return True
    except client.exceptions.ClientError:
        return False


@contextlib.contextmanager
def _killed_when_stalled(proc, stalled, timeout: float) -> Iterator[None]:
    """Wait until ``stalled()``, run the body while ``proc`` still runs, then ``kill -9`` it."""
    try:
        wait_for(stalled, proc, timeout=timeout)
        yield
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def _records(store: str) -> dict:
    from runner.storage.store import read_tasks

    return read_tasks(store)


@pytest.mark.timeout(120)
def test_a_spec_applied_to_an_s3_store_equals_it_applied_to_a_local_store(s3, tmp_path, in_process):
    server, bucket = s3
    url = f"s3://{bucket}/runs/maps.zarr"
    _spec(tmp_path, "maps", url, steps=100, samples=8)
    _spec(tmp_path, "local", "store/local.zarr", steps=100, samples=8)
    code, out, err = in_process("plan", "maps.toml")
    assert code == 0 and url in out, err
    assert not (tmp_path / "s3:").exists()  # never taken as a local folder `s3:/...`
    code, _, err = in_process("apply", "maps.toml", "-q")  # (in a subprocess: the next test)
    assert code == 0, err
    assert in_process("apply", "local.toml", "-q")[0] == 0
    xr.testing.assert_identical(_data(url), _data(str(tmp_path / "store/local.zarr")))
    assert _records(url).keys() == _records(str(tmp_path / "store/local.zarr")).keys()
    code, out, err = in_process("apply", "maps.toml")
    assert code == 0 and "nothing to do" in out, err
    import runner.api as api

    tree = api.open(url, history=True)  # a healthy store on S3, no history yet (issue 50)
    assert list(tree.children) == ["current"] and "lyapunov" in tree["current"].to_dataset()
    before = _data(url)
    edited = (tmp_path / "maps.toml").read_text().replace("samples = 8", "samples = 6")
    (tmp_path / "edited.toml").write_text(edited)
    code, _, err = in_process("apply", "edited.toml", "-q")  # finished results are never replaced unasked
    assert code == 77 and "--replace" in err, err
    code, _, err = in_process("apply", "edited.toml", "-q", "--replace")  # a version kept, as on a disk (issue 51)
    assert code == 0, err
    (tmp_path / "local_edited.toml").write_text((tmp_path / "local.toml").read_text().replace("samples = 8", "samples = 6"))
    assert in_process("apply", "local_edited.toml", "-q", "--replace")[0] == 0
    xr.testing.assert_identical(_data(url), _data(str(tmp_path / "store/local.zarr")))
    tree = api.open(url, history=True)
    assert list(tree.children) == ["current", "history"] and len(tree["history"].children) == 1, tree
    kept = next(iter(tree["history"].children.values())).to_dataset()
    xr.testing.assert_identical(kept.load().drop_attrs(deep=True), before.drop_attrs(deep=True))
    assert in_process("verify", url)[0] == 0
    code, out, err = in_process("history", url, "--json")
    [version] = json.loads(out)
    assert code == 0 and version["ok"] and version["own_bytes"] > 0, out + err
    assert in_process("verify", url, "--version", version["name"])[0] == 0
    objects = lambda: [o["Key"] for o in server.client().list_objects_v2(Bucket=bucket, Prefix="runs/maps.zarr/")  # noqa: E731
                       .get("Contents", [])]
    held = len(objects())
    code, out, err = in_process("history", url, "--remove", version["name"])
    assert code == 0 and f"removed {version['name']}" in out, out + err
    assert len(objects()) < held and in_process("history", url, "--json")[1].strip() == "[]"
    xr.testing.assert_identical(_data(url), _data(str(tmp_path / "store/local.zarr")))  # the store's own: untouched
    objects = [o["Key"] for o in server.client().list_objects_v2(Bucket=bucket, Prefix="runs/maps.runner/records/")
               .get("Contents", [])]
    assert objects == ["runs/maps.runner/records/.keep"]  # folded into records.folded.json when the apply ended


@pytest.mark.timeout(120)
def test_status_show_figures_and_the_monitor_read_an_s3_store(s3, tmp_path, in_process):
    _, bucket = s3
    url = f"s3://{bucket}/runs/maps.zarr"
    _spec(tmp_path, "maps", url, steps=30, samples=4, measures='[[measure]]\nkind = "token_deviation"')
    assert in_process("apply", "maps.toml", "-q")[0] == 0
    code, out, err = in_process("status", url)
    assert code == 0 and "no task applies (2 not applicable)" in out, out + err  # maps have one token
    code, out, err = in_process("show", "maps.toml")
    assert code == 0 and f"store {url}" in out, err
    code, out, err = in_process("figures", url, "--out", "figs")
    assert code == 0 and (tmp_path / "figs/figures.json").is_file(), err
    code, out, err = in_process("history", url)
    assert code == 0 and "no earlier versions (apply --replace keeps one in" in out, out + err
    code, _, err = in_process("history", url, "--remove", "2026-01-01T00-00-00Z")
    assert code != 0 and "has no version '2026-01-01T00-00-00Z'" in err and "Traceback" not in err, err
    from runner.tui.reader import StoreWatcher

    watcher = StoreWatcher(url)  # what `runner monitor URL` reads: the event log and the records on S3
    assert watcher.poll().changed and watcher.status()["state"] == "done" and len(watcher.records) == 2
    from runner.read.netcdf import to_netcdf

    exported = xr.open_dataset(to_netcdf(url, tmp_path / "maps.nc"))  # the head's version, checked first
    assert exported.sizes == _data(url).sizes
    np.testing.assert_array_equal(exported["deviation"].values, _data(url)["deviation"].values)


@pytest.mark.timeout(120)
def test_a_second_apply_is_refused_and_kill_9_then_apply_equals_an_uninterrupted_run(s3, tmp_path, in_process):
    server, bucket = s3
    url = f"s3://{bucket}/kill.zarr"
    _spec(tmp_path, "kill", url, steps=120, samples=8, checkpoint_every=20)
    _spec(tmp_path, "local", "store/local.zarr", steps=120, samples=8, checkpoint_every=20)
    client = server.client()
    proc = popen_cli("apply", "kill.toml", "-q", cwd=tmp_path, RUNNER_TEST_STALL="tanh@50", **server.env)
    with _killed_when_stalled(proc, lambda: _exists(client, bucket, "kill.runner/stalled"), timeout=25):
        code, _, err = in_process("apply", "kill.toml")
        assert code == 75, err
        assert url in err and "another `runner apply`" in err and "Traceback" not in err
    listed = client.list_objects_v2(Bucket=bucket, Prefix="kill.runner/")
    assert "kill.runner/apply.lock" in [o["Key"] for o in listed["Contents"]]  # left by the killed apply
    code, _, err = in_process("apply", "kill.toml", "-q")  # takes over the lock of the dead process
    assert code == 0, err
    assert in_process("apply", "local.toml", "-q")[0] == 0
    xr.testing.assert_identical(_data(url), _data(str(tmp_path / "store/local.zarr")))
    records = _records(url)
    assert records.keys() == _records(str(tmp_path / "store/local.zarr")).keys()
    assert {r["network_label"]: r["resumed_from"] for r in records.values() if r["kind"] == "iterate"} == \
        {"logistic": 0, "tanh": 40}  # tanh's pass resumed from its durable point at step 40, on S3
    assert in_process("verify", url)[0] == 0


@pytest.mark.timeout(120)
def test_an_apply_whose_lock_was_taken_over_writes_nothing_more_and_ends_75(s3, tmp_path, in_process):
    """Another apply took the lock (its object rewritten): the holder's next write is refused, the run
    ends at once (exit 75, not one failed group after another), and the lock stays the taker's."""
    server, bucket = s3
    url = f"s3://{bucket}/taken.zarr"
    _spec(tmp_path, "taken", url, steps=120, samples=8, checkpoint_every=20)
    _spec(tmp_path, "local", "store/local.zarr", steps=120, samples=8, checkpoint_every=20)
    client = server.client()
    ttl = 3.0
    proc = popen_cli("apply", "taken.toml", "-q", cwd=tmp_path, RUNNER_TEST_STALL="tanh@50",
                     TRANSIENT_LEASE_SECONDS=str(ttl), **server.env)
    try:
        wait_for(lambda: _exists(client, bucket, "taken.runner/stalled"), proc, timeout=40)
        client.put_object(Bucket=bucket, Key="taken.runner/apply.lock", Body=b'{"owner": "another apply"}')
        taken = time.monotonic()
        while time.monotonic() - taken <= ttl:  # by then the holder knows: its renewal was refused, or lapsed
            time.sleep(0.1)
        client.delete_object(Bucket=bucket, Key="taken.runner/stalled")  # it goes on, to its next write
        _, err = proc.communicate(timeout=40)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 75, err
    assert "taken over by another apply" in err and "Traceback" not in err
    assert client.get_object(Bucket=bucket, Key="taken.runner/apply.lock")["Body"].read() == b'{"owner": "another apply"}'
    done = {r["network_label"] for r in _records(url).values() if r["kind"] == "iterate"}
    assert "tanh" not in done  # its pass wrote nothing past the takeover
    client.delete_object(Bucket=bucket, Key="taken.runner/apply.lock")  # the other apply is gone
    assert in_process("apply", "taken.toml", "-q")[0] == 0
    assert in_process("apply", "local.toml", "-q")[0] == 0
    xr.testing.assert_identical(_data(url), _data(str(tmp_path / "store/local.zarr")))


@pytest.mark.timeout(120)
def test_no_such_bucket_and_no_endpoint_are_named_before_any_compute(s3, tmp_path):
    server, bucket = s3
    _spec(tmp_path, "gone", "s3://no-such-bucket/x.zarr")
    _spec(tmp_path, "here", f"s3://{bucket}/x.zarr")
    no_bucket = run_cli("apply", "gone.toml", cwd=tmp_path, **server.env)
    assert no_bucket.returncode == 66 and "s3://no-such-bucket/x.zarr" in no_bucket.stderr
    assert "does not exist" in no_bucket.stderr and "Traceback" not in no_bucket.stderr
    closed = s3_server._free_port()  # nothing listens there
    unreachable = run_cli("plan", "here.toml", cwd=tmp_path, **{**server.env, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{closed}"})
    assert unreachable.returncode == 66 and f"s3://{bucket}/x.zarr" in unreachable.stderr
    assert "nothing answers" in unreachable.stderr and "Traceback" not in unreachable.stderr


@pytest.mark.timeout(120)
def test_no_credentials_and_other_protocols_are_named(s3, tmp_path):
    server, bucket = s3
    no_credentials = {k: v for k, v in cli_env(tmp_path).items() if not k.startswith("AWS_")}
    no_credentials.update(AWS_ENDPOINT_URL=server.url, AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
                          AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_EC2_METADATA_DISABLED="true")
    nobody = subprocess.run([*RUNNER, "status", f"s3://{bucket}/x.zarr"], cwd=tmp_path, env=no_credentials,
                            capture_output=True, text=True, timeout=120)
    assert nobody.returncode == 66 and "credentials" in nobody.stderr and "Traceback" not in nobody.stderr
    other = run_cli("show", "gs://bucket/x.zarr", cwd=tmp_path, **server.env)
    assert other.returncode == 66 and "gs:// is not supported" in other.stderr


@pytest.mark.timeout(120)
def test_a_lease_not_renewed_is_taken_over_once_and_its_holder_stops_writing(s3):
    from runner.storage.bucket_lock import BucketLockLost, Lease
    from runner.storage.objects import Remote
    from runner.storage.store_errors import StoreLocked

    _, bucket = s3
    state = Remote(f"s3://{bucket}/x.runner")
    holder, other = Lease(state, ttl=1.0), Lease(state, ttl=1.0)
    holder.acquire()
    holder._stop.set()  # the holder stops renewing (paused, cut off): its lease runs out
    holder._thread.join()
    with pytest.raises(StoreLocked, match="another `runner apply`"):
        Lease(state, ttl=1.0).acquire()  # still within the lease (this process is alive)
    deadline = time.monotonic() + 20
    while True:  # wait for the lease to lapse by the server's clock, then take it over
        try:
            other.acquire()
            break
        except StoreLocked:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    with pytest.raises(BucketLockLost):
        holder.check()  # past its ttl without a renewal: it must not write
    with pytest.raises(OSError):
        holder._put(IfMatch=holder.etag)  # and a late renewal is refused by the server (fencing)
    first = other.renewed
    while other.renewed == first:  # its thread renews it (If-Match on its own ETag)
        assert time.monotonic() < deadline and not other.lost
        time.sleep(0.05)
    other.check()
    other.release()
    assert not state.glob("apply.lock")


def test_records_folded_into_one_object_and_forgotten_whatever_a_kill_leaves(s3, monkeypatch):
    from runner.storage.objects import Remote
    from runner.storage.records import drop_records, fold_records, make_records_dir, read_records, write_records

    _, bucket = s3
    state = Remote(f"s3://{bucket}/x.runner")
    make_records_dir(state)
    write_records(state, "id", {f"t{i}": {"v": i} for i in range(4)})
    fold_records(state, "id")
    assert [p.name for p in (state / "records").iterdir()] == [".keep"]
    got = read_records(state, "id")  # each record also carries a digest of itself (the manifest's)
    assert {t: {k: v for k, v in r.items() if k != "digest"} for t, r in got.items()} == {
        f"t{i}": {"v": i, "store_id": "id"} for i in range(4)}
    assert all(len(r["digest"]) == 32 for r in got.values())
    write_records(state, "id", {"t9": {"v": 9}})
    with monkeypatch.context() as m, pytest.raises(KeyboardInterrupt):  # killed after the fold was rewritten,
        m.setattr(Remote, "unlink", lambda self, missing_ok=False: (_ for _ in ()).throw(KeyboardInterrupt))
        drop_records(state, ["t1", "t9"])  # before any object went
    assert sorted(read_records(state, "id")) == ["t0", "t2", "t3"]  # t9's object is there, dropped by its ETag
    fold_records(state, "id")  # the next apply's end: the dropped object goes, and its tombstone
    assert sorted(read_records(state, "id")) == ["t0", "t2", "t3"] and [p.name for p in (state / "records").iterdir()] == [".keep"]
    write_records(state, "id", {"t9": {"v": 99}})  # recorded again: a new object, read
    assert read_records(state, "id")["t9"]["v"] == 99
    assert read_records(state, "other") == {}  # records of another store with this path are not taken


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_two_ray_workers_on_an_s3_store_killed_with_their_driver_then_applied_equal_a_local_run(s3, tmp_path, in_process):
    """The driver and 2 workers of a local Ray cluster reach the bucket through the same AWS
    variables (a worker inherits the driver's environment); no shared filesystem is involved. A
    worker stalls, the driver gets ``kill -9``: its cluster goes with it, and an apply at once (the
    local executor) takes over the dead driver's lock and finishes what it left."""
    pytest.importorskip("ray", reason="the Ray executor's tests need ray: pip install -e '.[ray]'")
    psutil = pytest.importorskip("psutil")
    server, bucket = s3
    url = f"s3://{bucket}/ray.zarr"
    _spec(tmp_path, "ray", url, steps=60, samples=8, checkpoint_every=10)
    _spec(tmp_path, "local", "store/local.zarr", steps=60, samples=8, checkpoint_every=10)
    client = server.client()

    def there(key: str) -> bool:
        return _exists(client, bucket, f"ray.runner/{key}")

    driver = popen_cli("apply", "ray.toml", "--executor", "ray", "-q", cwd=tmp_path, RUNNER_TEST_STALL="tanh@25",
                       TRANSIENT_RAY_CPUS="2", **server.env)
    with _killed_when_stalled(driver, lambda: there("stalled") and there("ray_cluster.json"), timeout=240):
        cluster = psutil.Process(driver.pid).children(recursive=True)
    code, _, err = in_process("apply", "ray.toml", "-q")  # at once: the lock of a dead process of this host
    assert code == 0, err

    def gone() -> bool:
        return not [p for p in cluster if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    deadline = time.monotonic() + 20
    while not gone() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone()
    assert in_process("apply", "local.toml", "-q")[0] == 0
    xr.testing.assert_identical(_data(url), _data(str(tmp_path / "store/local.zarr")))
    assert _records(url).keys() == _records(str(tmp_path / "store/local.zarr")).keys()
    assert not there("ray_cluster.json")


@pytest.mark.timeout(120)
async def test_the_monitor_app_shows_an_s3_store_it_is_given_by_url(s3, tmp_path, in_process):
    """`runner monitor s3://...`: the real Textual app, driven headless, on the store in the bucket."""
    from runner.tui.app import MonitorApp
    from runner.tui.widgets import SummaryPlot, TaskTable
    from tests.runner.tui.test_monitor import loaded, settle, static_text, table_states

    _, bucket = s3
    url = f"s3://{bucket}/runs/seen.zarr"
    _spec(tmp_path, "seen", url, steps=30, samples=4)
    assert in_process("apply", "seen.toml", "-q")[0] == 0
    app = MonitorApp(url)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, loaded(app))
        n = len(_records(url))
        assert app.query_one(TaskTable).row_count == n > 1 and set(table_states(app).values()) == {"done"}
        assert f"{n}/{n} done" in static_text(app.query_one("#run-header"))
        await pilot.press("2")
        assert app.query_one(SummaryPlot).series is not None
        await pilot.press("q")
    assert app.return_code == 0


@pytest.mark.timeout(120)
def test_sample_shards_on_an_s3_store_are_merged_from_their_objects(s3, tmp_path, in_process):
    """``--shards``: each shard writes its files beside the store, here objects in the bucket; the
    merge reads them back and removes them. The values equal an unsharded run on a local disk."""
    server, bucket = s3
    url = f"s3://{bucket}/sharded.zarr"
    _spec(tmp_path, "sharded", url, steps=40, samples=9)
    _spec(tmp_path, "local", "store/local.zarr", steps=40, samples=9)
    code, _, err = in_process("apply", "sharded.toml", "-q", "--shards", "2")
    assert code == 0, err
    assert in_process("apply", "local.toml", "-q")[0] == 0
    xr.testing.assert_allclose(_data(url), _data(str(tmp_path / "store/local.zarr")), rtol=1e-5, atol=1e-6)
    left = server.client().list_objects_v2(Bucket=bucket, Prefix="sharded.runner/shards/").get("Contents", [])
    assert not [o["Key"] for o in left if o["Key"].endswith(".safetensors")]


@pytest.mark.timeout(120)
def test_a_transject_run_trains_checkpoints_and_exports_into_the_bucket(s3, tmp_path, in_process):
    """The TransJect study's checkpoints and its export of the best epoch (read back to write the
    export) live beside an S3 store like any of its files."""
    server, bucket = s3
    url = f"s3://{bucket}/tj.zarr"
    (tmp_path / "tj.toml").write_text(f"""
[experiment]
name = "tj"
study = "transject"
store = "{url}"

[data]
source = "listops:"
listops = {{ train = 48, test = 16, max_depth = 3, max_args = 4, min_length = 4, max_length = 40 }}
max_length = 40
analysis_examples = 4

[training]
epochs = 2
batch_size = 16

[[model]]
name = "transject"
variant = "transject"
d_model = 16
n_layers = 2
n_experts = 2

[[measure]]
kind = "entropy"
""")
    code, _, err = in_process("apply", "tj.toml", "-q")
    assert code == 0, err
    code, out, err = in_process("status", url)
    assert code == 0 and "failed" not in out, out + err
    keys = [o["Key"] for o in server.client().list_objects_v2(Bucket=bucket, Prefix="tj.runner/export/")["Contents"]]
    assert any(k.endswith("/model.safetensors") for k in keys) and any(k.endswith("/vocab.json") for k in keys)


@pytest.mark.timeout(120)
def test_apply_of_an_s3_store_logs_to_mlflow(s3, tmp_path, in_process, monkeypatch):
    """--log-to mlflow reads the store in the bucket; the default database is in the working
    directory (SQLite needs a disk)."""
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    _, bucket = s3
    url = f"s3://{bucket}/logged.zarr"
    _spec(tmp_path, "logged", url, steps=30, samples=4)
    monkeypatch.chdir(tmp_path)
    code, _, err = in_process("apply", "logged.toml", "-q", "--log-to", "mlflow")
    assert code == 0 and "logged to MLflow" in err, err
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("logged").experiment_id])
    parent = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    assert parent.data.tags["transient.store"] == url
    assert {r.info.run_name for r in runs if "mlflow.parentRunId" in r.data.tags} == {"logistic", "tanh"}


@pytest.mark.timeout(120)
def test_digests_on_s3_come_from_one_listing_and_a_rewritten_chunk_is_found_and_repaired(s3, tmp_path, in_process,
                                                                                      monkeypatch):
    """Issue 51: a chunk on object storage is bound by its object's ETag, taken from a listing, so that
    recording and checking a store cost no GET per chunk; a chunk object written again with other bytes
    is damage that ``verify`` names and ``apply`` recomputes."""
    from runner.storage.objects import Remote

    server, bucket = s3
    url = f"s3://{bucket}/etag.zarr"
    _spec(tmp_path, "etag", url, steps=40, samples=8)
    read: list[str] = []
    real = Remote.read_many
    monkeypatch.setattr(Remote, "read_many", lambda self, paths: read.extend(p.key for p in paths) or real(self, paths))
    assert in_process("apply", "etag.toml", "-q")[0] == 0
    assert in_process("verify", url)[0] == 0
    chunks = [k for k in read if "/c/" in k or k.endswith("/c")]
    assert not chunks, chunks[:5]  # neither the records nor verify read a chunk's bytes
    client = server.client()
    key = next(o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix="etag.zarr/.objects/")["Contents"]
               if "/lyapunov/c/" in o["Key"])  # the object the store's version maps a chunk to
    body = bytearray(client.get_object(Bucket=bucket, Key=key)["Body"].read())
    body[-1] ^= 0xFF
    client.put_object(Bucket=bucket, Key=key, Body=bytes(body))
    code, out, err = in_process("verify", url)
    assert code == 74 and "lyapunov" in out + err, out + err
    assert in_process("apply", "etag.toml", "-q")[0] == 0
    assert in_process("verify", url)[0] == 0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["s3", "local"])
def test_damage_a_second_read_does_not_find_again_is_a_writers_step_on_s3_and_said_at_once_on_a_disk(
        kind, s3, tmp_path, in_process, monkeypatch):
    """Readers of a store on object storage hold no lock, so damage one read finds (a writer's step
    between two of its reads: a chunk and its record) is read again before it is said; what the second
    read finds again is damage. On a disk the readers' lock holds the store still: said at once."""
    from runner.storage import verify as checks
    from runner.storage.location import location

    server, bucket = s3
    store = f"s3://{bucket}/flip.zarr" if kind == "s3" else str(tmp_path / "store" / "flip.zarr")
    _spec(tmp_path, "flip", store, steps=40, samples=8)
    assert in_process("apply", "flip.toml", "-q")[0] == 0
    array = location(store).fresh() / "lyapunov" if kind == "s3" else location(store) / "lyapunov"
    chunk = array / next(k for k in sorted(array.files()) if k.startswith("c/"))
    good = chunk.read_bytes()
    chunk.write_bytes(good[:-1] + bytes([good[-1] ^ 0xFF]))
    reads = []
    real = checks._verify

    def read_then_put_back(*args):
        found = real(*args)
        reads.append(found.ok)
        chunk.write_bytes(good)  # the step a writer took between two reads
        return found

    monkeypatch.setattr(checks, "_verify", read_then_put_back)
    damage = checks.verify(store)
    assert reads[0] is False  # the first read found the altered chunk
    assert (damage.ok, len(reads)) == ((True, 2) if kind == "s3" else (False, 1))
    monkeypatch.setattr(checks, "_verify", real)
    chunk.write_bytes(good[:-1] + bytes([good[-1] ^ 0xFF]))
    assert not checks.verify(store).ok  # found on every read: damage, on both kinds
