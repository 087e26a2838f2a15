"""Typos get a suggestion: commands, names for explain, measure kinds, spec files and store paths;
a missing spec or store exits 66, and monitor waits only for a store a spec here plans."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runner.helpers import run_cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def here(tmp_path, in_process):
    shutil.copy(ROOT / "specs" / "tiny" / "lstm_tiny.toml", tmp_path / "lstm_tiny.toml")
    return tmp_path


def test_an_unknown_command_suggests_the_likely_one():
    out = subprocess.run([sys.executable, "-m", "runner.cli", "aply", "x.toml"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2
    assert out.stderr.startswith("error: unknown command 'aply' (did you mean 'apply'?); commands: plan, apply")


def test_explain_suggests_the_likely_name(in_process):
    code, _, err = in_process("explain", "lyapunv")
    assert code == 2 and "unknown name 'lyapunv' (did you mean 'lyapunov'?)" in err
    code, _, err = in_process("explain", "dynamcs")
    assert code == 2 and "(did you mean 'dynamics'?)" in err


def test_an_unknown_measure_kind_suggests_the_likely_one(here, in_process):
    spec = here / "lstm_tiny.toml"
    spec.write_text(spec.read_text().replace('kind = "sparsity"', 'kind = "sparsty"', 1))
    code, _, err = in_process("plan", spec, "--no-estimate")
    assert code == 65, err
    assert "kind: unknown kind 'sparsty' (did you mean 'sparsity'?); known:" in err
    assert "Input tag" not in err  # not pydantic's words


def test_a_missing_spec_exits_66_and_names_the_likely_file(here, in_process):
    code, _, err = in_process("plan", "lstm_tny.toml")
    assert code == 66 and err == "error: lstm_tny.toml: no such spec file (did you mean 'lstm_tiny.toml'?)\n"
    code, _, err = in_process("apply", "nothing/at/all.toml")
    assert code == 66 and "no such spec file" in err and "did you mean" not in err


def test_a_mistyped_store_path_names_the_likely_store(here, in_process):
    assert in_process("apply", "lstm_tiny.toml", "-q")[0] == 0
    for command in ("status", "show", "monitor"):
        code, _, err = in_process(command, "store/lstm_tny.zarr")
        assert code == 66, (command, err)
        assert "store/lstm_tny.zarr: no such store" in err and "(did you mean 'store/lstm_tiny.zarr'?)" in err


def test_monitor_refuses_a_store_no_spec_plans(here, in_process):
    code, _, err = in_process("monitor", "store/elsewhere.zarr")
    assert code == 66 and "no spec here plans it" in err and "`runner monitor SPEC` waits" in err


def test_the_spec_that_plans_a_store_is_found_for_monitor_to_wait_on(here):
    from runner.cli import _spec_of_store

    assert _spec_of_store(Path("store/lstm_tiny.zarr")) == Path("lstm_tiny.toml")  # in_process: cwd is here
    assert _spec_of_store(Path("store/other.zarr")) is None


def test_a_mistyped_flag_suggests_the_likely_one(here):
    out = run_cli("apply", "lstm_tiny.toml", "--replce", cwd=here)
    assert out.returncode == 2  # a usage error, as argparse's own
    assert "runner apply: error: unrecognized argument --replce; did you mean --replace?" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_missing_spec_suggests_the_file_of_that_name_in_a_subfolder(tmp_path, in_process):
    (tmp_path / "specs" / "tiny").mkdir(parents=True)
    shutil.copy(ROOT / "specs" / "tiny" / "lstm_tiny.toml", tmp_path / "specs" / "tiny" / "lstm_tiny.toml")
    shutil.copy(ROOT / "specs" / "lstm_sparsity.toml", tmp_path / "specs" / "lstm_sparsity.toml")
    code, _, err = in_process("plan", "specs/lstm_tiny.toml")
    assert code == 66 and "(did you mean 'specs/tiny/lstm_tiny.toml'?)" in err


def test_an_unknown_kind_names_the_plugin_variable(here, in_process):
    spec = here / "lstm_tiny.toml"
    spec.write_text(spec.read_text().replace('kind = "sparsity"', 'kind = "my_lab_measure"', 1))
    code, _, err = in_process("plan", spec, "--no-estimate")
    assert code == 65 and "unknown kind 'my_lab_measure'" in err and "TRANSIENT_PLUGINS=MODULE" in err


def test_hints_repeat_the_program_as_invoked(here, in_process, monkeypatch):
    """A hint to run a command again names the program as typed (``.venv/bin/runner``), not ``runner``."""
    from runner.core.commandline import command

    monkeypatch.setattr(sys, "argv", [".venv/bin/runner", "status"])
    monkeypatch.setenv("PATH", "/nonexistent")
    assert command("apply", "x.toml") == ".venv/bin/runner apply x.toml"
    code, _, err = in_process("status", "lstm_tiny.toml")
    assert code == 66 and "(run `.venv/bin/runner apply lstm_tiny.toml`)" in err, err
    from runner.api import open as open_store  # hints beyond the CLI's own (issue 53)

    with pytest.raises(Exception, match=r"run `\.venv/bin/runner apply` on its spec first"):
        open_store(here / "store/nothing.zarr")
    monkeypatch.setattr(sys, "argv", ["/usr/lib/python3/runner/cli.py"])  # python -m runner.cli: runner
    assert command("apply", "x.toml") == "runner apply x.toml"
