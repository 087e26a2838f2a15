"""runner.checkpointed.files.adopt: a longer run takes a finished run's checkpoints and resume file as
its own (its task id in their metadata, the resume file no longer done); what the longer run wrote
before a kill, and a file without metadata, are left as they are."""

from __future__ import annotations

import torch

from runner.checkpointed.files import RESUME, adopt, read_metadata, read_tensors, save


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
