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
