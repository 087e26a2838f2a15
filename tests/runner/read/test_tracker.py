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
