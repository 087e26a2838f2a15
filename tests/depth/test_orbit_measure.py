"""The orbit measure through the runner: known orbits of reference maps, the store's flags, show's
counts, and a kill -9 inside the window resumed to the same classes."""

from __future__ import annotations

import signal

import numpy as np
import xarray as xr

from tests.runner.helpers import maps_spec, popen_cli, run_cli, wait_for, write_spec

MODELS = """
[[model]]
name = "period2"
source = "map:logistic"
params = { r = 3.2 }

[[model]]
name = "period4"
source = "map:logistic"
params = { r = 3.5 }

[[model]]
name = "chaos"
source = "map:logistic"
params = { r = 3.9 }
"""


def orbit_spec(every: int) -> str:
    """The maps of :func:`maps_spec` (logistic at r = 4, a contracting tanh reservoir) and three
    logistic maps of known orbits, 400 steps, the orbit measure over the last 200 states."""
    return maps_spec("orbits", steps=400, samples=6, checkpoint_every=every, extra_models=MODELS,
                     measures='[[measure]]\nkind = "orbit"\nwindow = 200')


def classes(ds: xr.Dataset, network: str) -> set[str]:
    meanings = ds.orbit_class.attrs["flag_meanings"].split()
    return {meanings[int(v)] for v in ds.orbit_class.sel(network=network).values}


def test_known_orbits_are_classified_and_shown(tmp_path):
    spec = write_spec(tmp_path, orbit_spec(100))
    out = run_cli("apply", spec, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    ds = xr.open_zarr(tmp_path / "store/orbits.zarr")
    ds = ds.assign_coords(network=ds.model.values)
    assert classes(ds, "period2") == classes(ds, "period4") == {"periodic"}
    assert set(ds.orbit_period.sel(network="period2").values) == {2.0}
    assert set(ds.orbit_period.sel(network="period4").values) == {4.0}
    assert classes(ds, "chaos") == classes(ds, "logistic") == {"chaotic"}  # r = 3.9 and r = 4
    assert ds.orbit_period.sel(network="chaos").isnull().all()
    assert classes(ds, "tanh") == {"fixed_point"}  # g = 0.5: contracting
    assert ds.orbit_period.attrs["units"] == "1" and ds.orbit_period.attrs["long_name"].endswith("(steps)")
    assert "units" not in ds.orbit_class.attrs
    assert ds.orbit_class.attrs["flag_meanings"].split()[-1] == "not_applicable"
    assert "Marwan" in ds.orbit_class.attrs["reference"] and "Inoue" not in ds.orbit_class.attrs["reference"]
    assert "Lathrop & Kostelich 1989" in ds.attrs["references"]  # the criterion's papers, not the study's
    show = run_cli("show", tmp_path / "store/orbits.zarr", cwd=tmp_path).stdout
    assert "orbit class at the end of the run (orbit_class):" in show
    assert "6 periodic" in show and "6 chaotic" in show and "6 fixed point" in show


def test_a_kill_inside_the_window_resumes_to_the_same_classes(tmp_path):
    reference = tmp_path / "reference"
    reference.mkdir()
    assert run_cli("apply", write_spec(reference, orbit_spec(50)), cwd=reference).returncode == 0
    spec = write_spec(tmp_path, orbit_spec(50))
    proc = popen_cli("apply", spec, cwd=tmp_path, RUNNER_TEST_STALL="chaos@330")  # past the durable point at 300
    wait_for(lambda: (tmp_path / "store/orbits.runner/stalled").exists(), proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=120)
    assert run_cli("apply", spec, cwd=tmp_path).returncode == 0
    a, b = xr.open_zarr(tmp_path / "store/orbits.zarr"), xr.open_zarr(reference / "store/orbits.zarr")
    for name in ("orbit_class", "orbit_period", "orbit_closest_return"):
        np.testing.assert_array_equal(a[name].values, b[name].values)
