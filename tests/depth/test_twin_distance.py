"""The raw twin of Fig. 4A: ||y_t - x_t|| grows at the Lyapunov exponent (logistic map: ln 2 per step)."""

from __future__ import annotations

import numpy as np
import xarray as xr

from runner.plugin.recipes import recipes
from tests.runner.helpers import maps_spec, run_cli, write_spec

MEASURES = """
[[measure]]
kind = "trajectory"
samples = [0, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53]
tokens = [0]
elements = [0]

[[measure]]
kind = "lyapunov"
k = 1e-9
tau = 1

[[measure]]
kind = "twin_distance"
samples = [0, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53]
k = 1e-9
steps = 15
"""


def test_the_raw_twin_grows_at_the_lyapunov_exponent(tmp_path):
    spec = write_spec(tmp_path, maps_spec("twin", steps=30, samples=64, measures=MEASURES))
    out = run_cli("apply", spec, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    ds = xr.open_zarr(tmp_path / "store/twin.zarr", consolidated=False)
    d = ds["twin_distance"].sel(network="logistic")
    assert d.sizes["twin_step"] == 16  # t = 0..15
    np.testing.assert_allclose(d.isel(twin_step=0).values, 1e-9, rtol=1e-6)  # ||y_0 - x_0|| = k (to fp64 rounding of x)
    growth = np.log(d.values[:, 1:] / d.values[:, :-1])
    # while the twin stays within 1e-4 of x, its one-step growth is the renormalised twin's lambda(t) (tau = 1)
    lam = ds["lyapunov"].sel(network="logistic", sample=ds["twin_sample"].values).isel(lyapunov_step=slice(0, 15))
    np.testing.assert_allclose(growth, lam.values, atol=1e-3)
    # the logistic map at r = 4 has the exponent ln 2 per step (finite-time average over 16 x 15 steps)
    assert abs(growth.mean() - np.log(2)) < 0.1
    np.testing.assert_array_equal(ds["twin_x"].sel(network="logistic").isel(twin_element=0).values,
                                  ds["trace"].sel(network="logistic", trace_sample=ds["twin_sample"].values)
                                  .isel(trace_token=0, trace_element=0, trace_step=slice(0, 16)).values)
    gap = np.abs(ds["twin_y"] - ds["twin_x"]).isel(twin_element=0)  # one element differs by at most the norm
    assert (gap <= ds["twin_distance"] + 1e-7).all()  # (+ float32 rounding of the stored elements)

    fig = recipes("depth")["fig4a"].draw(ds)
    top, bottom = fig.axes[0], fig.axes[2]
    np.testing.assert_array_equal(top.lines[0].get_ydata(), ds["twin_x"].sel(network="logistic").isel(
        twin_sample=0, twin_element=0).values)
    np.testing.assert_array_equal(bottom.lines[0].get_ydata(), d.isel(twin_sample=0).values)
    mean_lle = float(ds["lyapunov_per_step"].sel(network="logistic", sample=0).isel(lyapunov_step=slice(0, 15)).mean())
    assert bottom.get_legend().get_texts()[1].get_text() == f"mean LLE {mean_lle:.3g} per step"


def test_twin_samples_beyond_the_input_are_refused(tmp_path):
    spec = write_spec(tmp_path, maps_spec("bad", steps=20, samples=4, measures=MEASURES))
    out = run_cli("plan", spec, cwd=tmp_path)
    assert out.returncode == 65 and "[[measure]] #3 (twin_distance) samples: samples [5, 7, 11" in out.stderr
