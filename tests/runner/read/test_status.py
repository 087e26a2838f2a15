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
    assert after["state"] == "incomplete"
    assert not any(t["state"] in ("done", "n/a") for t in after["tasks"]), after["tasks"]
    last = run_cli("status", spec, cwd=tmp_path).stdout.splitlines()[-1]
    assert last.startswith("0/") and "tasks done" in last, last
