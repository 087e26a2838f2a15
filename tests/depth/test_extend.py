"""A longer run continues a finished one (issue 37): raising ``[dynamics] steps`` extends each pass
from the state it kept, and the store equals a fresh run of the new length bit for bit (real CLI
runs in subprocesses); any other change still replaces, with consent."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import numpy as np
import pytest
import torch
import xarray as xr

from runner.plugin.measures import measures
from runner.plugin.timings import StepMeasure
from runner.storage.history import versions
from runner.storage.store import read_tasks, runner_dir
from runner.studies.depth.extend import lengthened
from runner.studies.depth.measures.orbit import Orbit, Params as OrbitParams
from tests.runner.helpers import maps_spec, popen_cli, run_cli, wait_for, write_spec

#: Every step measure that can extend, with what it computes at the last step (orbit classes,
#: censoring, twins' outcome, a PCA whose window ends there), and a derived one.
MEASURES = """
    [[measure]]
    kind = "token_deviation"

    [[measure]]
    kind = "lyapunov"
    tau = 10

    [[measure]]
    kind = "transient_chaos"

    [[measure]]
    kind = "orbit"

    [[measure]]
    kind = "effective_dimension"
    every = 5

    [[measure]]
    kind = "pca"
    samples = [0, 1]
    start = 10

    [[measure]]
    kind = "trajectory"
    samples = [0]
    tokens = [0]
    elements = [0, 1]

    [[measure]]
    kind = "twin_distance"
    samples = [2]
    elements = [0]
    """


def spec_text(steps: int, checkpoint_every: int = 20) -> str:
    return maps_spec("x", steps=steps, samples=8, n=8, checkpoint_every=checkpoint_every, measures=MEASURES)


def bits(ds: xr.Dataset) -> dict[str, tuple]:
    """Every variable (coordinates included) as (dims, dtype, raw bytes): NaN patterns compared too."""
    out = {}
    for name, v in ds.variables.items():
        a = np.asarray(v.values)
        out[name] = (v.dims, a.dtype.str, a.tolist() if a.dtype.kind in "OTUS" else a.tobytes())
    return out


def data(path: Path) -> xr.Dataset:
    return xr.open_zarr(path, consolidated=False).load()


def applied(folder: Path, steps: int, *extra: str) -> tuple[Path, Path]:
    folder.mkdir(exist_ok=True)
    spec = write_spec(folder, spec_text(steps))
    done = run_cli("apply", spec, "-q", *extra, cwd=folder)
    assert done.returncode == 0, done.stderr
    return spec, folder / "store/x.zarr"


def test_a_longer_run_extends_and_equals_a_fresh_run_bit_for_bit(tmp_path):
    spec, store = applied(tmp_path / "a", 60)
    before = data(store)
    spec.write_text(spec_text(80))

    plan = run_cli("plan", spec, "--no-estimate", cwd=spec.parent)
    assert plan.returncode == 0, plan.stderr
    out = " ".join(plan.stdout.split())  # wrapped at 80 columns
    assert "extend: steps: 60 -> 80 (continued from step 60" in out
    assert "orbit classes of its last states recomputed at step 80" in out
    assert "extend: steps: 60 -> 80 (recomputed from the stored values)" in out  # transient_chaos
    assert "apply refuses" not in out and "extend finished results" in out
    rows = json.loads(run_cli("plan", spec, "--json", "--no-estimate", cwd=spec.parent).stdout)
    assert rows["extend"] and not rows["replace"]
    said = re.search(r"kept in \S+: about ([\d.]+) (bytes|kB|MB) of its own", out)
    assert said, out
    predicted = float(said.group(1)) * {"bytes": 1, "kB": 1e3, "MB": 1e6}[said.group(2)]

    done = run_cli("apply", spec, "-q", cwd=spec.parent)  # no --replace: nothing is lost
    assert done.returncode == 0, done.stderr
    records = read_tasks(store)
    passes = [r for r in records.values() if r["kind"] == "iterate"]
    assert passes and all(r["resumed_from"] == 60 for r in passes)  # continued, not recomputed

    _, fresh = applied(tmp_path / "b", 80)
    extended, reference = bits(data(store)), bits(data(fresh))
    assert extended.keys() == reference.keys()
    assert [k for k in reference if extended[k] != reference[k]] == []

    (version,) = versions(store)  # the 60-step store, as a replace keeps it
    assert version.manifest["reason"] == "extend" and version.manifest["extended"]
    xr.testing.assert_identical(data(version.store), before)
    own = _not_shared(version.store.parent, store)  # what the version holds that the store does not
    assert 0 < own <= predicted * 1.1, (own, predicted)  # plan said about what it keeps
    from runner.run.provenance import read_full

    assert read_full(version.store).get("code_files")  # the version keeps its full provenance beside it
    assert version.store.parent.name == version.name  # under its own name (a loop once took it)
    first = "trace/c/0/0/0/0/0"  # steps 0-19 of the first network: an extension leaves them as they are
    assert (version.store / first).samefile(store / first)
    last = "trace/c/0/0/3/0/0"  # step 60, the last stored point, is written again
    assert (version.store / last).is_file() and not (version.store / last).samefile(store / last)
    listed = json.loads(run_cli("history", store, "--json", cwd=spec.parent).stdout)
    assert [v["own_bytes"] for v in listed] == [own]
    history = run_cli("history", store, cwd=spec.parent)
    assert "extended logistic lyapunov: steps: 60 -> 80" in history.stdout
    # the whole time of an extended task: the shorter run's and the extension's (issue 53, item 1)
    old = {r["network_label"] + r["measure"]: r["seconds"] for r in version.manifest["records"].values()}
    rows = json.loads(run_cli("status", store, "--json", cwd=spec.parent).stdout)["tasks"]
    lyap = next(t for t in rows if t["network_label"] == "logistic" and t["measure"] == "lyapunov")
    assert lyap["seconds_before"] == old["logisticlyapunov"] and lyap["seconds"] > 0
    status = run_cli("status", store, cwd=spec.parent).stdout
    assert f"{lyap['seconds'] + lyap['seconds_before']:.1f} s ({lyap['seconds']:.1f} s extending)" in status
    assert run_cli("verify", store, cwd=spec.parent).returncode == 0
    assert "Plan: 0 to run" in run_cli("plan", spec, "--no-estimate", cwd=spec.parent).stdout
    assert len(list((runner_dir(store) / "final").iterdir())) == 2  # one kept state per network

    spec.write_text(spec_text(60))  # the shorter run again: the history holds it (issue 53, item 1)
    said = f"the history already holds this spec's results: version {version.name}; open it with " \
           f"xr.open_zarr('{version.store.relative_to(spec.parent)}')"
    out = " ".join(run_cli("plan", spec, "--no-estimate", cwd=spec.parent).stdout.split())
    assert said in out, out
    refused = run_cli("apply", spec, cwd=spec.parent)
    assert refused.returncode == 77 and said in " ".join(refused.stderr.split()), refused.stderr


def _not_shared(version: Path, store: Path) -> int:
    """Bytes of the files under ``version`` that are not the same file (inode) as one of the store's
    or of its runner folder."""
    inodes = {(f.stat().st_dev, f.stat().st_ino) for root in (store, runner_dir(store)) for f in root.rglob("*")
              if f.is_file()}
    return sum(f.stat().st_size for f in version.rglob("*")
               if f.is_file() and (f.stat().st_dev, f.stat().st_ino) not in inodes)


def test_kill_9_during_an_extension_and_apply_again_continue_it(tmp_path):
    """Killed before the extension's first durable point (its records of the shorter run are gone by
    then): the next apply still continues from the kept state, to the store a fresh run gives."""
    spec, store = applied(tmp_path / "a", 60)
    spec.write_text(spec_text(80))
    proc = popen_cli("apply", spec, "-q", cwd=spec.parent, RUNNER_TEST_STALL="tanh@70")
    wait_for(lambda: (runner_dir(store) / "stalled").exists(), proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = run_cli("apply", spec, "-q", cwd=spec.parent)
    assert done.returncode == 0, done.stderr
    passes = {r["network_label"]: r["resumed_from"] for r in read_tasks(store).values() if r["kind"] == "iterate"}
    assert passes == {"logistic": 60, "tanh": 60}
    _, fresh = applied(tmp_path / "b", 80)
    a, b = bits(data(store)), bits(data(fresh))
    assert a.keys() == b.keys() and [k for k in b if a[k] != b[k]] == [] and len(versions(store)) == 1
    assert not (runner_dir(store) / "extending.json").exists()


def test_readers_see_the_shorter_run_until_the_longer_one_is_switched_in(tmp_path):
    """Issue 51: an extension writes its values into the next version, so that a reader sees the old
    version whole until the run ends (never the new layout half filled, nor a per-sample summary of
    the new length beside the old ones), and then the new version whole; ``verify`` and ``status``
    call the store healthy meanwhile. Killed there, the store is the old version and the next
    apply continues into the next version it left."""
    spec, store = applied(tmp_path / "a", 60)
    old = bits(data(store))
    spec.write_text(spec_text(80))
    proc = popen_cli("apply", spec, "-q", cwd=spec.parent, RUNNER_TEST_STALL="tanh@70")
    wait_for(lambda: (runner_dir(store) / "stalled").exists(), proc)
    assert bits(data(store)) == old  # the logistic map's pass is finished by now, in the next version
    assert run_cli("verify", store, cwd=spec.parent).returncode == 0
    status = run_cli("status", store, "--json", cwd=spec.parent)
    assert status.returncode == 0 and json.loads(status.stdout)["state"] != "damaged", status.stdout
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    (runner_dir(store) / "stalled").unlink()
    assert bits(data(store)) == old and run_cli("verify", store, cwd=spec.parent).returncode == 0
    status = json.loads(run_cli("status", store, "--json", cwd=spec.parent).stdout)
    staged = {t["network"] for t in status["tasks"] if t["id"] in status["staged"]}
    assert "logistic" in staged and "tanh" not in staged  # the finished pass waits in the next version
    assert "finished in the next version" in run_cli("status", store, cwd=spec.parent).stdout
    proc = popen_cli("apply", spec, "-q", cwd=spec.parent, RUNNER_TEST_STALL="attrs@1")
    wait_for(lambda: (runner_dir(store) / "stalled").exists(), proc)  # the run's end: switched in by now
    _, fresh = applied(tmp_path / "b", 80)
    assert bits(data(store)) == bits(data(fresh))
    (runner_dir(store) / "stalled").unlink()
    assert proc.wait() == 0
    assert bits(data(store)) == bits(data(fresh)) and run_cli("verify", store, cwd=spec.parent).returncode == 0


def test_a_change_besides_the_length_replaces_and_needs_consent(tmp_path):
    spec, store = applied(tmp_path, 60)
    spec.write_text(spec_text(80).replace("g = 0.5", "g = 0.6"))  # the tanh map changes, the logistic does not
    out = " ".join(run_cli("plan", spec, "--no-estimate", cwd=tmp_path).stdout.split())
    assert "tanh lyapunov replace: model.params.g: 0.5 -> 0.6; steps: 60 -> 80" in out
    assert "logistic lyapunov extend: steps: 60 -> 80" in out
    refused = run_cli("apply", spec, "-q", cwd=tmp_path)
    assert refused.returncode == 77 and "--replace" in refused.stderr and "logistic" not in refused.stderr
    done = run_cli("apply", spec, "-q", "--replace", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    starts = {(r["network_label"], r["resumed_from"]) for r in read_tasks(store).values() if r["kind"] == "iterate"}
    assert starts == {("logistic", 60), ("tanh", 0)}


def test_a_longer_run_off_its_segments_is_recomputed_and_plan_says_why(tmp_path):
    spec, store = applied(tmp_path, 60)
    spec.write_text(spec_text(80, checkpoint_every=40))  # 60 is not where a fresh run's segment ends
    out = " ".join(run_cli("plan", spec, "--no-estimate", cwd=tmp_path).stdout.split())
    assert "replace: steps: 60 -> 80; not extended: 60 is not a multiple of the new run's durable segment" in out
    assert "set [dynamics] checkpoint_every = 60 (or --set dynamics.checkpoint_every=60) to continue it" in out
    fixed = run_cli("plan", spec, "--no-estimate", "--set", "dynamics.checkpoint_every=60", cwd=tmp_path)
    assert "extend: steps: 60 -> 80 (continued from step 60" in " ".join(fixed.stdout.split())  # the fix works
    assert run_cli("apply", spec, "-q", cwd=tmp_path).returncode == 77
    done = run_cli("apply", spec, "-q", "--replace", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert all(r.get("resumed_from", 0) == 0 for r in read_tasks(store).values())


def test_the_pca_says_whether_its_window_moves():
    """A PCA whose window ends at a fixed step keeps the same points in a longer run (issue 53)."""
    from runner.studies.depth.measures.pca import PCA, Params

    moving, fixed = PCA(Params(kind="pca", start=10)), PCA(Params(kind="pca", start=10, stop=50))
    assert moving.extend_note(60, 80) == "the PCA of its window recomputed at step 80"
    assert fixed.extend_note(60, 80) == "its window (steps 10-50) does not move: the PCA of the same points"


@pytest.mark.parametrize("old, new, stride, said", [
    (300, 400, 10, "checkpoint_every = 300"),  # the quickstart without checkpoint_every: the run itself
    (10**6, 2 * 10**6, 10, "checkpoint_every = 20000"),  # about 1% of the new run: few chunks along time
    (55, 80, 10, "not a multiple of the measures' strides (their lcm is 10)"),  # no segment can end at 55
])
def test_the_fix_names_a_segment_that_divides_the_old_run(old, new, stride, said):
    from runner.studies.depth.extend import segment_fix

    assert said in segment_fix(old, new, stride)


def test_a_shorter_run_is_no_extension():
    old = {"trajectory": {"steps": 80, "seed": 0}, "measure": "m", "params": {}}
    assert lengthened(old, {**old, "trajectory": {"steps": 100, "seed": 0}}) == 80
    assert lengthened(old, {**old, "trajectory": {"steps": 60, "seed": 0}}) is None
    assert lengthened(old, {**old, "trajectory": {"steps": 100, "seed": 1}}) is None
    assert lengthened(old, {**old, "trajectory": {"steps": 100, "seed": 0}, "params": {"a": 1}}) is None


@pytest.mark.parametrize("old, new", [(60, 80), (60, 400), (3000, 4000)])
def test_the_orbit_window_moves_on_with_the_states_it_shares(old, new):
    orbit = Orbit(OrbitParams(kind="orbit"))
    W, W2 = orbit.window(old), orbit.window(new)
    first = old + 1 - W
    kept = torch.arange(W, dtype=torch.float32)[:, None, None] + first  # kept[i] holds step first + i
    kept[-1] = float("nan")  # step T: observed again by the longer run
    state = orbit.extend_state({"kept": kept, "first": torch.tensor(first)}, old, new)
    new_first = int(state["first"])
    assert new_first == new + 1 - W2 and state["kept"].shape[0] == W2
    for i, value in enumerate(state["kept"][:, 0, 0].tolist()):
        step = new_first + i
        assert value == step if step < old else np.isnan(value)


def test_a_measure_that_extends_declares_it_in_its_tags():
    """Extending is a declaration in the step tags (``StepTags(extends=True)``, beside its
    ``extend_note``), not a second problems hook: the step measures the CLI test above extends say so,
    the readouts (computed again from t = 0) do not, and one that adapts its kept state extends."""
    step = {k: c for k, c in measures("depth").items() if c.tags.timing == "step"}
    extending = {k for k, c in step.items() if c.tags.step.extends}
    # attention too, which a map does not have; transient_chaos is derived
    assert extending - {"attention"} == set(re.findall(r'kind = "(\w+)"', MEASURES)) - {"transient_chaos"}
    assert {"mlm_readout", "sts_readout", "handwriting_readout"} <= step.keys() - extending
    adapting = {k for k, c in step.items() if c.extend_state is not StepMeasure.extend_state}
    assert adapting == {"pca", "orbit"} and adapting <= extending
    notes = {k: c.tags.step.extend_note for k, c in step.items() if c.tags.step.extend_note}
    assert notes.keys() == {"token_deviation", "lyapunov", "orbit", "pca"}
