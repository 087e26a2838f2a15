"""Provenance that cannot lie: an untracked measure file makes the checkout dirty, and the code
identity is the hash of the source actually imported."""

from __future__ import annotations

import hashlib
import subprocess

from runner.run.provenance import code_identity, git_revision


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
