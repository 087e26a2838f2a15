"""Provenance that cannot lie: an untracked measure file makes the checkout dirty, and the code
identity is the hash of the source actually imported; the root attribute is the provenance's summary
and the file list lies beside the store."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from runner.core.layout import INTERNAL, internal
from runner.run.provenance import code_identity, git_revision
from tests.runner.helpers import maps_spec, run_cli, write_spec


def _git(root, *args):
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(root), "PATH": "/usr/bin:/bin"})


def test_an_untracked_file_makes_the_checkout_dirty_and_an_ignored_one_does_not(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("store/\n")
    (tmp_path / "a.py").write_text("x = 1\n")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "first")
    commit, dirty = git_revision(tmp_path)
    assert len(commit) == 40 and not dirty
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "x.zarr").write_text("")
    assert not git_revision(tmp_path)[1]  # ignored: results, not code
    (tmp_path / "my_measure.py").write_text("y = 2\n")
    assert git_revision(tmp_path)[1]  # a measure in an untracked file
    assert git_revision(tmp_path / "store" / "..")[0] == commit


def test_outside_git_the_commit_is_unknown(tmp_path):
    assert git_revision(tmp_path) == ("unknown", False)


def test_the_code_identity_hashes_each_imported_module():
    import runner.run.provenance as module

    whole, files = code_identity()
    assert files["runner/run/provenance.py"] == hashlib.sha256(open(module.__file__, "rb").read()).hexdigest()
    assert whole == hashlib.sha256("".join(f"{p}\0{h}\n" for p, h in sorted(files.items())).encode()).hexdigest()


def test_the_root_attribute_is_a_summary_and_the_file_list_is_beside_the_store(tmp_path):
    spec = write_spec(tmp_path, maps_spec("prov"))
    result = run_cli("apply", str(spec), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    root = json.loads((tmp_path / "store/prov.zarr/zarr.json").read_text())["attributes"]
    # what print(ds) shows: a short summary (the file list alone was ~18 kB of a 19 kB attribute)
    assert len(root[INTERNAL].encode()) < 3000
    prov = internal(root)
    assert "code_files" not in prov and prov["spec_toml"] == spec.read_text()
    assert prov["package_versions"]["numpy"] and prov["study"] and prov["spec_sha256"]
    assert prov["provenance_file"] == "prov.runner/provenance.json"
    full = json.loads((tmp_path / "store" / prov["provenance_file"]).read_text())
    files = full["code_files"]
    assert prov["code_files_count"] == len(files) > 10
    assert files["runner/run/provenance.py"] == hashlib.sha256(
        (Path(__file__).parents[3] / "runner/run/provenance.py").read_bytes()).hexdigest()
    # the summary binds the list: its code hash is the list's
    whole = hashlib.sha256("".join(f"{p}\0{h}\n" for p, h in sorted(files.items())).encode()).hexdigest()
    assert prov["code_sha256"] == full["code_sha256"] == whole
    show = run_cli("show", "store/prov.zarr", cwd=tmp_path)
    assert f"({len(files)} files, listed in prov.runner/provenance.json)" in " ".join(show.stdout.split())
    assert run_cli("verify", "store/prov.zarr", cwd=tmp_path).returncode == 0
