"""Scripting from the shell: plan --detailed-exitcode, show/figures/status --json, and the
documented override sweep (docs/steps_sweep.sh) run as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from . import launcher
from .helpers import maps_spec

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "maps.toml"
    path.write_text(textwrap.dedent(maps_spec("maps", steps=40, samples=4)))
    return path


def test_plan_detailed_exitcode_says_whether_there_is_work(in_process, spec):
    assert in_process("plan", spec, "--no-estimate", "--detailed-exitcode")[0] == 2  # work to do
    assert in_process("apply", spec, "-q")[0] == 0
    assert in_process("plan", spec, "--no-estimate", "--detailed-exitcode")[0] == 0  # nothing to do
    assert in_process("plan", spec, "--no-estimate")[0] == 0  # without the flag: 0 either way
    code, _, err = in_process("plan", ROOT / "specs" / "lstm_svcca.toml", "--no-estimate", "--detailed-exitcode")
    assert code == 66, err  # WikiText-2 is not cached here: requirements unmet


def test_show_status_and_figures_speak_json(in_process, spec, tmp_path):
    assert in_process("apply", spec, "-q")[0] == 0
    store = tmp_path / "store" / "maps.zarr"
    code, out, _ = in_process("show", store, "--json")
    shown = json.loads(out)
    assert code == 0 and shown["store"] == str(store)
    lam = next(r for r in shown["results"] if r["variable"] == "lyapunov_per_step")["per_network"]["logistic"]
    assert lam == pytest.approx(0.69, abs=0.05)  # the logistic map at r = 4: ln 2 per step
    assert {"name": "lyapunov_per_step", "units": "1"}.items() <= next(
        v for v in shown["variables"] if v["name"] == "lyapunov_per_step").items()
    assert len(shown["tasks"]) == 8 and shown["provenance"]["spec_sha256"]
    code, out, _ = in_process("status", store, "--json")
    tasks = json.loads(out)["tasks"]
    assert all(t["state"] in ("done", "n/a") and t["step"] == t["steps"] for t in tasks)
    # a task's network and checkpoint as plan --json gives them: the label, null without a checkpoint
    planned = {t["id"]: t for t in json.loads(in_process("plan", spec, "--no-estimate", "--json")[1])["tasks"]}
    assert [(t["network"], t["checkpoint"]) for t in tasks] == [(planned[t["id"]]["network"],
                                                                planned[t["id"]]["checkpoint"]) for t in tasks]
    assert {t["network"] for t in tasks} >= {"logistic"} and {t["checkpoint"] for t in tasks} == {None}
    assert [t["network_index"] for t in tasks] == sorted(t["network_index"] for t in tasks)
    assert any(t["steps"] > 0 for t in tasks)
    code, out, _ = in_process("figures", store, "--json")
    figs = json.loads(out)
    drawn = [f for f in figs["figures"] if f["status"] == "drawn"]
    assert code == 0 and drawn and all(f["reason"] for f in figs["figures"] if f["status"] == "skipped")
    assert all((Path(figs["out"]) / name).is_file() for f in drawn for name in f["files"])


@pytest.mark.slow
def test_the_documented_sweep_script_runs_branches_and_reads_json(spec, tmp_path, tmp_path_factory):
    runner = launcher.command(tmp_path_factory.mktemp("bin"))  # each call forked from a warm server
    env = {**os.environ, "RUNNER": str(runner), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    run = lambda: subprocess.run(["bash", str(ROOT / "docs" / "steps_sweep.sh"), str(spec), "20"],  # noqa: E731
                                 cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    first = run()
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "store" / "steps_20.zarr").is_dir()
    assert "steps=20: mean lambda/step:" in first.stdout and "done already" not in first.stdout
    again = run()
    assert again.stdout.count("done already") == 1 and "steps=20: mean lambda/step:" in again.stdout, again.stdout
    default = subprocess.run(["bash", str(ROOT / "docs" / "steps_sweep.sh"), str(spec)], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=600)  # no step counts: 100 and 200
    assert default.returncode == 0, default.stderr
    assert "steps=100: mean lambda/step:" in default.stdout and "steps=200: mean lambda/step:" in default.stdout


def test_every_json_output_names_the_format_its_keys_are_stable_within(spec, tmp_path):
    """docs/json.md: keys are stable within a store_format; every --json document says which."""
    from runner.core.formats import STORE_FORMAT
    from tests.runner.helpers import run_cli

    assert run_cli("apply", spec, cwd=tmp_path).returncode == 0
    assert run_cli("apply", spec, "--set", "dynamics.steps=30", "--replace", cwd=tmp_path).returncode == 0  # a version
    store = tmp_path / "store" / "maps.zarr"
    for args in (["plan", spec, "--no-estimate"], ["status", store], ["show", store], ["verify", store],
                 ["history", store], ["figures", store, "--only", "fig2c"]):
        out = run_cli(*args, "--json", cwd=tmp_path)
        assert out.returncode == 0, (args, out.stderr)
        docs = json.loads(out.stdout)
        docs = docs if isinstance(docs, list) else [docs]
        assert docs and all(d["store_format"] == STORE_FORMAT for d in docs), args
