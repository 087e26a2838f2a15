"""Training task: schedule, safetensors checkpoints, exact resume after an interruption."""

from __future__ import annotations

import torch
from safetensors.torch import load_file

from runner.run.prepare import prepare
from runner.studies.training.spec import read_corpus
from runner.checkpointed.loop import Finished, Saved
from runner.studies.training.train import train
from training_helpers import tiny_spec


def _run(p, ckpt_dir, stop_after_step=None):
    study = p.spec
    corpus = p.state.corpus or read_corpus(study, list(p.state.tagsets), p.spec_file.path.parent)
    items = []
    for item in train(study.model[0], study.network_seed(0), study.training, corpus, p.state.steps, "tid",
                      ckpt_dir, torch.device("cpu")):
        items.append(item)
        if stop_after_step is not None and isinstance(item, Saved) and item.step == stop_after_step:
            return items  # the generator is dropped: as if the process died after this durable point
    return items


def test_checkpoints_follow_the_schedule_and_are_safetensors(tmp_path):
    p = prepare(tiny_spec(tmp_path))
    items = _run(p, tmp_path / "a")
    saved = [i for i in items if isinstance(i, Saved)]
    assert [s.step for s in saved] == p.state.steps == [0, 1, 3, 5, 7, 20, 40, 60]
    assert isinstance(items[-1], Finished)
    weights = load_file(str(saved[-1].path))
    assert "model.embedding.weight" in weights and "model.lstm2.weight_hh_l0" in weights
    curves = items[-1].curves
    assert len(curves.train_loss) == 60 and len(curves.val_loss) == 3
    assert curves.lr[0] == 20.0


def test_resume_mid_epoch_equals_uninterrupted(tmp_path):
    p = prepare(tiny_spec(tmp_path))
    ref = _run(p, tmp_path / "ref")
    _run(p, tmp_path / "cut", stop_after_step=5)  # step 5 is mid-epoch 1: hidden state and RNG carried
    # some steps are lost after the durable point; the resumed run redoes them
    rest = _run(p, tmp_path / "cut")
    assert [s.step for s in rest if isinstance(s, Saved)] == [7, 20, 40, 60]
    a, b = ref[-1], rest[-1]
    assert b.resumed_from == 5
    assert a.curves.train_loss == b.curves.train_loss and a.curves.val_loss == b.curves.val_loss
    assert a.curves.lr == b.curves.lr
    wa = load_file(str(tmp_path / "ref" / "step_00000060.safetensors"))
    wb = load_file(str(tmp_path / "cut" / "step_00000060.safetensors"))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_finished_run_is_not_retrained(tmp_path):
    p = prepare(tiny_spec(tmp_path))
    _run(p, tmp_path / "a")
    again = _run(p, tmp_path / "a")
    assert len(again) == 1 and isinstance(again[0], Finished) and again[0].resumed_from == 60


def test_learning_rate_quartered_when_validation_stalls(tmp_path):
    # lr 1e3 makes the LM diverge, so the validation loss cannot keep improving
    p = prepare(tiny_spec(tmp_path, replace={"lr = 20.0": "lr = 1000.0"}))
    curves = _run(p, tmp_path / "a")[-1].curves
    for e in range(1, len(curves.val_loss)):
        improved = curves.val_loss[e - 1] < min(curves.val_loss[: e - 1], default=float("inf"))
        assert curves.epoch_lr[e] == (curves.epoch_lr[e - 1] if improved else curves.epoch_lr[e - 1] / 4)
