"""A store's state folders belong to it (issue 50, item 5): another store's ``.runner`` copied in is named
by ``verify`` (74), a ``.history`` that is a link to another store's is refused by ``history`` (74), a
version another store kept is marked as such, and ``history --json --remove`` answers in JSON."""

from __future__ import annotations

import json
import shutil

from tests.runner.helpers import maps_spec, run_cli, write_spec

TEXT = maps_spec("s", steps=20, samples=4, n=4)


def _store(folder):
    folder.mkdir()
    spec = write_spec(folder, TEXT)
    assert run_cli("apply", spec, "-q", cwd=folder).returncode == 0
    return spec, folder / "store" / "s.zarr"


def test_another_stores_runner_folder_is_named_by_verify(tmp_path):
    _, mine = _store(tmp_path / "a")
    _, other = _store(tmp_path / "b")
    shutil.rmtree(mine.parent / "s.runner")
    shutil.copytree(other.parent / "s.runner", mine.parent / "s.runner")
    checked = run_cli("verify", mine, cwd=tmp_path)
    assert checked.returncode == 74, checked.stdout
    assert "another store's (store id" in checked.stdout and "was copied from another store" in checked.stdout


def test_a_linked_history_is_refused_and_a_foreign_version_marked(tmp_path):
    spec, mine = _store(tmp_path / "a")
    spec_b, other = _store(tmp_path / "b")
    spec_b.write_text(TEXT.replace("g = 0.5", "g = 0.6"))
    assert run_cli("apply", spec_b, "-q", "--replace", cwd=spec_b.parent).returncode == 0  # b keeps a version
    (mine.parent / "s.history").symlink_to(other.parent / "s.history")
    listed = run_cli("history", mine, cwd=tmp_path)
    assert listed.returncode == 74 and "s.history is a link" in listed.stderr and "remove the link" in listed.stderr
    assert "Traceback" not in listed.stderr

    (mine.parent / "s.history").unlink()
    shutil.copytree(other.parent / "s.history", mine.parent / "s.history")  # copied, not linked: listed, marked
    listed = run_cli("history", mine, cwd=tmp_path)
    assert listed.returncode == 0 and "a version of another store (store id" in listed.stdout, listed.stdout


def test_history_remove_answers_in_json_when_asked(tmp_path):
    spec, store = _store(tmp_path / "a")
    spec.write_text(TEXT.replace("g = 0.5", "g = 0.6"))
    assert run_cli("apply", spec, "-q", "--replace", cwd=spec.parent).returncode == 0
    (name,) = [v["name"] for v in json.loads(run_cli("history", store, "--json", cwd=tmp_path).stdout)]
    removed = run_cli("history", store, "--json", "--remove", name, cwd=tmp_path)
    assert removed.returncode == 0 and json.loads(removed.stdout)["removed"] == name


def test_a_kept_version_without_its_description_is_listed_damaged_not_hidden(tmp_path):
    spec, store = _store(tmp_path / "a")
    spec.write_text(TEXT.replace("g = 0.5", "g = 0.6"))
    assert run_cli("apply", spec, "-q", "--replace", cwd=spec.parent).returncode == 0
    (version,) = [p for p in (store.parent / "s.history").iterdir()]
    (version / "manifest.json").unlink()
    listed = run_cli("history", store, cwd=tmp_path)
    assert listed.returncode == 0 and version.name in listed.stdout and "DAMAGED: its description" in listed.stdout
    checked = run_cli("verify", store, "--version", version.name, cwd=tmp_path)
    assert checked.returncode == 74 and "is missing" in checked.stderr, checked.stderr


def test_verify_version_of_a_missing_store_says_the_store_is_missing(tmp_path):
    out = run_cli("verify", tmp_path / "nowhere.zarr", "--version", "2026-01-01T00-00-00Z", cwd=tmp_path)
    assert out.returncode == 66 and "nowhere.zarr" in out.stderr and "has no kept version" not in out.stderr, out.stderr
