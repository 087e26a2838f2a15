"""Spec parsing and validation: every error names the file, line, table and key, before compute."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.run.prepare import validate_spec
from runner.spec.specfile import SpecError

from tests.runner.helpers import maps_spec, run_cli, write_spec

SPECS = sorted(p for p in Path(__file__).resolve().parents[2].glob("specs/**/*.toml") if "[training]" not in p.read_text())


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.name)
def test_every_shipped_spec_validates(path):
    spec = validate_spec(path)
    assert spec.experiment.name


def test_defaults_are_the_papers_parameters(tmp_path):
    spec = validate_spec(write_spec(tmp_path, """
        [experiment]
        name = "d"
        [[model]]
        name = "m"
        source = "map:tanh"
        [[measure]]
        kind = "lyapunov"
        [[measure]]
        kind = "token_deviation"
        """))
    lyap, dev = spec.measure
    assert lyap.kind == "lyapunov" and (lyap.k, lyap.tau) == (None, 10)  # k: each network's, 1.0 for ALBERT
    assert dev.kind == "token_deviation" and dev.threshold == 1e-5
    assert (spec.input.samples, spec.input.tokens, spec.dynamics.steps) == (1000, 32, 500)
    assert spec.dynamics.precision == "fp32"


def _problems(tmp_path, text) -> list[str]:
    with pytest.raises(SpecError) as info:
        validate_spec(write_spec(tmp_path, text))
    return info.value.problems


BASE = """
[experiment]
name = "x"

[[model]]
name = "m"
source = "map:tanh"
"""


@pytest.mark.parametrize("measure, fragment", [
    ('kind = "lyapunov"\nk = 0', "[[measure]] #1 (lyapunov) k: Input should be greater than 0"),
    ('kind = "lyapunov"\ntau = 0', "[[measure]] #1 (lyapunov) tau: Input should be greater than or equal to 1"),
    ('kind = "lyapunov"\ntau = "ten"', "[[measure]] #1 (lyapunov) tau: Input should be a valid integer"),
    ('kind = "lyapunov"\ntua = 5', "[[measure]] #1 (lyapunov) tua: unknown key (did you mean 'tau'?)"),
    ('kind = "lyapunof"', "[[measure]] #1 (lyapunof)"),
    ('kind = "token_deviation"\nthreshold = -1', "threshold: Input should be greater than 0"),
])
def test_measure_errors_name_table_key_and_line(tmp_path, measure, fragment):
    problems = _problems(tmp_path, BASE + "\n[[measure]]\n" + measure + "\n")
    assert any(fragment in p for p in problems), problems
    assert all(p.startswith(str(tmp_path / "spec.toml") + ":") for p in problems)
    if "tau" in measure or " k = 0" in measure:
        line = int(problems[0].split(":")[1])
        assert (BASE + "\n[[measure]]\n" + measure).splitlines()[line - 1].split("=")[0].strip() in fragment


def test_tokens_below_two_and_unknown_table(tmp_path):
    problems = _problems(tmp_path, BASE + '[input]\ntokens = 1\n[dynamic]\nsteps = 3\n[[measure]]\nkind = "lyapunov"\n')
    assert any("[input] tokens: Input should be greater than or equal to 2" in p for p in problems)
    assert any("[dynamic]: unknown table (did you mean 'dynamics'?)" in p for p in problems)


def test_map_params_and_model_rules(tmp_path):
    problems = _problems(tmp_path, """
        [experiment]
        name = "x"
        [[model]]
        name = "a"
        source = "map:logistic"
        params = { r = -1 }
        [[model]]
        name = "b"
        source = "map:lorenz"
        [[measure]]
        kind = "transient_chaos"
        """)
    text = "\n".join(problems)
    assert "[[model]] #1 (a): params.r: Input should be greater than 0" in text
    assert "[[model]] #2 (b)" in text and "unknown map 'lorenz'" in text


def test_cross_table_rules(tmp_path):
    problems = _problems(tmp_path, BASE.replace('name = "m"', 'name = "m"\nreplicates = 0') + """
        [[model]]
        name = "m"
        source = "map:logistic"
        [[measure]]
        kind = "transient_chaos"
        """)
    assert any("replicates: Input should be greater than or equal to 1" in p for p in problems)
    problems = _problems(tmp_path, BASE + '[[model]]\nname = "m"\nsource = "map:logistic"\n[[measure]]\nkind = "transient_chaos"\n')
    assert any("model names must be unique" in p for p in problems)
    problems = _problems(tmp_path, BASE + '[[measure]]\nkind = "transient_chaos"\n')
    assert any("transient_chaos needs a lyapunov measure" in p for p in problems)


def test_missing_files_are_named(tmp_path):
    problems = _problems(tmp_path, """
        [experiment]
        name = "x"
        [[model]]
        name = "albert"
        source = "path:no/such/dir"
        [input]
        source = "no/such/file.txt"
        [[measure]]
        kind = "lyapunov"
        """)
    text = "\n".join(problems)
    assert "[[model]] #1 (albert) source: no such directory no/such/dir" in text
    assert "[input] source:" in text and "no/such/file.txt" in text


def test_invalid_toml_reports_position(tmp_path):
    problems = _problems(tmp_path, "[experiment\nname = 1\n")
    assert problems[0].startswith(f"{tmp_path / 'spec.toml'}:1:") and "invalid TOML" in problems[0]


def test_cli_rejects_bad_spec_before_compute(tmp_path):
    spec = write_spec(tmp_path, maps_spec("bad").replace("tau = 1", "tau = 0"))
    result = run_cli("apply", spec, cwd=tmp_path)
    assert result.returncode == 65
    assert "[[measure]] #1 (lyapunov) tau" in result.stderr
    assert not (tmp_path / "store").exists()


def test_checkpoint_interval_must_align_with_the_strides(tmp_path):
    text = BASE + '[dynamics]\nsteps = 100\ncheckpoint_every = 25\n[[measure]]\nkind = "lyapunov"\ntau = 10\n'
    (problem,) = _problems(tmp_path, text)
    line = int(problem.split(":")[1])
    assert text.splitlines()[line - 1].startswith("checkpoint_every")
    assert "[dynamics] checkpoint_every: 25 must be a multiple" in problem and "lcm is 10" in problem


def test_explain_prints_the_papers_defaults(capsys):
    from runner.cli import main

    assert main(["explain", "lyapunov"]) == 0
    out = capsys.readouterr().out
    assert "k = (per network: see below)" in out and "(paper: 1.0, for ALBERT's" in out and "tau = 10" in out and "Algorithm A1" in out
    assert main(["explain", "training"]) == 0
    out = capsys.readouterr().out
    assert "lr = 20.0" in out and "clip = 0.25" in out and "bptt = 35" in out


def test_coordinates_are_lazy_so_sizes_are_known_before_anything_is_allocated():
    """A run of 1e15 steps has a 1e15-step axis: its layout is built (and refused) without allocating it."""
    from runner.studies.depth.layout import build_layout
    from runner.studies.depth.resolve import resolve

    spec = validate_spec(Path(__file__).resolve().parents[2] / "specs" / "reference_maps.toml")
    spec = spec.model_copy(update={"dynamics": spec.dynamics.model_copy(update={"steps": 10**15})})
    layout = build_layout(spec, resolve(spec)[0])  # an allocated axis of 1e15 steps would not fit in memory
    assert layout.nbytes()["lyapunov"] == 6 * 64 * 10**15 * 8  # its maps run in fp64, and keep lambda in fp64
