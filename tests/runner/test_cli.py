"""The command line as a new user meets it, in subprocesses: one exit-code convention for every
command, no traceback on a closed pipe, a missing store or an absent device, and every shipped
spec planned offline."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

from tests.runner.helpers import RUNNER, cli_env, maps_spec, run_cli, write_spec


@pytest.fixture
def fresh_interpreter(monkeypatch):
    """A user's first commands start as theirs do, ``python -m runner.cli`` in a fresh interpreter
    (the other commands here, as elsewhere in the suite, are forked from a warm one:
    tests/runner/launcher.py; the closed-pipe tests start ``RUNNER`` themselves)."""
    monkeypatch.setenv("TRANSIENT_TEST_FRESH", "1")

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(ROOT.glob("specs/**/*.toml"))
NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")


@pytest.mark.usefixtures("fresh_interpreter")
def test_version_and_usage(tmp_path):
    version = run_cli("--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("runner ")
    assert run_cli(cwd=tmp_path).returncode == 2
    assert run_cli("plan", cwd=tmp_path).returncode == 2  # missing argument
    assert run_cli("apply", "x.toml", "--frobnicate", cwd=tmp_path).returncode == 2
    unknown = run_cli("explain", "nope", cwd=tmp_path)
    assert unknown.returncode == 2 and "unknown name 'nope'" in unknown.stderr and "Traceback" not in unknown.stderr


@pytest.mark.usefixtures("fresh_interpreter")
def test_help_documents_the_exit_codes(tmp_path):
    text = run_cli("--help", cwd=tmp_path).stdout
    for code in ("0 ", "1 ", "2 ", "65", "66", "74", "75", "130"):
        assert f"\n  {code}" in text, code


@pytest.mark.usefixtures("fresh_interpreter")
@pytest.mark.parametrize("command", ["status", "show"])
def test_status_and_show_of_a_missing_store(tmp_path, command):
    result = run_cli(command, tmp_path / "store/nothing.zarr", cwd=tmp_path)
    assert result.returncode == 66 and "no such store" in result.stderr and not result.stdout
    spec = write_spec(tmp_path, maps_spec("absent"))
    result = run_cli(command, spec, cwd=tmp_path)
    assert result.returncode == 66 and f"runner apply {spec}" in result.stderr


@NO_CUDA
def test_a_device_this_machine_lacks(tmp_path):
    spec = write_spec(tmp_path, maps_spec("dev", steps=20))
    flag = run_cli("apply", spec, "--device", "cuda", cwd=tmp_path)
    assert flag.returncode == 2 and "CUDA is not available on this machine; valid here: auto, cpu" in flag.stderr
    assert run_cli("apply", spec, "--device", "gpu", cwd=tmp_path).returncode == 2
    assert not (tmp_path / "store").exists()

    cuda = write_spec(tmp_path, maps_spec("dev", steps=20).replace('precision = "fp64"', 'precision = "fp64"\ndevice = "cuda"'))
    plan = run_cli("plan", cuda, cwd=tmp_path)
    assert plan.returncode == 0 and "requirements not met here" in plan.stdout and "[dynamics] device" in plan.stdout
    apply = run_cli("apply", cuda, cwd=tmp_path)
    assert apply.returncode == 66 and "[dynamics] device: device 'cuda': CUDA is not available" in apply.stderr
    assert not (tmp_path / "store").exists()
    # the flag overrides what the spec asks for
    assert run_cli("apply", cuda, "--device", "cpu", cwd=tmp_path).returncode == 0


def test_a_store_outside_the_working_directory_is_announced(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    outside = tmp_path / "elsewhere" / "out.zarr"
    spec = write_spec(work, maps_spec("out", steps=20).replace('store = "store/out.zarr"', f'store = "{outside}"'))
    plan = run_cli("plan", spec, cwd=work)
    assert f"store {outside} (outside the working directory" in " ".join(plan.stdout.split())
    apply = run_cli("apply", spec, cwd=work)
    assert apply.returncode == 0 and "outside the working directory" in apply.stderr
    assert (outside / "zarr.json").exists()


def test_apply_refuses_a_folder_that_is_not_a_store_and_keeps_it(tmp_path):
    results = tmp_path / "results"
    (results / "sub").mkdir(parents=True)
    (results / "notes.txt").write_text("k\n")
    (results / ".env").write_text("SECRET=1\n")
    spec = write_spec(tmp_path, maps_spec("x", steps=20).replace('store = "store/x.zarr"', 'store = "results"'))
    for command in ("plan", "apply"):
        result = run_cli(command, spec, cwd=tmp_path)
        assert result.returncode == 65, result.stderr
        assert "results exists and is not a store of this project (it holds 3 entries" in result.stderr
    assert sorted(p.name for p in results.iterdir()) == [".env", "notes.txt", "sub"]
    assert (results / "notes.txt").read_text() == "k\n" and (results / ".env").read_text() == "SECRET=1\n"


# ---------------------------------------------------------------------- closed pipes


@pytest.fixture(scope="module")
def big_store(tmp_path_factory):
    """A store with 300 networks: every listing of it is larger than a pipe's buffer."""
    root = tmp_path_factory.mktemp("big")
    spec = write_spec(root, maps_spec("big", steps=2, samples=2, n=4, measures="""
        [[measure]]
        kind = "lyapunov"
        k = 1e-8
        tau = 1
        [[measure]]
        kind = "transient_chaos"
        [[measure]]
        kind = "effective_dimension"
        [[measure]]
        kind = "token_deviation"
        """).replace('params = { g = 0.5, n = 4 }', 'params = { g = 0.5, n = 4 }\nreplicates = 300'))
    assert run_cli("apply", spec, "-q", cwd=root).returncode == 0
    return root, spec


@pytest.mark.parametrize("args", [("plan", "SPEC"), ("plan", "SPEC", "--json"), ("status", "STORE"),
                                  ("status", "STORE", "--json"), ("show", "STORE")], ids=" ".join)
def test_output_into_a_closed_pipe(big_store, args):
    """`runner plan | head -1`: the reader goes away after one line; no traceback, exit 0."""
    root, spec = big_store
    argv = [str(spec) if a == "SPEC" else str(root / "store/big.zarr") if a == "STORE" else a for a in args]
    proc = subprocess.Popen([*RUNNER, *argv], cwd=root, env=cli_env(root), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()  # like `head -1`: the rest would block, then meet a closed pipe
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert first.strip()
    assert proc.returncode == 0 and err == "", err


# ---------------------------------------------------------------------- every shipped spec, offline


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT / "specs")))
def test_every_shipped_spec_plans_offline_and_apply_names_what_is_missing(path, tmp_path, in_process):
    code, out, err = in_process("plan", path, "--json", "--no-estimate")  # the hub is switched off
    assert code == 0, err
    result = json.loads(out)
    assert result.get("tasks") or all(p["tasks"] for p in result.get("points", [])), "the plan shows the tasks"
    code, text, err = in_process("plan", path)  # with its estimate, as a user first plans
    assert code == 0 and "Traceback" not in err and "estimate" in text
    if not result["unmet"]:
        return
    assert "requirements not met here" in text
    said, unwrapped = " ".join(text.split()), lambda s: " ".join(s.split())  # noqa: E731
    for requirement in result["unmet"]:
        assert {"kind", "where", "name", "reason", "fix", "detail"} <= set(requirement)
        assert unwrapped(requirement["reason"]) in said
    code, _, err = in_process("apply", path)
    assert code == 66, err
    assert all(unwrapped(r["reason"]) in " ".join(err.split()) for r in result["unmet"])
    assert not (tmp_path / "store").exists(), "nothing is computed or created before the requirements are met"


def test_a_store_of_an_older_format_says_what_to_do(tmp_path):
    """store_format 2 made `network` an index of labels; a store written before is not written to."""
    spec = write_spec(tmp_path, maps_spec("old", steps=20))
    assert run_cli("apply", spec, cwd=tmp_path).returncode == 0
    meta = tmp_path / "store/old.zarr/zarr.json"
    data = json.loads(meta.read_text())
    del data["attributes"]["store_format"]  # as the runner wrote it before format 2
    meta.write_text(json.dumps(data))
    for command in ("plan", "apply"):
        result = run_cli(command, spec, cwd=tmp_path)
        assert result.returncode == 65, result.stderr
        assert "written by an older runner (store format 1" in result.stderr
        assert f"mv {Path('store/old.zarr')} store/old.zarr.v1" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("name", ["pythia_svcca.toml", "multiberts_seeds.toml", "transject_imdb.toml", "scaffold.toml",
                                  "quickstart.toml"])
def test_plan_fits_an_80_column_terminal_and_groups_alike_requirements(name, in_process, monkeypatch):
    """Lines wrap under their text column; twenty revisions missing alike are one requirement; a
    library's own message is left to --verbose."""
    monkeypatch.setenv("COLUMNS", "80")
    code, text, err = in_process("plan", ROOT / "specs" / name, "--no-estimate")
    assert code == 0, err
    assert all(len(line) <= 80 or len(line.split()) == 1 for line in text.splitlines()), text  # a long path
    if name == "pythia_svcca.toml":
        said = " ".join(text.split())
        assert "[[model]] pythia-160m EleutherAI/pythia-160m: 20 checkpoints (step0, step1, step2 and 17 more): not in the Hugging Face" in said
        assert "revision step8" not in said
    if name in ("pythia_svcca.toml", "multiberts_seeds.toml"):  # a hub corpus: one clean line, no library words
        assert "is not in the datasets cache and the hub is switched off (HF_HUB_OFFLINE=1)" in " ".join(text.split())
        assert "ConnectionError" not in text and "OfflineModeIsEnabled" not in text
    if name == "multiberts_seeds.toml":  # one repository per checkpoint: grouped by the series (was 444 lines)
        said = " ".join(text.split())
        for seed in range(5):
            assert (f"[[model]] multiberts-s{seed} google/multiberts-seed_{seed}-step_{{revision}}: 20 checkpoints "
                    "(0k, 20k, 40k and 17 more): not in the Hugging Face cache") in said
        assert "revision 20k" not in said and len(text.splitlines()) < 80
    if name == "transject_imdb.toml":
        assert "OSError" not in text  # transformers' words: with --verbose
        code, verbose, _ = in_process("plan", ROOT / "specs" / name, "--no-estimate", "--verbose")
        assert "OSError" in verbose and all(len(line) <= 80 or len(line.split()) == 1 for line in verbose.splitlines())
