"""One Location protocol (issue 51, item 1): a local folder and an object-store prefix do the same
operations, from one table of cases, and no caller outside ``runner/storage/`` asks which kind a
location is."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from runner.storage.local import Local
from runner.storage.location import StoreLocation, location

ROOT = Path(__file__).resolve().parents[3]
KIND_NAMES = {"Remote", "Local", "Versioned", "is_url"}
KIND_MODULES = {"runner.storage.objects", "runner.storage.local", "runner.storage.versioned"}


def _kind_checks(path: Path) -> list[str]:
    """Each place in ``path`` that imports a kind of location or tests a value against one."""
    tree = ast.parse(path.read_text(), str(path))
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("runner.storage"):
            names = {a.name for a in node.names} & KIND_NAMES
            if names or node.module in KIND_MODULES:
                found.append(f"{where}:{node.lineno} imports {node.module} {sorted(names)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("isinstance", "is_url"):
            named = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | \
                    {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
            if node.func.id == "is_url" or named & KIND_NAMES:
                found.append(f"{where}:{node.lineno} {ast.unparse(node)}")
        elif isinstance(node, ast.Attribute) and node.attr == "protocol":
            found.append(f"{where}:{node.lineno} reads .protocol")
    return found


def test_no_caller_outside_storage_asks_the_kind_of_a_location():
    outside = [p for p in sorted((ROOT / "runner").rglob("*.py")) if "storage" not in p.relative_to(ROOT).parts[:2]]
    assert len(outside) > 50  # the scan sees the runner's modules
    outside += sorted((ROOT / "benchmarks").rglob("*.py")) + sorted((ROOT / "scripts").rglob("*.py"))
    assert [c for p in outside for c in _kind_checks(p)] == []


def test_the_scan_finds_a_kind_check(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("from runner.storage.objects import Remote\n\ndef f(p):\n    return isinstance(p, Remote)\n")
    assert len(_kind_checks(sample)) == 2


@pytest.fixture(params=["local", "s3"])
def root(request, tmp_path, monkeypatch):
    """An empty folder of each kind, as :func:`location` makes it from what a user writes."""
    if request.param == "local":
        return location(str(tmp_path / "here"))
    server = request.getfixturevalue("server")
    for key, value in server.env.items():
        monkeypatch.setenv(key, value)
    return location(f"s3://{server.bucket()}/here")


def test_both_kinds_are_locations(root):
    assert isinstance(root, StoreLocation)
    assert isinstance(root / "a" / "b", type(root)) and (root / "a").parent == root
    assert root.reachable_problem() is None


def test_writes_appends_listings_and_reads_agree(root):
    (root / "g" / "x.json").write_atomic(b"{}")
    (root / "g" / "c" / "0" / "1").write_atomic(b"abc")
    (root / "g" / "c" / "1" / "0").write_atomic(b"de")
    (root / "log.jsonl").append_line(b"one\n")
    (root / "log.jsonl").append_line(b"two\n")
    assert (root / "g").files() == {"x.json": 2, "c/0/1": 3, "c/1/0": 2}
    assert [(e.name, is_dir) for e, is_dir in (root / "g").entries()] == [("c", True), ("x.json", False)]
    wanted = [root / "g" / "c" / "0" / "1", root / "g" / "gone"]
    assert root.read_many(wanted) == {wanted[0]: b"abc"}
    assert wanted[0].read_range(1, 3) == b"bc" and wanted[0].read_range(2, 10) == b"c"
    lines = b"".join(v for _, v in sorted(root.read_many(sorted(root.glob("log*.jsonl"), key=str)).items(),
                                          key=lambda kv: str(kv[0])))
    assert lines == b"one\ntwo\n"
    assert (root / "nothing").files() == {} and (root / "nothing").entries() == []


def test_folders_marked_moved_and_removed(root):
    folder = root / "records"
    assert not folder.folder_marked()
    folder.mark_folder()
    folder.mark_folder()  # twice is once
    assert folder.folder_marked()
    (root / "a" / "f").write_atomic(b"1")
    (root / "a").move_tree(root / "b")
    assert (root / "b" / "f").read_bytes() == b"1" and not (root / "a" / "f").exists()
    (root / "b").remove_tree()
    (root / "b").remove_tree()  # nothing there: nothing to do
    assert (root / "b").files() == {}


def test_where_a_location_is_said_and_what_it_keeps(root, tmp_path):
    store = location(str(root / "x.zarr"))
    free, where = store.free_bytes()
    assert free > 0 and where
    assert store.relative_name(root / "x.runner" / "ckpt") == "x.runner/ckpt"
    assert store.keeps_versions  # a replace, an extension and a repair keep versions on both kinds (issue 51)
    if isinstance(store, Local):
        assert store.note is None and store.local_folder() == Path(root)
    else:
        assert store.note == "(object storage)" and store.local_folder() == Path(".")
        assert not (root / "x.runner").keeps_versions  # the runner's folder beside it is plain objects
