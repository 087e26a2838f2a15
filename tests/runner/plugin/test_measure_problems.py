"""One hook, asked by the engine for every measure of every study: ``Measure.problems(view)``."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.checkpointed.measure import ActivationView
from runner.plugin.measures import measure_problems, measures
from runner.run.prepare import validate_spec
from runner.spec.specfile import SpecError
from tests.runner.helpers import run_cli

ROOT = Path(__file__).resolve().parents[3]
TINY = ROOT / "specs" / "tiny" / "lstm_tiny.toml"


def test_a_shared_measure_checks_a_training_spec_before_anything_runs(tmp_path):
    """entropy's k < N (components per token), written for TransJect, now runs on training specs too."""
    entropy = next(i for i, m in enumerate(validate_spec(TINY).measure) if m.kind == "entropy")
    with pytest.raises(SpecError) as err:
        validate_spec(TINY, [f"measure[{entropy}].k=20"])
    assert "k = 20 needs more than 20 samples, but a token of [[model]] 'lm' (its 16 components) gives 16" \
        in str(err.value)
    out = run_cli("plan", TINY, "--set", f"measure[{entropy}].k=20", cwd=tmp_path)
    assert out.returncode == 65 and "--set measure" in out.stderr and "k = 20" in out.stderr, out.stderr


def test_problems_are_located_in_the_measure_table():
    spec = validate_spec(TINY)
    entropy = next(i for i, m in enumerate(spec.measure) if m.kind == "entropy")
    found = dict(measure_problems("training", spec, ActivationView(networks=("lm",), token_widths=(("a token", 2),))))
    assert "k = 3 needs more than 3 samples, but a token gives 2" in found["measure", entropy, "k"]
    renamed = dict(measure_problems("training", spec, ActivationView(networks=("other",))))
    unknown = [loc for loc, message in renamed.items() if loc[2] == "networks" and "no [[model]] named ['lm']" in message]
    assert unknown and all(spec.measure[loc[1]].networks == ["lm"] for loc in unknown)


def test_the_training_session_asks_again_once_it_has_the_analysis_sentence(tmp_path):
    """distances' pairs cannot be checked against a training corpus' sentence before it is read; the
    session asks every measure again with it (``view.knowing``) and refuses before training."""
    distances = next(i for i, m in enumerate(validate_spec(TINY).measure) if m.kind == "distances")
    out = run_cli("apply", TINY, "--set", f'measure[{distances}].pairs=[["the", "nosuchword"]]', cwd=tmp_path)
    assert out.returncode == 65 and "pairs" in out.stderr and "nosuchword" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "store" / "lstm_tiny.runner" / "checkpoints").exists()  # nothing trained
