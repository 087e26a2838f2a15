"""``--set KEY=VALUE`` on plan and apply: values validated as the file's, errors that name the
override, sweep axes refused, and the overrides kept in the store's provenance."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import xarray as xr

from runner.spec.overrides import OverrideError, parse

from tests.runner.helpers import maps_spec


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "maps.toml"
    path.write_text(textwrap.dedent(maps_spec("maps", steps=60, samples=4)))
    return path


def test_keys_and_values_are_read_as_toml():
    assert parse("dynamics.steps=1000").path == ("dynamics", "steps")
    assert parse("dynamics.steps=1000").value == 1000
    assert parse("model[0].params.g=1.5").path == ("model", 0, "params", "g")
    assert parse("measure[2].k=1e-8").value == 1e-8
    assert parse("dynamics.device=cpu").value == "cpu"  # a bare word is a string
    assert parse('experiment.description="two words"').value == "two words"
    assert parse("dynamics.precisions=[\"fp32\", \"fp64\"]").value == ["fp32", "fp64"]
    assert parse("x.flag=true").value is True
    for bad in ("steps", "=3", "dynamics..steps=3", "model[x].seed=1", "a.b=two words"):
        with pytest.raises(OverrideError):
            parse(bad)


def test_plan_shows_and_resolves_the_overrides(in_process, spec):
    code, out, err = in_process("plan", spec, "--no-estimate", "--set", "dynamics.steps=40",
                                "--set", "model[0].replicates=2")
    assert code == 0, err
    assert "overrides  --set dynamics.steps=40 --set model[0].replicates=2" in out
    code, out, err = in_process("plan", spec, "--no-estimate", "--json", "--set", "dynamics.steps=40",
                                "--set", "model[0].replicates=2")
    plan = json.loads(out)
    assert plan["overrides"] == ["dynamics.steps=40", "model[0].replicates=2"]
    assert plan["resolved"]["dynamics"]["steps"] == 40 and plan["resolved"]["model"][0]["replicates"] == 2
    _, plain, _ = in_process("plan", spec, "--no-estimate", "--json")
    assert json.loads(plain)["spec_sha256"] != plan["spec_sha256"]  # another spec, other task ids
    assert {t["id"] for t in json.loads(plain)["tasks"]}.isdisjoint(t["id"] for t in plan["tasks"])


@pytest.mark.parametrize("override, code, message", [
    ("dynamics.steps=abc", 65, "--set dynamics.steps=abc: [dynamics] steps: Input should be a valid integer"),
    ("dynamics.steps=-5", 65, "--set dynamics.steps=-5: [dynamics] steps:"),
    ("dynamics.stepz=5", 65, "--set dynamics.stepz=5: [dynamics] stepz: unknown key (did you mean 'steps'?)"),
    ("model[9].seed=1", 2, "--set model[9].seed=1: model[9]: the spec has 2 such entries (indices from 0)"),
    ("dynamics.steps.x=1", 2, "--set dynamics.steps.x=1: dynamics.steps is a value, not a table"),
    ("model.seed=1", 2, "--set model.seed=1: model is an array; give an index"),
    ("steps", 2, "--set steps: expected KEY=VALUE"),
])
def test_a_bad_override_is_one_message_that_names_it(in_process, spec, override, code, message):
    got, out, err = in_process("plan", spec, "--no-estimate", "--set", override)
    assert got == code, (out, err)
    assert err.startswith("error: ") and message in err and "Traceback" not in err, err
    if code == 65:
        assert err.startswith(f"error: {spec}: --set {override}:")


def test_a_sweep_axis_cannot_be_overridden(in_process, spec):
    spec.write_text(spec.read_text() + "\n[sweep.dynamics]\nsteps = [40, 60]\n")
    code, _, err = in_process("plan", spec, "--no-estimate", "--set", "dynamics.steps=30")
    assert code == 2 and "dynamics.steps is an axis of the sweep ([sweep.dynamics] steps = [40, 60])" in err, err
    code, out, err = in_process("plan", spec, "--no-estimate", "--set", "input.samples=2")
    assert code == 0 and "overrides  --set input.samples=2" in out, err  # another key of a swept spec


def test_a_nested_sweep_axis_cannot_be_overridden(in_process, tmp_path):
    """[sweep.corpus.scaffold] rules sweeps [corpus.scaffold] rules (specs/scaffold_rules.toml)."""
    from tests.training.training_helpers import ROOT

    spec = tmp_path / "rules.toml"
    spec.write_text((ROOT / "specs" / "scaffold_rules.toml").read_text())
    code, _, err = in_process("plan", spec, "--no-estimate", "--set", "corpus.scaffold.rules=50")
    assert code == 2 and ("corpus.scaffold.rules is an axis of the sweep ([sweep.corpus.scaffold] rules = "
                          "[100, 300, 1000, 3000, 10000])") in err, err
    code, out, err = in_process("plan", spec, "--no-estimate", "--set", "corpus.scaffold.phrases=50")
    assert code == 0 and "overrides  --set corpus.scaffold.phrases=50" in out, err


def test_apply_runs_the_overridden_spec_and_keeps_the_overrides(in_process, spec, tmp_path):
    code, _, err = in_process("apply", spec, "-q", "--set", "dynamics.steps=40")
    assert code == 0, err
    ds = xr.open_zarr(tmp_path / "store" / "maps.zarr")
    assert ds.sizes["lyapunov_step"] == 40 and ds.sizes["deviation_step"] == 41
    prov = json.loads(ds.attrs["runner"]) if isinstance(ds.attrs["runner"], str) else ds.attrs["runner"]
    assert prov["overrides"] == ["dynamics.steps=40"]
    assert "steps = 60" in prov["spec_toml"]  # the file as it was, and what changed it
    code, _, err = in_process("apply", spec, "-q", "--set", "dynamics.steps=40")
    assert code == 0  # nothing to do
    code, _, err = in_process("apply", spec, "-q")  # without it: other parameters, finished results kept
    assert code == 77, err


def test_a_hint_to_run_again_keeps_the_overrides_quoted_to_paste(capsys):
    import shlex
    from types import SimpleNamespace

    from runner.cli import report_outcome
    from runner.core.commandline import command

    line = command("apply", Path("my specs/x.toml"), ['experiment.name="a b"', "dynamics.steps=80"], "--replace")
    assert shlex.split(line) == ["runner", "apply", "my specs/x.toml", "--set", 'experiment.name="a b"', "--set",
                                 "dynamics.steps=80", "--replace"]
    code = report_outcome(SimpleNamespace(interrupted=True), Path("x.toml"), Path("store/a.zarr"), ["dynamics.steps=80"])
    assert code == 130 and "to resume, run:\n  runner apply x.toml --set dynamics.steps=80\n" in capsys.readouterr().err


def test_the_hint_to_resume_breaks_no_path_at_80_columns(capsys, monkeypatch):
    """The lead wraps at words; the command to paste is a line of its own (a terminal broke the path
    of a one-line hint mid-word at 80 columns)."""
    import shlex
    from types import SimpleNamespace

    from runner.cli import report_outcome

    monkeypatch.setenv("COLUMNS", "80")
    spec, store = Path("experiments/2026/a-rather-long-folder-name/x.toml"), Path("/data/lab/stores/depth_long.zarr")
    report_outcome(SimpleNamespace(interrupted=True), spec, store, ["dynamics.steps=80"])
    lines = capsys.readouterr().err.splitlines()
    assert all(len(line) <= 80 for line in lines[:-1]) and f"{store};" in lines[0].split() + lines[1].split()
    assert shlex.split(lines[-1]) == ["runner", "apply", str(spec), "--set", "dynamics.steps=80"]
