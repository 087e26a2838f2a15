"""runner apply --log-to mlflow: the store exported to a real local MLflow database, read back with
MLflow's own client."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
import xarray as xr

from tests.runner.helpers import maps_spec

mlflow = pytest.importorskip("mlflow")


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "maps.toml"
    path.write_text(textwrap.dedent(maps_spec("maps", steps=40, samples=4)))
    return path


def test_apply_logs_curves_headlines_and_figures_to_mlflow(in_process, spec, tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'tracking.db'}"
    code, _, err = in_process("apply", spec, "-q", "--log-to", f"mlflow:{uri}")
    assert code == 0, err
    assert f"logged to MLflow ({uri}): experiment 'maps'" in err
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("maps").experiment_id])
    parent = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    children = {r.info.run_name: r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
    assert set(children) == {"logistic", "tanh"}
    ds = xr.open_zarr(tmp_path / "store" / "maps.zarr")
    history = client.get_metric_history(children["logistic"].info.run_id, "lyapunov_per_step")
    expected = ds["lyapunov_per_step"].sel(network="logistic").mean("sample")
    assert [m.step for m in history] == list(ds["lyapunov_step"].values)
    np.testing.assert_allclose([m.value for m in history], expected.values, rtol=1e-6)
    _, shown, _ = in_process("show", tmp_path / "store" / "maps.zarr", "--json")
    headline = next(r for r in json.loads(shown)["results"] if r["variable"] == "lyapunov_per_step")
    assert children["logistic"].data.metrics[headline["label"]] == pytest.approx(
        headline["per_network"]["logistic"])
    assert any(a.path.endswith(".png") for a in client.list_artifacts(parent.info.run_id, "figures"))
    # artifacts beside the database, never in an ./mlruns of the directory apply ran in
    assert client.get_experiment_by_name("maps").artifact_location == (tmp_path / "mlartifacts").as_uri()
    assert list((tmp_path / "mlartifacts").rglob("*.png"))
    assert client.download_artifacts(parent.info.run_id, "spec.toml")  # the spec as it ran

    code, out, err = in_process("apply", spec, "-q", "--log-to", f"mlflow:{uri}")  # nothing to do: logged again
    assert code == 0 and "nothing to do" in out
    active = client.search_runs([client.get_experiment_by_name("maps").experiment_id])
    assert sum("mlflow.parentRunId" not in r.data.tags for r in active) == 1  # replaced, not doubled


def test_an_unknown_tracker_is_a_usage_error_before_anything_runs(in_process, spec, tmp_path):
    code, _, err = in_process("apply", spec, "-q", "--log-to", "wandbb")
    assert code == 2 and "--log-to wandbb: unknown tracker 'wandbb'; known: mlflow" in err
    assert not (tmp_path / "store").exists()


def test_the_export_streams_what_a_running_apply_has_made_durable(tmp_path):
    """An update while the apply is paused mid-run logs the points written so far; after the run
    the next update logs only the rest, and the history equals the store's."""
    import subprocess

    from mlflow.tracking import MlflowClient

    from runner.read.tracker import Exporter

    from tests.runner.helpers import RUNNER, cli_env, write_spec

    spec = write_spec(tmp_path, maps_spec("maps", steps=200, samples=4, checkpoint_every=50))
    proc = subprocess.Popen([*RUNNER, "apply", str(spec), "-q"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=cli_env(tmp_path, RUNNER_TEST_STALL="tanh@120"))
    marker = tmp_path / "store" / "maps.runner" / "stalled"
    from tests.runner.helpers import wait_for

    wait_for(marker.exists, proc)
    uri = f"sqlite:///{tmp_path / 'tracking.db'}"
    exporter = Exporter(tmp_path / "store" / "maps.zarr", f"mlflow:{uri}")
    exporter.update()
    client = MlflowClient(tracking_uri=uri)
    so_far = [m.step for m in client.get_metric_history(exporter.runs["tanh"], "effective_dimension")]
    assert so_far and max(so_far) < 120  # the segments written before the pause, not more
    marker.unlink()
    assert proc.wait(timeout=300) == 0, proc.communicate()
    exporter.finish()
    ds = xr.open_zarr(tmp_path / "store" / "maps.zarr")
    history = [m.step for m in client.get_metric_history(exporter.runs["tanh"], "effective_dimension")]
    assert sorted(history) == list(ds["neff_step"].values)  # every point once


def _dataset() -> xr.Dataset:
    """A store's variables over a step axis, one of each kind the monitor plots, and one it does not."""
    from runner.core.layout import with_internal

    rng = np.random.default_rng(0)
    step = xr.DataArray([0, 10, 20], dims="s", attrs=with_internal({}, counts="steps"))
    plot = lambda kind: with_internal({}, plot=kind)  # noqa: E731
    return xr.Dataset(
        {"lam": (("network", "sample", "s"), rng.normal(size=(2, 5, 3)), plot("series")),
         "dev": (("network", "sample", "s"), np.exp(rng.normal(size=(2, 5, 3))), plot("log_series")),
         "sim": (("network", "s", "layer"), rng.uniform(size=(2, 3, 2)), plot("curve")),
         "trace": (("network", "sample", "s"), rng.normal(size=(2, 5, 3)))},
        coords={"network": ["a", "b"], "layer": ["lstm1", "lstm2"], "s": step})


def test_curves_are_what_the_monitor_plots_summarised_as_it_summarises_them():
    from runner.read.tracker import curves

    ds = _dataset()
    got = curves(ds)
    assert sorted(got["b"]) == ["dev", "lam", "sim/lstm1", "sim/lstm2"]  # a trajectory's elements are no curve
    steps, values = got["b"]["lam"]
    np.testing.assert_array_equal(steps, [0, 10, 20])
    np.testing.assert_allclose(values, ds["lam"].sel(network="b").mean("sample"))
    np.testing.assert_allclose(got["b"]["dev"][1], np.median(ds["dev"].sel(network="b").values, axis=0))
    np.testing.assert_allclose(got["a"]["sim/lstm2"][1], ds["sim"].sel(network="a", layer="lstm2"))


def test_params_are_the_spec_as_it_ran_flattened_with_each_networks_own_entry():
    from runner.read.tracker import flat, network_params

    spec = {"experiment": {"name": "x"}, "dynamics": {"steps": 40},
            "model": [{"name": "tanh", "source": "map:tanh", "params": {"g": 0.5}}],
            "measure": [{"kind": "lyapunov", "k": 1e-8}]}
    assert flat(spec)["measure.lyapunov.k"] == "1e-08" and flat(spec)["model.tanh.params.g"] == "0.5"
    twice = flat({"measure": [{"kind": "svcca", "compare": "final"}, {"kind": "svcca", "compare": "layers"}]})
    assert twice == {"measure.svcca.0.kind": "svcca", "measure.svcca.0.compare": "final",
                     "measure.svcca.1.kind": "svcca", "measure.svcca.1.compare": "layers"}
    ds = xr.Dataset(coords={"network": ["tanh/0", "tanh/1"], "model": ("network", ["tanh", "tanh"]),
                            "replicate": ("network", [0, 1])})
    params = network_params(spec, ds)
    assert params["tanh/1"]["model.source"] == "map:tanh" and params["tanh/1"]["replicate"] == "1"
    assert params["tanh/0"]["dynamics.steps"] == "40" and "model.tanh.source" not in params["tanh/0"]


def test_two_applies_of_one_spec_differ_in_mlflow_by_the_overridden_parameter(in_process, spec, tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'tracking.db'}"
    for steps, store in ((40, "store/a.zarr"), (30, "store/b.zarr")):
        code, _, err = in_process("apply", spec, "-q", "--set", f"dynamics.steps={steps}", "--set",
                                  f'experiment.store="{store}"', "--log-to", f"mlflow:{uri}")
        assert code == 0, err
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("maps").experiment_id])
    a, b = (next(r for r in runs if r.info.run_name == "logistic" and r.data.tags["transient.store"].endswith(s))
            for s in ("a.zarr", "b.zarr"))
    differ = {k for k in a.data.params.keys() | b.data.params.keys() if a.data.params.get(k) != b.data.params.get(k)}
    assert differ == {"dynamics.steps", "experiment.store", "overrides", "spec_sha256"}  # the hash: of the spec as run
    assert a.data.params["model.source"] == "map:logistic" and a.data.params["measure.lyapunov.k"] == "1e-08"
    assert a.data.params["dynamics.untrusted_precision"] == "false"  # a default: the spec as it ran


#: --log-to targets that cannot work, each refused before anything runs (66), naming the target (issue 50).
def _targets(tmp_path):
    (tmp_path / "file.txt").write_text("not a folder")
    (tmp_path / "mlflow.db").mkdir()
    (tmp_path / "garbage.db").write_text("hello, not a database")
    return [
        ("mlflow:::nonsense", "'::nonsense' is neither a tracking URI nor a folder"),
        (f"mlflow:sqlite:///{tmp_path}/file.txt/m.db", "file.txt/m.db lies under"),
        (f"mlflow:sqlite:///{tmp_path}/mlflow.db", "mlflow.db is a folder, not an SQLite database file"),
        (f"mlflow:sqlite:///{tmp_path}/garbage.db", "garbage.db is not an SQLite database (it starts with b'hello, n')"),
        (f"mlflow:{tmp_path}/file.txt", "file.txt is a file; MLflow keeps runs in a folder there"),
        ("mlflow:http://127.0.0.1:9", "no tracking server answers at http://127.0.0.1:9 within 5 s"),
    ]


def test_a_tracking_target_that_cannot_work_is_refused_before_the_run(in_process, spec, tmp_path):
    for target, said in _targets(tmp_path):
        code, _, err = in_process("apply", spec, "-q", "--log-to", target)
        assert code == 66 and err.startswith(f"error: --log-to {target}: ") and said in err, (target, err)
        assert err.count("\n") == 1 and err.rstrip().endswith("; nothing ran"), err
        assert not (tmp_path / "store").exists(), target


def test_a_tracking_server_that_answers_is_accepted(tmp_path):
    """Any HTTP answer within the time allowed will do (MLflow's client judges the rest); none is refused."""
    import http.server
    import threading

    from runner.read.tracker import check_target

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(404 if self.path != "/health" else 200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        check_target(f"mlflow:http://127.0.0.1:{server.server_port}")  # raises nothing
    finally:
        server.shutdown()
    check_target(f"mlflow:sqlite:///{tmp_path}/new.db")
    check_target(f"mlflow:{tmp_path}/runs")


@pytest.mark.parametrize(("uri", "said"), [
    ("::nonsense", "'::nonsense' is neither a tracking URI nor a folder"),
    (":", "':' is neither a tracking URI nor a folder"),
    ("?runs", "'?runs' is neither a tracking URI nor a folder"),
    ("file:///{tmp}/file.txt", "file.txt is a file; MLflow keeps runs in a folder there"),
    ("file:///{tmp}/file.txt/runs", "lies under"),
    ("{tmp}/file.txt/deeper/runs", "lies under"),
    ("sqlite:///{tmp}/file.txt/deeper/m.db", "lies under"),
    ("sqlite:///{tmp}/folder", "is a folder, not an SQLite database file"),
    ("sqlite:///{tmp}/text.db", "is not an SQLite database"),
    ("http://127.0.0.1:9", "no tracking server answers at http://127.0.0.1:9"),
    ("https://127.0.0.1:9/mlflow", "no tracking server answers at https://127.0.0.1:9/mlflow"),
])
def test_a_tracking_uri_that_cannot_take_runs_is_named(uri, said, tmp_path):
    from runner.read.tracker import uri_problem

    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "folder").mkdir()
    (tmp_path / "text.db").write_text("not sqlite")
    problem = uri_problem(uri.format(tmp=tmp_path), timeout=2)
    assert problem is not None and said in problem, problem


@pytest.mark.parametrize("uri", ["{tmp}/runs", "file:///{tmp}/runs", "sqlite:///{tmp}/new/m.db", "sqlite:///{tmp}/empty.db",
                                 "postgresql://user@db/mlflow", "databricks", "./runs"])
def test_a_tracking_uri_that_can_take_runs_is_accepted(uri, tmp_path):
    from runner.read.tracker import uri_problem

    (tmp_path / "empty.db").write_bytes(b"")  # an empty file: SQLite makes its database there
    assert uri_problem(uri.format(tmp=tmp_path), timeout=2) is None


def test_a_parameter_chosen_per_network_is_logged_per_network(in_process, tmp_path):
    """A measure parameter left None (lyapunov's k) is logged as each network used it, not as null."""
    from mlflow.tracking import MlflowClient

    spec = tmp_path / "maps.toml"
    spec.write_text(textwrap.dedent(maps_spec("maps", steps=40, samples=4, measures="""
        [[measure]]
        kind = "lyapunov"
        tau = 1

        [[measure]]
        kind = "effective_dimension"
        """)))
    uri = f"sqlite:///{tmp_path / 'tracking.db'}"
    code, _, err = in_process("apply", spec, "-q", "--log-to", f"mlflow:{uri}")
    assert code == 0, err
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("maps").experiment_id])
    parent = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    children = {r.info.run_name: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    k = xr.open_zarr(tmp_path / "store" / "maps.zarr")["lyapunov_k"].to_series()
    assert parent.data.params["measure.lyapunov.k"] == "per network"
    for net in ("logistic", "tanh"):
        assert float(parent.data.params[f"measure.lyapunov.k.{net}"]) == pytest.approx(k[net], rel=1e-12)
        assert float(children[net].data.params["measure.lyapunov.k"]) == pytest.approx(k[net], rel=1e-12)
    assert "null" not in {v for r in runs for key, v in r.data.params.items() if key.startswith("measure.lyapunov.k")}
