"""Nothing finished is lost without consent: an edited spec shows what it changes, apply refuses to
replace finished results unless asked, and the store as it was stays readable in its history."""

from __future__ import annotations

import json
import re
import shutil
import signal
from pathlib import Path

import pytest
import xarray as xr

from runner.storage.history import history_dir, versions
from runner.storage.store import read_tasks, runner_dir
from tests.runner.helpers import maps_spec, popen_cli, run_cli, wait_for, write_spec

#: An edit of each kind of parameter, and how plan names it.
EDITS = {
    "dynamics": (("steps = 40", "steps = 50"), "steps: 40 -> 50"),
    "measure": (("every = 10", "every = 5"), "every: 10 -> 5"),
    "model": (("g = 0.5", "g = 0.6"), "model.params.g: 0.5 -> 0.6"),
    "input": (("samples = 8", "samples = 6"), "input.samples: 8 -> 6"),
}


def spec_text(name: str = "r") -> str:
    return maps_spec(name, steps=40, samples=8, n=8)


def _data(path: Path) -> xr.Dataset:
    return xr.open_zarr(path, consolidated=False).load().drop_attrs()


@pytest.fixture
def applied(in_process, tmp_path):
    """A finished store of ``spec_text()`` in ``tmp_path``: (spec, store)."""
    spec = write_spec(tmp_path, spec_text())
    code, _, err = in_process("apply", spec, "-q")
    assert code == 0, err
    return spec, tmp_path / "store/r.zarr"


@pytest.mark.parametrize("kind", sorted(EDITS))
def test_an_edited_parameter_is_named_refused_and_replaced_only_when_asked(kind, applied, in_process, tmp_path):
    spec, store = applied
    before, records = _data(store), read_tasks(store)
    (old, new), named = EDITS[kind]
    spec.write_text(spec.read_text().replace(old, new))

    code, out, _ = in_process("plan", spec, "--no-estimate")
    assert code == 0 and f"replace: {named}" in out, out
    assert "apply refuses without --replace" in out
    plan = json.loads(in_process("plan", spec, "--json", "--no-estimate")[1])
    assert plan["replace"] and all(named in r["changes"] for r in plan["replace"])

    code, _, err = in_process("apply", spec, "-q")
    assert code == 77 and named in err and "--replace" in err and "Traceback" not in err
    xr.testing.assert_identical(_data(store), before)  # refused: nothing touched
    assert read_tasks(store) == records

    code, _, err = in_process("apply", spec, "-q", "--replace")
    assert code == 0, err
    (version,) = versions(store)
    assert version.store.parent.parent == history_dir(store)
    xr.testing.assert_identical(_data(version.store), before)  # the old results, readable as they were
    assert version.manifest["records"] == records
    assert all(named in r["changes"] for r in version.manifest["replaced"])
    assert "Plan: 0 to run, 8 done" in in_process("plan", spec, "--no-estimate")[1]


def test_a_replaced_store_equals_a_fresh_run_and_a_new_network_keeps_the_others(tmp_path):
    spec = write_spec(tmp_path, spec_text())
    assert run_cli("apply", spec, cwd=tmp_path).returncode == 0
    store = tmp_path / "store/r.zarr"
    spec.write_text(spec.read_text().replace("steps = 40", "steps = 50"))
    assert run_cli("apply", spec, "--replace", cwd=tmp_path).returncode == 0
    other = tmp_path / "other"
    other.mkdir()
    assert run_cli("apply", write_spec(other, spec.read_text()), cwd=other).returncode == 0
    xr.testing.assert_identical(_data(store), _data(other / "store/r.zarr"))

    # a network added in the middle: nothing finished is replaced, the others' values stay as they were
    before = _data(store)
    spec.write_text(re.sub(r'(\[\[model\]\]\s*name = "tanh")', '[[model]]\nname = "henon"\nsource = "map:henon"\n\n\\1',
                           spec.read_text()))
    plan = run_cli("plan", spec, "--no-estimate", cwd=tmp_path)
    said = [line.strip() for line in plan.stdout.splitlines() if not line.startswith(("store", " "))]  # no path
    assert not any("replace" in line for line in said) and "Plan: 4 to run, 8 done" in plan.stdout, plan.stdout
    added = run_cli("apply", spec, cwd=tmp_path)
    assert added.returncode == 0 and "ran 4 task(s), 8 already done" in added.stdout, added.stderr
    after = _data(store)
    assert list(after.network.values) == ["logistic", "henon", "tanh"]
    for name in ("lyapunov", "deviation", "effective_dimension", "chaos_length"):
        xr.testing.assert_identical(after[name].sel(network=["logistic", "tanh"]).drop_vars(["model", "replicate"]),
                                    before[name].drop_vars(["model", "replicate"]))
    assert len(versions(store)) == 1  # only the replace above kept a version


def test_a_network_taken_out_is_dropped_only_when_asked(applied, in_process):
    spec, store = applied
    before = _data(store)
    without = re.sub(r'\[\[model\]\]\s*name = "tanh".*?(?=\[input\])', "", spec.read_text(), flags=re.S)
    spec.write_text(without)
    code, out, _ = in_process("plan", spec, "--no-estimate")  # nothing to run: nothing is dropped
    assert code == 0 and "keep      tanh:" in out and "Plan: 0 to run, 4 done" in out, out
    assert in_process("apply", spec, "-q")[0] == 0
    xr.testing.assert_identical(_data(store), before)
    spec.write_text(without.replace("[input]", '[[model]]\nname = "henon"\nsource = "map:henon"\n\n[input]'))
    code, out, _ = in_process("plan", spec, "--no-estimate")
    assert "drop      tanh:" in out and "network no longer in the spec" in out, out
    code, _, err = in_process("apply", spec, "-q")
    assert code == 77 and "drop tanh:" in err
    code, _, err = in_process("apply", spec, "-q", "--replace")
    assert code == 0, err
    assert list(_data(store).network.values) == ["logistic", "henon"]
    (version,) = versions(store)
    xr.testing.assert_identical(_data(version.store), before)
    assert {d["network"] for d in version.manifest["dropped"]} == {"tanh"}


def test_the_spec_can_allow_replacing_and_history_removes_only_when_told(applied, in_process):
    spec, store = applied
    spec.write_text(spec.read_text().replace("steps = 40", "steps = 50").replace(
        'store = "store/r.zarr"', 'store = "store/r.zarr"\nreplace = true'))
    assert in_process("apply", spec, "-q")[0] == 0
    (version,) = versions(store)
    code, out, _ = in_process("history", store)
    assert code == 0 and version.name in out and "steps: 40 -> 50" in out
    listed = json.loads(in_process("history", spec, "--json")[1])
    assert [v["name"] for v in listed] == [version.name]
    code, _, err = in_process("history", store, "--remove", "no-such-version")
    assert code == 66 and version.name in err
    code, out, _ = in_process("history", store, "--remove", version.name)
    assert code == 0 and not versions(store) and not version.store.exists()
    assert store.exists()


def test_a_store_whose_records_are_gone_is_not_overwritten(applied, in_process):
    spec, store = applied
    before = _data(store)
    shutil.rmtree(runner_dir(store))  # a user cleaning up, or the store copied without it
    code, _, err = in_process("apply", spec, "-q")
    assert code == 77 and "records" in err and "are missing" in err
    xr.testing.assert_identical(_data(store), before)
    assert in_process("apply", spec, "-q", "--replace")[0] == 0
    assert len(versions(store)) == 1 and len(read_tasks(store)) == 8


@pytest.mark.slow
@pytest.mark.parametrize("point", [1, 2])
def test_kill_9_during_a_replace_loses_nothing(point, tmp_path):
    """Killed after the old store was kept (1) or after its records went (2): the version is whole,
    and applying again finishes the replace with the store an uninterrupted replace gives."""
    spec = write_spec(tmp_path, spec_text())
    assert run_cli("apply", spec, cwd=tmp_path).returncode == 0
    store = tmp_path / "store/r.zarr"
    before = _data(store)
    spec.write_text(spec.read_text().replace("every = 10", "every = 5"))
    proc = popen_cli("apply", spec, "--replace", "-q", cwd=tmp_path, RUNNER_TEST_STALL=f"replace@{point}")
    wait_for(lambda: (runner_dir(store) / "stalled").exists(), proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    (version,) = versions(store)
    xr.testing.assert_identical(_data(version.store), before)
    again = run_cli("apply", spec, "--replace", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    reference = tmp_path / "reference"
    reference.mkdir()
    assert run_cli("apply", write_spec(reference, spec.read_text()), cwd=reference).returncode == 0
    xr.testing.assert_identical(_data(store), _data(reference / "store/r.zarr"))
    assert all(v.manifest["records"] for v in versions(store))
    assert [v.name for v in versions(store)] == [version.name]  # resumed: the same version, not a second (issue 36)
    assert run_cli("verify", store, "--version", version.name, cwd=tmp_path).returncode == 0


def test_a_copy_cut_short_is_never_a_version(applied, in_process):
    spec, store = applied
    partial = history_dir(store) / ".partial-2026-01-01T00-00-00Z"
    partial.mkdir(parents=True)
    (partial / "junk").write_text("a kill during the copy")
    assert versions(store) == []
    spec.write_text(spec.read_text().replace("steps = 40", "steps = 50"))
    assert in_process("apply", spec, "-q", "--replace")[0] == 0
    assert len(versions(store)) == 1 and not partial.exists()


def test_the_hint_to_replace_keeps_the_overrides_the_user_gave(applied, in_process):
    """Following the exit-77 hint applies the spec the user ran, overrides included (issue 37)."""
    spec, store = applied
    code, _, err = in_process("apply", spec, "-q", "--set", "dynamics.steps=50")
    assert code == 77 and "steps: 40 -> 50" in err
    assert f"\n  runner apply {spec} --set dynamics.steps=50 --replace" in err, err  # a line of its own, to paste


def test_no_store_is_made_inside_a_kept_version_or_the_run_folder(applied, in_process):
    """A kept version is never written in place, and no store is made in a store's .runner folder
    (issue 36)."""
    spec, store = applied
    assert in_process("apply", spec, "-q", "--set", "dynamics.steps=50", "--replace")[0] == 0
    (version,) = versions(store)
    kept = _data(version.store)
    for target in (version.store, store.parent / "r.runner" / "inner.zarr"):
        code, _, err = in_process("apply", spec, "-q", "--set", f'experiment.store="{target}"', "--replace")
        assert code == 65 and "a kept version is never written in place" in err and "Traceback" not in err, err
    xr.testing.assert_identical(_data(version.store), kept)
    assert not (store.parent / "r.runner" / "inner.zarr").exists()


def test_a_store_being_written_is_locked_before_consent_is_asked(applied, tmp_path):
    """Another apply holds the store (here: this test process holds its lock): an apply that would need
    ``--replace`` gets 75 (locked, wait), not 77 (consent), which would send the user to the wrong fix."""
    from filelock import FileLock

    spec, store = applied
    spec.write_text(spec.read_text().replace("steps = 40", "steps = 50"))
    with FileLock(runner_dir(store) / "apply.lock", timeout=0):
        out = run_cli("apply", spec, "-q", cwd=tmp_path)
    assert out.returncode == 75 and "is being written by another `runner apply`" in out.stderr, out.stderr
    assert run_cli("apply", spec, "-q", cwd=tmp_path).returncode == 77  # released: now the consent question
