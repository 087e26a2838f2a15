"""``status`` believes the completion records, not old ``task_done`` events (issue 36)."""

from __future__ import annotations

import json
import shutil

from tests.runner.helpers import maps_spec, run_cli, write_spec


def _status(spec, cwd) -> dict:
    out = run_cli("status", spec, "--json", cwd=cwd)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_tasks_whose_records_are_gone_are_not_done(tmp_path):
    spec = write_spec(tmp_path, maps_spec("gone", steps=30, samples=4))
    assert run_cli("apply", spec, cwd=tmp_path).returncode == 0
    finished = _status(spec, tmp_path)
    assert finished["state"] == "done" and all(t["state"] in ("done", "n/a") for t in finished["tasks"])
    shutil.rmtree(tmp_path / "store" / "gone.runner" / "records")
    after = _status(spec, tmp_path)
    assert after["state"] == "damaged"  # the manifest lists them as finished: their records are missing
    assert not any(t["state"] in ("done", "n/a") for t in after["tasks"]), after["tasks"]
    last = run_cli("status", spec, cwd=tmp_path).stdout.splitlines()[-1]
    assert last.startswith("0/") and "tasks done" in last, last  # never "N/N tasks done" from old events
    assert run_cli("apply", spec, "--replace", cwd=tmp_path).returncode == 0  # values without records: consent
    # to recompute them, then status agrees again
    assert _status(spec, tmp_path)["state"] == "done"


def test_status_without_the_manifest_either_is_not_done(tmp_path):
    """Records and manifest gone (the run folder but its event log): the old ``task_done`` events
    never make the tasks done again."""
    spec = write_spec(tmp_path, maps_spec("gone", steps=30, samples=4))
    assert run_cli("apply", spec, cwd=tmp_path).returncode == 0
    state = tmp_path / "store" / "gone.runner"
    shutil.rmtree(state / "records")
    (state / "manifest.json").unlink()
    after = _status(spec, tmp_path)
    assert after["state"] == "damaged"  # the manifest its version was written with is gone (issue 48)
    assert not any(t["state"] in ("done", "n/a") for t in after["tasks"]), after["tasks"]
    last = run_cli("status", spec, cwd=tmp_path).stdout.splitlines()[-1]
    assert last.startswith("0/") and "tasks done" in last, last


def test_show_fits_an_80_column_terminal(tmp_path):
    """show, as plan, wraps at words under each line's text column (it wrote lines of 265 columns)."""
    spec = write_spec(tmp_path, maps_spec("wide", steps=30, samples=4))
    assert run_cli("apply", spec, cwd=tmp_path).returncode == 0
    shown = run_cli("show", tmp_path / "store" / "wide.zarr", cwd=tmp_path, COLUMNS="80")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert all(len(line) <= 80 or len(line.split()) == 1 for line in lines), shown.stdout
    # a variable's dims go on under its column; nothing is lost to the wrapping
    at = next(i for i, line in enumerate(lines) if line.startswith("  lyapunov_per_step "))
    assert lines[at].index("(network") == 27 and "mean lambda/step" in shown.stdout


def test_fit_wraps_under_the_text_column_and_keeps_a_long_word():
    from runner.read.status import fit

    assert fit(["  label    " + "word " * 20], 40) == ["  label    word word word word word word", *[
        "           word word word word word word"] * 2, "           word word"]
    assert fit(["dimensions: " + "x=1, " * 10], 30)[1].startswith("    x=1,")
    assert fit(["path: /" + "a" * 50], 30) == ["path:", "    /" + "a" * 50]


def test_show_gives_the_overrides_a_store_ran_with(tmp_path):
    """show's provenance is of the spec as it ran: the --set arguments, quoted to paste (issue 37)."""
    import shlex

    spec = write_spec(tmp_path, maps_spec("over", steps=30, samples=4))
    sets = ["--set", 'experiment.description="two words"', "--set", "dynamics.steps=20"]
    assert run_cli("apply", spec, *sets, cwd=tmp_path).returncode == 0
    shown = run_cli("show", tmp_path / "store" / "over.zarr", cwd=tmp_path, COLUMNS="200").stdout
    line = next(line for line in shown.splitlines() if line.startswith("overrides: "))
    assert shlex.split(line.removeprefix("overrides: ")) == sets
    plain = write_spec(tmp_path, maps_spec("plain", steps=30, samples=4), name="plain.toml")
    assert run_cli("apply", plain, cwd=tmp_path).returncode == 0
    assert "overrides:" not in run_cli("show", tmp_path / "store" / "plain.zarr", cwd=tmp_path).stdout
