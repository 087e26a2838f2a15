"""The training-as-time kit (runner.checkpointed) on a trainable with a known answer.

The model is one weight w with loss (w - 3)^2; plain gradient descent at rate lr gives
w_t = 3 + (w_0 - 3)(1 - 2 lr)^t exactly (in exact arithmetic; float64 here), so the checkpoints'
weights are known; an interrupted run resumes to the same bits, a finished one is not retrained,
and an early stop ends the run for good.
"""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from runner.checkpointed.files import RESUME, belongs, load_weights, read_metadata, save
from runner.checkpointed.loop import Finished, Saved, train
from runner.checkpointed.schedule import by_step, checkpoint_steps

W0, TARGET, LR = 0.0, 3.0, 0.1


class Quadratic:
    """A Trainable: SGD on (w - 3)^2; 4 steps an epoch; a noise draw per step exercises the saved RNG."""

    curve_names = ("train_loss", "epoch_w")

    def __init__(self, epochs: int = 3, patience: int | None = None):
        self.model = torch.nn.Linear(1, 1, bias=False).double()
        with torch.no_grad():
            self.model.weight.fill_(W0)
        self.steps_per_epoch, self.epochs, self.patience = 4, epochs, patience
        self.noise, self.epochs_seen = 0.0, 0

    def checkpoint_name(self, index: int, step: int) -> str:
        return f"step_{step:04d}.safetensors"

    def begin_epoch(self, epoch: int, batch: int) -> None:
        pass

    def step(self, epoch: int, batch: int, step: int, curves) -> None:
        w = self.model.weight
        loss = ((w - TARGET) ** 2).sum()
        self.model.zero_grad()
        loss.backward()
        with torch.no_grad():
            w -= LR * w.grad
        self.noise += float(torch.rand(()))  # draws from the torch RNG: a resume must restore it
        curves.train_loss.append(loss.item())

    def end_epoch(self, epochs_done: int, curves) -> bool:
        curves.epoch_w.append(float(self.model.weight.detach()))
        self.epochs_seen = epochs_done
        return self.patience is not None and epochs_done >= self.patience

    def state(self, mid_epoch: bool):
        return {}, {"noise": repr(self.noise)}

    def restore(self, tensors, meta, mid_epoch: bool) -> None:
        self.noise = float(meta["noise"])


def run(ckpt, steps, stop_at=None, **kw):
    q = Quadratic(**kw)
    items = []
    for item in train(q, 7, steps, "tid", "net", ckpt, torch.device("cpu")):
        items.append(item)
        if stop_at is not None and isinstance(item, Saved) and item.step == stop_at:
            break  # the generator is dropped: as if the process died after this durable point
    return q, items


def test_schedule_keeps_initial_epoch_ends_given_log_spaced_and_final_steps():
    assert checkpoint_steps(10, 3) == [0, 10, 20, 30]
    assert checkpoint_steps(10, 3, initial=False, every_epoch=False, steps=[3, 7, 99]) == [3, 7, 30]
    assert checkpoint_steps(10, 3, initial=False, every_epoch=False, log_spaced=(1, 100, 3)) == [1, 5, 30]
    assert by_step([0, 5, 5, 12]) == {0: [0], 5: [1, 2], 12: [3]}


@pytest.mark.timeout(20)
def test_checkpoints_hold_the_known_weights(tmp_path):
    steps = [0, 2, 4, 12]
    _, items = run(tmp_path, steps)
    saved = [i for i in items if isinstance(i, Saved)]
    assert [s.step for s in saved] == steps and [s.epoch for s in saved] == [0, 0.5, 1, 3]
    for s in saved:
        model = torch.nn.Linear(1, 1, bias=False).double()
        load_weights(model, s.path, "cpu")
        assert float(model.weight.detach()) == pytest.approx(TARGET + (W0 - TARGET) * (1 - 2 * LR) ** s.step, rel=1e-12)
        assert belongs(s.path, "tid") and not belongs(s.path, "another task")
    done = items[-1]
    assert isinstance(done, Finished) and done.epochs == 3 and len(done.curves.train_loss) == 12
    assert read_metadata(tmp_path / RESUME)["done"] == "1"


@pytest.mark.timeout(20)
def test_resume_mid_epoch_is_bitwise_the_uninterrupted_run(tmp_path):
    ref, ref_items = run(tmp_path / "ref", [0, 2, 4, 12])
    run(tmp_path / "cut", [0, 2, 4, 12], stop_at=2)  # step 2 is mid-epoch 1
    cut, items = run(tmp_path / "cut", [0, 2, 4, 12])
    assert [i.step for i in items if isinstance(i, Saved)] == [4, 12]
    assert items[-1].resumed_from == 2 and items[-1].resumed_epoch == 0
    assert torch.equal(ref.model.weight, cut.model.weight) and ref.noise == cut.noise
    assert items[-1].curves.train_loss == ref_items[-1].curves.train_loss


@pytest.mark.timeout(20)
def test_a_finished_or_early_stopped_run_is_not_trained_again(tmp_path):
    _, items = run(tmp_path, [0, 4, 8, 12], patience=2)
    assert items[-1].epochs == 2 and [i.step for i in items if isinstance(i, Saved)] == [0, 4, 8]
    q, again = run(tmp_path, [0, 4, 8, 12], patience=2)
    assert len(again) == 1 and again[0].resumed_from == 8 and again[0].epochs == 2 and q.epochs_seen == 0


@pytest.mark.timeout(20)
def test_a_resume_file_without_a_position_resumes_at_its_epoch_end(tmp_path):
    # TransJect's resume files from before the kit name the epoch only (always an epoch end)
    ref, _ = run(tmp_path / "ref", [0, 4, 8, 12])
    run(tmp_path / "old", [0, 4, 8, 12], stop_at=4)
    meta = read_metadata(tmp_path / "old" / RESUME)
    del meta["step"], meta["batch"]
    save(tmp_path / "old" / RESUME, load_file(str(tmp_path / "old" / RESUME)), meta)
    q, items = run(tmp_path / "old", [0, 4, 8, 12])
    assert items[-1].resumed_from == 4 and torch.equal(q.model.weight, ref.model.weight)
