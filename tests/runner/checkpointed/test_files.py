"""runner.checkpointed.files: ``adopt``, a longer run takes a finished run's checkpoints and resume file as
its own (its task id in their metadata, the resume file no longer done); what the longer run wrote
before a kill, and a file without metadata, are left as they are; ``read_resume``, a resume file typed."""

from __future__ import annotations

import torch

from runner.checkpointed.files import RESUME, Resume, adopt, read_metadata, read_resume, save
from runner.storage.checkpoint import read_tensors


def test_a_longer_run_adopts_the_finished_runs_files_and_keeps_its_own(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    save(old / "step_5.safetensors", {"w": torch.ones(2)}, {"train_id": "old", "step": "5"})
    save(old / RESUME, {"w": torch.full((2,), 3.0)}, {"train_id": "old", "done": "1", "epoch": "3"})
    save(old / "step_10.safetensors", {"w": torch.zeros(2)}, {"train_id": "old", "step": "10"})
    save(new / "step_10.safetensors", {"w": torch.full((2,), 7.0)}, {"train_id": "new", "step": "10"})  # before a kill
    (old / "broken.safetensors").write_bytes(b"not a safetensors file")

    adopt(old, new, "new")

    assert read_metadata(new / "step_5.safetensors") == {"train_id": "new", "step": "5"}
    assert torch.equal(read_tensors(new / "step_5.safetensors")["w"], torch.ones(2))
    assert read_metadata(new / RESUME) == {"train_id": "new", "done": "0", "epoch": "3"}
    assert torch.equal(read_tensors(new / "step_10.safetensors")["w"], torch.full((2,), 7.0))  # its own, kept
    assert not (new / "broken.safetensors").exists()
    adopt(tmp_path / "none", new, "new")  # nothing to adopt: nothing happens


def test_a_resume_file_reads_as_where_its_run_stood(tmp_path):
    path = tmp_path / RESUME
    assert read_resume(path, "t") is None  # none yet
    save(path, {"w": torch.ones(1)}, {"train_id": "t", "epoch": "2", "step": "20", "batch": "3", "done": "0", "lr": "0.5"})
    assert read_resume(path, "t") == Resume(2, 20, 3, False, {"train_id": "t", "epoch": "2", "step": "20", "batch": "3",
                                                               "done": "0", "lr": "0.5"})
    assert read_resume(path, "other") is None  # another run's
    save(path, {"w": torch.ones(1)}, {"train_id": "t", "epoch": "4", "done": "1"})
    assert (read_resume(path, "t").step, read_resume(path, "t").batch, read_resume(path, "t").done) == (None, 0, True)
    save(path, {"w": torch.ones(1)}, {"train_id": "t", "epoch": "four"})
    assert read_resume(path, "t") is None  # says no epoch it can be continued from
