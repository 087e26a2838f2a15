"""Training specs: defaults of the thesis, validation errors naming file:line [table] key."""

from __future__ import annotations

import pytest

from runner.run.prepare import validate_spec as load_training_spec
from runner.spec.specfile import SpecError, read_toml
from runner.plugin.study import study_for
from runner.studies.training.plan import checkpoint_steps
from runner.studies.training.spec import CheckpointSpec, LogSpaced, LSTMTraining


def is_training_spec(path) -> bool:
    return study_for(read_toml(path)).name == "training"

from training_helpers import ROOT, tiny_spec


def test_defaults_are_the_thesis():
    t = LSTMTraining()
    assert (t.lr, t.lr_decay, t.clip, t.batch_size, t.bptt, t.dropout, t.epochs) == (20.0, 4.0, 0.25, 40, 35, 0.2, 50)
    assert (t.embedding_dim, t.hidden_dim, t.num_layers, t.momentum) == (200, 200, 2, 0.0)
    assert CheckpointSpec().every_epoch


@pytest.mark.parametrize("name", ["tiny/lstm_tiny.toml", "lstm_svcca.toml", "lstm_svcca_thesis.toml", "lstm_sparsity.toml"])
def test_shipped_specs_load(name):
    if name == "lstm_svcca.toml":
        pytest.importorskip("spacy", reason="lstm_svcca.toml uses spaCy silver POS tags, as the thesis")
    path = ROOT / "specs" / name
    assert is_training_spec(path)
    study = load_training_spec(path)
    assert study.model and study.measure


def test_depth_spec_is_not_a_training_spec():
    assert not is_training_spec(ROOT / "specs" / "quickstart.toml")


def _errors(tmp_path, replace) -> list[str]:
    path = tiny_spec(tmp_path, replace=replace)
    with pytest.raises(SpecError) as err:
        load_training_spec(path)
    return err.value.problems


def test_unknown_key_names_file_line_table_and_suggests(tmp_path):
    (msg,) = _errors(tmp_path, {"bptt = 10": "bpt = 10"})
    assert msg.endswith("[training] bpt: unknown key (did you mean 'bptt'?)")
    assert ".toml:" in msg and msg.split(":")[1].isdigit()


def test_bad_values_all_reported(tmp_path):
    problems = _errors(tmp_path, {"lr = 20.0": "lr = -1", "batch_size = 8": "batch_size = 0"})
    assert any("[training] lr: Input should be greater than 0" in p for p in problems)
    assert any("[training] batch_size:" in p for p in problems)


def test_tagger_needs_tagset(tmp_path):
    (msg,) = _errors(tmp_path, {'tagset = "upos"\nshuffled = true': "shuffled = true"})
    assert "[[model]] #4 (tagger_upos_shuffled)" in msg and "needs a tagset" in msg


def test_dynamics_table_refused(tmp_path):
    (msg,) = _errors(tmp_path, {"[checkpoints]": "[dynamics]\nsteps = 3\n\n[checkpoints]"})
    assert "[dynamics]" in msg


def test_missing_corpus_file(tmp_path):
    (msg,) = _errors(tmp_path, {'"builtin:tiny-tagged"': '"nope.conllu"'})
    assert "[corpus] source: no such file" in msg


def test_reference_networks_checked(tmp_path):
    (msg,) = _errors(tmp_path, {'reference = ["lm_seed2"]': 'reference = ["tagger_upos"]'})
    assert "must be language models" in msg


def test_checkpoint_schedules():
    every = checkpoint_steps(CheckpointSpec(), steps_per_epoch=10, epochs=3)
    assert every == [0, 10, 20, 30]
    explicit = checkpoint_steps(CheckpointSpec(every_epoch=False, steps=[3, 7, 99]), 10, 3)
    assert explicit == [0, 3, 7, 30]  # out-of-range dropped, final always kept
    log = checkpoint_steps(CheckpointSpec(every_epoch=False, initial=False,
                                          log_spaced=LogSpaced(start=1, count=4)), 250, 4)
    assert log == [1, 10, 100, 1000]
    mixed = checkpoint_steps(CheckpointSpec(steps=[5], log_spaced=LogSpaced(start=1, stop=100, count=3)), 50, 2)
    assert mixed == [0, 1, 5, 10, 50, 100]


def test_measures_with_modes_have_distinct_labels(tmp_path):
    """The monitor's rows for SVCCA against the final checkpoint and between layers must differ."""
    from runner.studies.training.plan import make_tasks

    study = load_training_spec(tiny_spec(tmp_path))
    labels = {t.label for t in make_tasks(study, 10, "corpus")[1] if t.kind == "svcca" and t.checkpoint == 1}
    assert {"svcca:final@1", "svcca:layers@1"} <= labels
