"""Versions of a store on S3 (issue 51, :mod:`runner.storage.versioned`): a next version writes only
what changes and shares every other object; the head switches in one conditional PUT; a reader
reads the version it opened, whole, or is told it was switched out; what no version maps is
collected, what the history keeps is not."""

from __future__ import annotations

import json

import numpy as np
import pytest

from runner.storage import versioned
from runner.storage.location import location


@pytest.fixture
def store(aws):
    """A zarr store of one array (4 chunks) on S3, in its first version."""
    import zarr

    path = location(f"s3://{aws.bucket()}/v.zarr")
    g = zarr.open_group(path.zarr_store(), mode="w", zarr_format=3)
    g.create_array("a", shape=(8,), chunks=(2,), dtype="f8", fill_value=np.nan)[...] = np.arange(8.0)
    return path


def _keys(server, path, prefix: str) -> list[str]:
    bucket, _, key = path.store_key.partition("/")
    found = server.client().list_objects_v2(Bucket=bucket, Prefix=f"{key}/{prefix}").get("Contents", [])
    return sorted(o["Key"][len(key) + 1:] for o in found)


def _next(path, change) -> versioned.Versioned:
    """A next version of ``path`` with ``change(group)`` made in it, switched in."""
    import zarr

    stage = path.stage_at(None, "n" + path.fresh().version[:7])
    path.begin_stage(stage)
    change(zarr.open_group(stage.zarr_store(), mode="r+", use_consolidated=False))
    path.switch_stage(stage)
    return stage


def _read(path) -> np.ndarray:
    import zarr

    return zarr.open_group(path.reader_store(), mode="r", use_consolidated=False)["a"][...]


def test_a_store_on_s3_is_a_head_naming_a_version_and_no_plain_group(store, server):
    import zarr

    head = json.loads(store.fs.cat_file(f"{store.store_key}/{versioned.HEAD}"))
    assert head == {"version": store.version}
    assert "zarr.json" not in _keys(server, store, "")  # a plain reader finds no group at the URL
    with pytest.raises(FileNotFoundError):
        zarr.open_group(f"s3://{store.store_key}", mode="r", storage_options={"endpoint_url": server.url})
    np.testing.assert_array_equal(_read(store), np.arange(8.0))
    assert sorted(store.files()) == ["a/c/0", "a/c/1", "a/c/2", "a/c/3", "a/zarr.json", "zarr.json"]


def test_a_next_version_writes_only_what_changed_and_shares_the_rest(store, server):
    before = store.fresh().version
    old_reader = store.reader_store()
    stage = _next(store, lambda g: g["a"].__setitem__(slice(2, 4), [20.0, 30.0]))
    assert store.fresh().version == stage.version != before
    own = _keys(server, store, f"{versioned.OBJECTS}/{stage.version}/")
    assert own == [f"{versioned.OBJECTS}/{stage.version}/a/c/1"]  # one chunk written; 5 keys shared
    np.testing.assert_array_equal(_read(store.fresh()), [0, 1, 20, 30, 4, 5, 6, 7])
    import zarr

    old = zarr.open_group(old_reader, mode="r", use_consolidated=False)["a"]
    np.testing.assert_array_equal(old[...], np.arange(8.0))  # the version it opened, whole, until collected


def test_a_reader_reads_its_version_whole_across_a_switch_and_is_told_once_it_is_collected(store):
    import zarr

    from runner.storage.pinned import VersionSwitched

    old = zarr.open_group(store.reader_store(), mode="r", use_consolidated=False)["a"]
    _next(store, lambda g: g["a"].__setitem__(slice(0, 2), [10.0, 11.0]))
    store.collect()  # the version before the head's is kept one switch longer
    np.testing.assert_array_equal(old[...], np.arange(8.0))
    _next(store, lambda g: g["a"].__setitem__(slice(0, 2), [12.0, 13.0]))
    store.collect()  # now the first is collected: its chunk 0 no version maps
    np.testing.assert_array_equal(old[2:], np.arange(2.0, 8.0))  # shared chunks still read
    with pytest.raises(VersionSwitched):
        old[0:2]


def test_digests_name_the_objects_a_writer_put_in_place_after_the_reader_took_its_map(store):
    """A run adding to the head's version writes its chunks in place, then their records: a reader
    whose map was taken before the chunks (``verify``, listing the digests the records name after)
    finds each chunk's newest object, never "missing" for a new one or the old one for a rewrite."""
    import zarr

    stage = _next(store, lambda g: g.create_array("b", shape=(4,), chunks=(2,), dtype="f8", fill_value=np.nan))
    reader = store.fresh()
    reader.map()  # the reader's map: "b" has no chunk yet, "a"'s chunks are inherited
    writer = zarr.open_group(store.fresh().zarr_store(), mode="r+", use_consolidated=False)
    writer["b"][0:2] = [1.0, 2.0]  # a new chunk
    writer["a"][0:2] = [5.0, 6.0]  # an inherited chunk written again, in place
    keys = ["b/c/0", "a/c/0", "a/c/1"]
    now = store.fresh().digests(keys)
    assert all(now.values()) and now["a/c/0"] != store.pinned(stage.map().parent).digests(["a/c/0"])["a/c/0"]
    assert reader.digests(keys) == now
    assert "c/0" in (reader / "b").files()  # and the listing of its files (verify's sizes)
    store.fs.pipe_file(f"{store.store_key}/{versioned.OBJECTS}/{stage.version}/b/", b"")  # a console's folder marker
    assert "" not in (reader / "b").files()


def test_an_object_read_is_one_get_without_a_head_first(store, server):
    """s3fs asks an object's size (a HEAD) before each whole read, only to split a large one into
    parallel ranges; the runner's objects are chunks and small JSON, so it reads each in one GET."""
    bucket = store.store_key.split("/", 1)[0]
    reader = store.fresh()
    reader.map()
    before = len(server.requests(bucket))
    np.testing.assert_array_equal(_read(reader), np.arange(8.0))
    (reader / "a" / "zarr.json").read_bytes()
    made = [m for m, _ in server.requests(bucket)[before:]]
    assert "HEAD" not in made and made.count("GET") >= 6, made


def test_sizes_and_digests_list_the_versions_holding_the_path_never_every_versions_objects(store, server):
    """A store's objects are every version's; the chunks of one array are listed under the prefixes of
    the versions that hold them (another's once per opening), not in one LIST of the whole store."""
    bucket = store.store_key.split("/", 1)[0]
    _next(store, lambda g: g["a"].__setitem__(slice(0, 2), [1.0, 1.0]))
    _next(store, lambda g: g.create_array("b", shape=(4,), chunks=(2,), dtype="f8", fill_value=0.0).__setitem__(
        slice(None), np.ones(4)))
    reader = store.fresh()
    reader.map()
    before = len(server.requests(bucket))
    sizes, digests = (reader / "a").files(), (reader / "a").digests(["c/0", "c/1", "c/2", "c/3"])
    lists = [path for method, path in server.requests(bucket)[before:] if "list-type" in path]
    assert sorted(sizes) == ["c/0", "c/1", "c/2", "c/3", "zarr.json"] and all(digests.values())
    whole = f"prefix={store.key.split('/', 1)[1]}/{versioned.OBJECTS}/&".replace("/", "%2F")
    assert lists and not [p for p in lists if whole in p or whole.replace("%2F", "/") in p], lists
    assert len(lists) == 4  # the two versions holding its objects, once each; the head's own here, each time


def test_a_kept_version_is_not_collected_and_unkept_it_is(store, server):
    first = store.fresh().version
    versioned.keep(store.fs, store.store_key, first)
    _next(store, lambda g: g["a"].__setitem__(slice(0, 8), np.zeros(8)))
    assert versioned.collect(store.fs, store.store_key, ()) == 0
    np.testing.assert_array_equal(_read(store.pinned(first)), np.arange(8.0))
    assert versioned.own_bytes(store.fs, store.store_key, first) > 0  # its 4 chunks are its own now
    versioned.keep(store.fs, store.store_key, first, on=False)
    assert versioned.collect(store.fs, store.store_key, ()) > 0
    assert not _keys(server, store, f"{versioned.OBJECTS}/{first}/a/c/")  # its chunks: no version maps them
    assert f"{versioned.OBJECTS}/{first}/a/zarr.json" in _keys(server, store, "")  # its metadata: shared
    assert first not in versioned.versions(store.fs, store.store_key)


def test_an_array_deleted_in_a_next_version_stays_in_the_version_before(store):
    import zarr

    first = store.fresh().version
    versioned.keep(store.fs, store.store_key, first)
    _next(store, lambda g: g.__delitem__("a"))
    assert "a" not in zarr.open_group(store.fresh().reader_store(), mode="r", use_consolidated=False)
    np.testing.assert_array_equal(_read(store.pinned(first)), np.arange(8.0))


def test_a_switch_from_a_version_no_longer_the_head_is_refused(store):
    stage = store.stage_at(None, "late")
    store.begin_stage(stage)
    _next(store, lambda g: g["a"].__setitem__(slice(0, 2), [1.0, 1.0]))  # another writer switched meanwhile
    with pytest.raises(FileExistsError):
        store.switch_stage(stage)


def test_a_store_written_in_place_by_an_earlier_runner_reads_and_its_next_version_shares(server, monkeypatch):
    import zarr
    from zarr.storage import FsspecStore

    for key, value in server.env.items():
        monkeypatch.setenv(key, value)
    url = f"s3://{server.bucket()}/old.zarr"
    plain = FsspecStore.from_url(url, storage_options={"endpoint_url": server.url})
    zarr.open_group(plain, mode="w", zarr_format=3).create_array("a", shape=(4,), chunks=(2,), dtype="f8")[...] = 1.0
    path = location(url)
    assert path.version == versioned.LEGACY
    np.testing.assert_array_equal(_read(path), np.ones(4))
    stage = _next(path, lambda g: g["a"].__setitem__(slice(0, 2), [5.0, 5.0]))
    np.testing.assert_array_equal(_read(path.fresh()), [5, 5, 1, 1])
    assert stage.map().owner("a/c/1") == versioned.LEGACY  # shared with the version written in place
