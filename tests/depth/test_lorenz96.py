"""Lorenz-96 through the depth study: its largest Lyapunov exponent, about 1.7 per model time unit
at N = 40, F = 8 (Karimi & Paul 2010, Chaos 20, 043105: 1.68; Lorenz & Emanuel 1998: errors double
in about 0.42 units, ln 2 / 0.42 = 1.65)."""

from __future__ import annotations

import textwrap

import pytest
import xarray as xr

SPEC = """
[experiment]
name = "l96"

[[model]]
name = "lorenz96"
source = "map:lorenz96"
params = { n = 40, forcing = 8.0, dt = 0.05 }

[input]
samples = 4

[dynamics]
steps = 10000
precision = "fp64"

[[measure]]
kind = "lyapunov"
k = 1e-8
tau = 1
"""


@pytest.mark.slow
def test_the_depth_study_reproduces_the_lorenz96_exponent(in_process, tmp_path):
    spec = tmp_path / "l96.toml"
    spec.write_text(textwrap.dedent(SPEC))
    code, _, err = in_process("apply", spec, "-q")
    assert code == 0, err
    per_step = xr.open_zarr(tmp_path / "store" / "l96.zarr")["lyapunov_per_step"].isel(network=0)
    per_time_unit = float(per_step.mean()) / 0.05
    # 4 samples x 500 model time units; finite-time averages of single samples spread by about 5%
    assert per_time_unit == pytest.approx(1.68, abs=0.08)
