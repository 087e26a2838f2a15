"""The plan's cost estimate: calibration cache, scaling, what plan and show print, and the
quickstart's estimate against its measured time on this machine."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from runner.run.prepare import prepare
from runner.storage.events import read_events
from runner.core.estimate import Calibrator, NoEstimate, estimate, measured, step_seconds
from runner.storage.store import read_tasks
from runner.studies.depth.estimate import batch_rows, calibration_spec
from tests.runner.helpers import maps_spec, run_cli, write_spec

ROOT = Path(__file__).resolve().parents[3]

MAPS = """
[experiment]
name = "maps"
description = "a tanh reservoir"
seed = 0

[[model]]
name = "tanh"
source = "map:tanh"
params = {{ g = 1.5, n = 32 }}
replicates = 2

[input]
samples = {samples}

[dynamics]
steps = 200

[[measure]]
kind = "lyapunov"

[[measure]]
kind = "token_deviation"

[[measure]]
kind = "transient_chaos"
"""


def _spec(tmp_path: Path, samples: int = 64) -> Path:
    path = tmp_path / "maps.toml"
    path.write_text(MAPS.format(samples=samples))
    return path


def test_calibrations_are_cached_per_key(tmp_path):
    runs = []

    def measure():
        runs.append(1)
        return {"step_s": 0.01 * len(runs), "setup_s": 0.0}

    cal = Calibrator(directory=tmp_path)
    key = {"device": "cpu (2 threads)", "model": "map:tanh", "precision": "fp32", "samples": 64}
    assert cal(key, measure)["step_s"] == 0.01
    assert cal(key, measure)["step_s"] == 0.01 and len(runs) == 1  # read back, not measured again
    assert cal({**key, "precision": "bf16"}, measure)["step_s"] == 0.02  # another key calibrates
    with pytest.raises(NoEstimate, match="not calibrated"):
        Calibrator(calibrate=False, directory=tmp_path)({**key, "samples": 128}, measure)
    fresh = Calibrator(refresh=True, directory=tmp_path)
    assert fresh(key, measure)["step_s"] == 0.03
    assert fresh(key, measure)["step_s"] == 0.03 and len(runs) == 3  # refreshed once per calibrator
    cal.path(key).write_text("{torn")
    assert Calibrator(directory=tmp_path)(key, measure)["step_s"] == 0.04 and len(runs) == 4  # unreadable: again


def test_a_preempted_step_does_not_count():
    assert step_seconds([0.01, 0.011, 0.5, 0.009, 0.01]) == pytest.approx(0.01)
    assert step_seconds([0.01, 0.02, 0.01, 0.02]) == pytest.approx(0.015)  # a costlier step every other stays


def test_a_pass_scales_with_steps_and_batch(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    timed = {"step_s": 0.01, "setup_s": 0.5}
    keys = []

    def calibrated(key, measure):
        keys.append(key)
        return timed

    small, large = prepare(_spec(tmp_path, 64)), prepare(_spec(tmp_path, 512))
    assert batch_rows(small.spec) == 64 + 64 + 16  # the samples, their Lyapunov twins, 16 twins of its check
    assert calibration_spec(large.spec).input.samples == 128
    assert calibration_spec(large.spec, torch.device("cuda")).input.samples == 512  # a GPU: the whole batch
    units, notes = small.study.estimate(small, torch.device("cpu"), None, calibrated)
    passes = [u for u in units if u.runs]
    assert [u.label for u in passes] == ["tanh/0", "tanh/1"]
    assert passes[0].seconds == pytest.approx(0.5 + 200 * 0.01)
    assert passes[0].runs == [[t.id for t in small.tasks if t.network == 0 and t.kind == "iterate"]] + \
        [[t.id] for t in small.tasks if t.network == 0 and t.kind != "iterate"]  # derived, not applicable
    units, notes = large.study.estimate(large, torch.device("cpu"), "fp64", calibrated)
    # 1040 rows (512 samples, their twins, 16 check twins) timed as 272 (128, 128, 16)
    assert units[0].seconds == pytest.approx(0.5 + 200 * 0.01 * (512 + 512 + 16) / (128 + 128 + 16))
    assert keys[-1]["samples"] == 128 and keys[-1]["precision"] == "fp64"
    assert any("scaled linearly to 512" in n for n in notes)
    from runner.studies.depth.layout import build_layout

    layout = build_layout(large.spec, large.state)
    stored = sum(layout.nbytes().values()) + sum(c.nbytes for c in layout.coords.values())
    assert sum(u.nbytes for u in units) == pytest.approx(stored, rel=1e-6)


def test_plan_prints_the_estimate_or_why_not(in_process, tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSIENT_CACHE", str(tmp_path / "cache"))  # this spec's calibrations only
    spec = _spec(tmp_path)
    code, out, err = in_process("plan", spec)
    assert code == 0, err
    assert "estimate   on cpu" in out and "device-hours" in out
    assert "all in fp64" in out and "all in tf32" in out and "= fp32 on the CPU" in out
    code, out, _ = in_process("plan", spec, "--json")
    est = json.loads(out)["estimate"]
    assert {u["label"] for u in est["units"]} >= {"tanh/0", "tanh/1"}
    assert set(est["other_precisions"]) == {"fp64", "fp32", "tf32", "bf16"} and est["bytes"] > 0
    before = {f: json.loads(f.read_text())["utc"] for f in (tmp_path / "cache" / "calibration").iterdir()
              if "what" not in json.loads(f.read_text())["key"]}  # not the thread probe's (when threads > 1)
    assert len(before) == 3  # fp32 (both networks), fp64, bf16
    code, out, _ = in_process("plan", spec, "--recalibrate")
    assert code == 0 and all(json.loads(f.read_text())["utc"] > t for f, t in before.items())
    code, out, _ = in_process("plan", spec, "--no-estimate")
    assert code == 0 and not any(line.startswith("estimate") for line in out.splitlines())
    monkeypatch.setenv("TRANSIENT_CACHE", str(tmp_path / "fresh-cache"))  # the tiny ALBERT is not built here
    code, out, _ = in_process("plan", ROOT / "specs" / "quickstart.toml")
    assert code == 0
    assert "no estimate (builtin:tiny-albert is built by the first `runner apply`)" in out
    assert not (tmp_path / "fresh-cache" / "tiny-albert-v1").exists()


def test_plan_of_a_finished_spec_times_nothing(in_process, tmp_path, monkeypatch):
    """Nothing to run: plan reads cached timings only (timing steps cost seconds for nothing);
    --calibrate still times them."""
    monkeypatch.chdir(tmp_path)
    spec = _spec(tmp_path, samples=8)
    code, _, err = in_process("apply", spec)
    assert code == 0, err
    cache = tmp_path / "plan-cache"
    monkeypatch.setenv("TRANSIENT_CACHE", str(cache))  # none of this spec's timings cached
    code, out, err = in_process("plan", spec)
    assert code == 0, err
    assert "Plan: 0 to run" in out and "nothing to run, so not timed" in out
    assert not (cache / "calibration").exists()
    code, out, err = in_process("plan", spec, "--calibrate")
    assert code == 0 and "estimate   on cpu" in out and any((cache / "calibration").iterdir())
    code, out, _ = in_process("plan", spec)  # nothing to run still answers at once, without torch (issue 53)
    assert code == 0 and "nothing to run, so not timed" in out and "estimate   on cpu" not in out


def test_a_sweep_plan_estimates_each_point_and_the_total(in_process, tmp_path):
    spec = tmp_path / "grid.toml"
    spec.write_text(MAPS.format(samples=8) + "\n[sweep.input]\nsamples = [8, 16]\n")
    code, out, err = in_process("plan", spec)
    assert code == 0, err
    lines = out[out.index("estimate   on cpu"):].splitlines()
    assert [line.split()[0] for line in lines[1:4]] == ["samples=8", "samples=16", "total"]
    code, out, _ = in_process("plan", spec, "--json")
    assert [len(e["units"]) for e in json.loads(out)["estimate"]] == [3, 3]  # two networks, the coordinates


def test_training_estimates_its_steps_and_its_measures(in_process):
    # --calibrate: no time budget, which a busy machine could exceed (the budget has its own test)
    code, out, err = in_process("plan", ROOT / "specs" / "tiny" / "lstm_tiny.toml", "--calibrate")
    assert code == 0, err
    assert ">=" not in out and "not timed" not in out, out  # every task is timed
    assert "all in bf16                  no estimate (the training study trains in fp32)" in out
    code, out, _ = in_process("plan", ROOT / "specs" / "tiny" / "lstm_tiny.toml", "--json")  # calibrated above
    units = json.loads(out)["estimate"]["units"]
    p = prepare(ROOT / "specs" / "tiny" / "lstm_tiny.toml")
    assert sorted(t for u in units for run in u["runs"] for t in run) == sorted(t.id for t in p.tasks)
    measured_lm = next(u for u in units if u["label"] == "lm")
    untimed = next(u for u in units if u["label"] == "lm_seed2")  # trained only: a reference, not measured
    assert measured_lm["seconds"] > untimed["seconds"]


def test_a_training_plan_whose_corpus_was_not_read_says_so_instead_of_an_estimate():
    import dataclasses

    from runner.studies.training.estimate import estimate as training_estimate

    p = prepare(ROOT / "specs" / "tiny" / "lstm_tiny.toml")
    p.state = dataclasses.replace(p.state, stats=None)
    with pytest.raises(NoEstimate, match="the corpus has not been read"):
        training_estimate(p, torch.device("cpu"), None, Calibrator(calibrate=False))


def test_transject_estimates_its_training_and_measures(in_process):
    spec = ROOT / "specs" / "tiny" / "transject_tiny.toml"
    code, out, err = in_process("plan", spec, "--calibrate", "--json")
    assert code == 0, err
    est = json.loads(out)["estimate"]
    p = prepare(spec)
    assert [u["label"] for u in est["units"]] == p.labels
    assert sorted(t for u in est["units"] for run in u["runs"] for t in run) == sorted(t.id for t in p.tasks)
    assert not any(u["lower_bound"] for u in est["units"]) and est["bytes"] > 0
    assert any("early stopping" in n for n in est["notes"])
    assert est["other_precisions"]["bf16"] == "the TransJect study trains in fp32"


def test_a_group_records_its_own_time_not_that_of_the_groups_run_inside_it(in_process, tmp_path):
    """A train task provides checkpoints while it runs and their measures run meanwhile: each record
    holds its own seconds, so that their sum is no more than the run took."""
    spec = tmp_path / "lstm_tiny.toml"
    shutil.copy(ROOT / "specs" / "tiny" / "lstm_tiny.toml", spec)
    code, _, err = in_process("apply", spec, "-q")
    assert code == 0, err
    events = read_events(tmp_path / "store" / "lstm_tiny.runner" / "events.jsonl")
    started = next(e["ts"] for e in events if e["event"] == "run_started")
    took = next(e["ts"] for e in events if e["event"] == "run_finished") - started
    done = [e for e in events if e["event"] == "task_done"]
    assert sum(e["seconds"] for e in done) <= took + 0.01 * len(done)  # rounded to ms each
    assert all(e["seconds"] >= 0 for e in done)


@pytest.fixture
def one_thread():
    """Calibration and run on one thread: on a CPU shared with other processes, two OpenMP threads
    spin-wait for each other and a step's time swings tenfold from one moment to the next; one
    thread is time-sliced evenly, so a calibration and the run that follows it see the same load."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.slow
def recorded_ratio(store: Path) -> float:
    """Measured over predicted device time of a store's last run, from the estimate its
    ``run_started`` event recorded and the tasks' completion records (compared on the total: passes
    average out)."""
    events = read_events(store.parent / f"{store.stem}.runner" / "events.jsonl")
    recorded = [e["estimate"] for e in events if e["event"] == "run_started"][-1]
    assert recorded and recorded.get("units"), recorded
    rows = measured(recorded, read_tasks(store))
    assert all(r[2] is not None for r in rows), rows
    return sum(r[2] for r in rows) / sum(r[1] for r in rows)


def within_a_factor_2(name: str, spec: Path, first: float, in_process, store: Path) -> list[float]:
    """The ratios of up to three attempts, the session's shared run first: should another process's
    burst land in one run's window, a fresh in-process calibration and run repeat it (one thread, so
    the calibration and the run that follows it see the same load; each misses only under a load
    that changes within seconds)."""
    ratios = [first]
    if not 0.5 <= first <= 2 and name == "quickstart":
        from models.registry import family_for

        family_for("builtin:tiny-albert").location("builtin:tiny-albert", build=True)  # built before, not timed
    while not 0.5 <= ratios[-1] <= 2 and len(ratios) < 3:
        shutil.rmtree(store.parent, ignore_errors=True)
        est = estimate(prepare(spec), refresh=True, others=False, budget=None)
        assert est.missing is None and not any(u.lower_bound for u in est.units), est.to_json()
        code, _, err = in_process("apply", spec, "-q")
        assert code == 0, err
        recorded = [e["estimate"] for e in read_events(store.parent / f"{name}.runner" / "events.jsonl")
                    if e["event"] == "run_started"]
        assert recorded[-1]["seconds"] == est.to_json()["seconds"]  # apply recorded the calibration just made
        ratios.append(recorded_ratio(store))
    return ratios


@pytest.mark.parametrize("name", ["quickstart", "lstm_tiny", "transject_tiny",
                                  pytest.param("scaffold_tiny", marks=pytest.mark.slow)])
def test_a_shipped_spec_estimate_is_within_a_factor_2_of_the_run(name, shipped_store, in_process, tmp_path,
                                                                  one_thread):
    """The session's shared run of the spec (planned with ``--calibrate`` just before ``apply``, on
    one thread) predicted its device time within a factor 2; ``show`` prints the comparison."""
    shared = shipped_store(name)
    code, out, _ = in_process("show", shared)
    assert code == 0 and "predicted vs measured device time" in out and "measured/predicted" in out
    source = ROOT / "specs" / ("quickstart.toml" if name == "quickstart" else f"tiny/{name}.toml")
    spec = tmp_path / f"{name}.toml"
    spec.write_text(source.read_text().replace("../../tests/data/", f"{ROOT}/tests/data/"))
    store = tmp_path / "store" / f"{name}.zarr"
    ratios = within_a_factor_2(name, spec, recorded_ratio(shared), in_process, store)
    assert 0.5 <= ratios[-1] <= 2, f"measured/predicted per attempt: {ratios}"


def test_calibrating_stops_at_its_budget_and_says_how_to_get_an_estimate(tmp_path):
    def endless():
        n = 0
        for _ in range(10**9):  # a calibration that would run far past the budget
            n += 1
        return {"step_s": 1.0, "setup_s": 0.0}

    cal = Calibrator(directory=tmp_path, budget=0.2)
    with pytest.raises(NoEstimate, match=r"more than 0.2 s here; `runner plan --calibrate SPEC`"):
        cal({"model": "slow"}, endless)
    assert not list(tmp_path.iterdir())  # nothing half-measured is cached
    with pytest.raises(NoEstimate, match="more than 0.2 s"):  # the budget is spent: the next key is not timed
        cal({"model": "other"}, lambda: {"step_s": 0.1})
    assert Calibrator(directory=tmp_path)({"model": "other"}, lambda: {"step_s": 0.1}) == {"step_s": 0.1}



def test_plan_says_what_each_precision_was_validated_for_and_the_memory(in_process, tmp_path, monkeypatch):
    from runner.plugin.measures import measures
    from runner.studies.depth.precision import validity

    registry = measures("depth")
    made = {k: registry[k](registry[k].Params(kind=k)) for k in ("lyapunov", "token_deviation", "pca")}
    text = validity("tf32", [made["lyapunov"], made["token_deviation"], made["pca"]])
    assert text.startswith("validated for lyapunov; NOT validated for token_deviation (ALBERT-large width")
    assert validity("fp32", list(made.values())) is None and validity("tf32", [made["pca"]]) is None
    monkeypatch.setenv("TRANSIENT_CACHE", str(tmp_path / "cache"))
    code, out, _ = in_process("plan", _spec(tmp_path), "--json")
    est = json.loads(out)["estimate"]
    assert est["precision_validity"]["bf16"].startswith("NOT validated for lyapunov")
    assert "tf32" not in est["precision_validity"]  # = fp32 on the CPU
    assert est["memory"]["host"] > 0 and est["memory"]["device"] >= 2 * 64 * 32 * 4  # x and its twins, fp32
    code, out, _ = in_process("plan", _spec(tmp_path))
    assert "memory     about" in out and "NOT validated for lyapunov" in out


def test_show_sets_a_run_against_a_later_plans_calibration(tmp_path):
    """A run that started before anything was calibrated (apply calibrates nothing) is set against
    the estimate of a ``plan --calibrate`` made after it, from the same cache (device and spec)."""
    spec = write_spec(tmp_path, maps_spec("later"))
    assert run_cli("apply", str(spec), cwd=tmp_path).returncode == 0  # a fresh cache: nothing calibrated
    show = run_cli("show", str(spec), cwd=tmp_path)
    assert "predicted vs measured: no estimate (not calibrated on this device yet" in show.stdout, show.stdout
    plan = run_cli("plan", str(spec), "--calibrate", cwd=tmp_path)
    assert plan.returncode == 0 and "estimate   on cpu" in plan.stdout, plan.stdout + plan.stderr
    show = run_cli("show", str(spec), cwd=tmp_path)
    assert show.returncode == 0, show.stderr
    assert "not calibrated" not in show.stdout
    text = " ".join(show.stdout.split())  # show wraps its lines
    assert "predicted vs measured device time (estimate on cpu (1 thread); calibrated after the run started" in text
    assert "measured/predicted" in text and "logistic" in text and "tanh" in text


def test_plan_says_the_memory_is_unknown_until_a_models_config_is_read(tmp_path):
    """A hub model not cached here (the tests run offline, HF_HUB_OFFLINE=1) has an unknown width:
    plan says so rather than a memory without its state (albert_long's said 5.5 MB for ~0.5 GB)."""
    spec = write_spec(tmp_path, """
        [experiment]
        name = "unread"

        [[model]]
        name = "remote"
        source = "hf:transient-tests/no-such-albert"

        [[model]]
        name = "reservoir"
        source = "map:tanh"
        params = { g = 1.5, n = 64 }

        [input]
        samples = 8
        tokens = 4

        [dynamics]
        steps = 50

        [[measure]]
        kind = "lyapunov"
        """)
    plan = run_cli("plan", str(spec), cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    text = " ".join(plan.stdout.split())
    assert "memory unknown until hf:transient-tests/no-such-albert's config is read (not cached here)" in text
    assert "memory about" not in text
    est = json.loads(run_cli("plan", str(spec), "--json", cwd=tmp_path).stdout)["estimate"]
    assert "memory" not in est and "no-such-albert's config" in est["memory_unknown"]
    # the same spec without the unread model: a size again
    known = write_spec(tmp_path, spec.read_text().replace('source = "hf:transient-tests/no-such-albert"',
                                                          'source = "map:logistic"'), name="known.toml")
    assert "memory     about" in run_cli("plan", str(known), cwd=tmp_path).stdout
