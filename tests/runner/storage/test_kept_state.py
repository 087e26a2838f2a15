"""Kept state bound to what was written (issue 48): a depth pass's final state, a training run's resume
file and kept checkpoints carry the digest of their tensors; an edited one is never continued from
(plan names the file and the longer run is recomputed, with consent), ``verify`` names it (exit 74) and
``apply`` removes it."""

from __future__ import annotations

import json

import pytest
import torch

from runner.storage import kept
from runner.storage.checkpoint import KeptStateDamaged, read_tensors, write_tensors
from runner.storage.store import runner_dir
from tests.depth.test_extend import applied, spec_text
from tests.runner.helpers import run_cli, write_spec


def _tamper(path, value: float = 5e23) -> None:
    """Overwrite the first float32 of the file's tensors, keeping its header (and digest) as it was."""
    raw = bytearray(path.read_bytes())
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    first = min((v for k, v in header.items() if k != "__metadata__" and v["dtype"] == "F32"),
                key=lambda v: v["data_offsets"][0])
    at = 8 + n + first["data_offsets"][0]
    raw[at:at + 4] = torch.tensor([value], dtype=torch.float32).numpy().tobytes()
    path.write_bytes(bytes(raw))


def test_a_kept_file_records_its_digest_and_an_edit_is_found(tmp_path):
    path = tmp_path / "state.safetensors"
    write_tensors(path, {"z": torch.arange(6, dtype=torch.float32), "n": torch.tensor([1, 2])}, {"t": "3"})
    assert kept.problem(path) is None and torch.equal(read_tensors(path)["z"], torch.arange(6, dtype=torch.float32))
    _tamper(path)
    assert "holds other values than were written" in kept.problem(path)
    with pytest.raises(KeptStateDamaged, match=r"state.safetensors holds other values than were written"):
        read_tensors(path)
    path.write_bytes(path.read_bytes()[:-3])
    assert "is torn" in kept.problem(path)


def test_a_file_from_before_digests_is_read_as_before(tmp_path):
    from safetensors.torch import save

    path = tmp_path / "old.safetensors"
    path.write_bytes(save({"z": torch.ones(3)}, metadata={"t": "1"}))
    assert kept.problem(path) is None and torch.equal(read_tensors(path)["z"], torch.ones(3))


def test_an_extension_from_an_edited_final_state_is_refused_and_named(tmp_path):
    spec, store = applied(tmp_path, 60)
    finals = sorted((runner_dir(store) / "final").iterdir())
    _tamper(finals[0])
    name = finals[0].name

    checked = run_cli("verify", store, cwd=tmp_path)
    assert checked.returncode == 74 and name in checked.stdout + checked.stderr, checked.stdout + checked.stderr
    planned = run_cli("plan", spec, "--detailed-exitcode", "--no-estimate", cwd=tmp_path)
    assert planned.returncode == 2 and "(kept state)" in planned.stdout, planned.stdout
    spec.write_text(spec_text(80))
    plan = " ".join(run_cli("plan", spec, "--no-estimate", cwd=tmp_path).stdout.split())
    assert f"{name}, holds other values than were written" in plan and "not extended" in plan, plan
    refused = run_cli("apply", spec, "-q", cwd=tmp_path)
    assert refused.returncode == 77, refused.stderr

    done = run_cli("apply", spec, "-q", "--replace", cwd=tmp_path)  # recomputed from t = 0: the edit never used
    assert done.returncode == 0, done.stderr
    assert run_cli("verify", store, cwd=tmp_path).returncode == 0
    _, fresh = applied(tmp_path / "fresh", 80)
    from tests.depth.test_extend import bits, data
    assert bits(data(store)) == bits(data(fresh))


def test_apply_removes_an_edited_kept_file_and_verify_is_clean_again(tmp_path):
    spec, store = applied(tmp_path, 60)
    final = sorted((runner_dir(store) / "final").iterdir())[0]
    _tamper(final)
    repaired = run_cli("apply", spec, "-q", cwd=tmp_path)
    assert repaired.returncode == 0, repaired.stderr
    assert not final.exists() and run_cli("verify", store, cwd=tmp_path).returncode == 0
    spec.write_text(spec_text(80))  # that network's longer run can no longer continue: plan says so
    plan = " ".join(run_cli("plan", spec, "--no-estimate", cwd=tmp_path).stdout.split())
    assert "not extended: no state was kept at step 60" in plan, plan


TRAINING = """
[experiment]
name = "kept"
store = "store/kept.zarr"

[corpus]
source = "builtin:tiny-tagged"
min_count = 2
drop_rare_sentences = false
analysis_tokens = 100

[training]
epochs = {epochs}
batch_size = 8
bptt = 10
eval_batch_size = 4
embedding_dim = 8
hidden_dim = 8

[checkpoints]
every_epoch = true

[[model]]
name = "lm"
kind = "lm"

[[measure]]
kind = "svcca"
compare = "final"
"""


@pytest.mark.parametrize("which", ["resume.safetensors", "a kept checkpoint"])
def test_a_training_extension_from_an_edited_kept_file_is_refused_and_named(tmp_path, which):
    spec = write_spec(tmp_path, TRAINING.format(epochs=1))
    assert run_cli("apply", spec, "-q", cwd=tmp_path).returncode == 0
    store = tmp_path / "store" / "kept.zarr"
    files = sorted((runner_dir(store) / "checkpoints" / "lm").glob("*/*.safetensors"))
    target = next(f for f in files if (f.name == "resume.safetensors") == (which == "resume.safetensors"))
    _tamper(target)
    checked = run_cli("verify", store, cwd=tmp_path)
    assert checked.returncode == 74 and target.name in checked.stdout + checked.stderr, checked.stdout
    spec.write_text(TRAINING.format(epochs=2))
    plan = " ".join(run_cli("plan", spec, "--no-estimate", cwd=tmp_path).stdout.split())
    assert f"{target.name} holds other values than were written" in plan and "not extended" in plan, plan
    refused = run_cli("apply", spec, "-q", cwd=tmp_path)
    assert refused.returncode == 77, refused.stderr
