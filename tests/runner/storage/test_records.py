"""Completion records on a disk (runner.storage.records): one file per task, read back only when
whole and of this store; a file that is no record is named, with why, and never taken for one."""

from __future__ import annotations

from runner.storage.records import make_records_dir, read_records, records_dir, unreadable_records, write_records


def test_only_whole_records_of_this_store_are_read_and_the_others_are_named(tmp_path):
    make_records_dir(tmp_path)
    folder = records_dir(tmp_path)
    written = write_records(tmp_path, "ours", {"a": {"kind": "iterate"}})
    write_records(tmp_path, "theirs", {"b": {"kind": "iterate"}})
    (folder / "c.json").write_text('{"kind": "iter')  # cut short
    (folder / "d.json").write_text('["not", "a", "record"]')
    (folder / ".e.json.tmp").write_text("{}")  # a write under way
    (folder / "notes.txt").write_text("x")

    assert read_records(tmp_path, "ours") == written and set(written["a"]) >= {"kind", "store_id", "digest"}
    assert read_records(tmp_path, None) == {}  # a store without an id has no records
    assert unreadable_records(tmp_path) == {"c.json": "corrupt (not JSON: JSONDecodeError)",
                                            "d.json": "corrupt (not a completion record)"}
    assert read_records(tmp_path / "nowhere", "ours") == {} and unreadable_records(tmp_path / "nowhere") == {}


def test_an_ellipsis_in_a_region_means_whole_axes_and_a_disk_folds_nothing(tmp_path):
    from runner.storage.records import chunk_coords, fold_records

    assert chunk_coords((4, 6, 8), (2, 3, 4), (..., 1)) == chunk_coords((4, 6, 8), (2, 3, 4), (slice(None), slice(None), 1))
    assert chunk_coords((4, 6, 8), (2, 3, 4), (3, ...)) == [(1, 0, 0), (1, 0, 1), (1, 1, 0), (1, 1, 1)]
    make_records_dir(tmp_path)
    written = write_records(tmp_path, "ours", {"a": {"kind": "iterate"}})
    fold_records(tmp_path, "ours")  # records are folded on object storage only: one file per task stays
    assert read_records(tmp_path, "ours") == written and (records_dir(tmp_path) / "a.json").is_file()
