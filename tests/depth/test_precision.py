"""Precisions a measure is trusted in: refused before anything runs, with the measure and the reason."""

from __future__ import annotations

import math

import numpy as np
import xarray as xr

from runner.studies.depth.precision import UNIT_ROUNDOFF, deviation_floor, perturbation_floor
from tests.runner.helpers import maps_spec, run_cli, write_spec


def test_the_floors_follow_the_unit_roundoff():
    assert UNIT_ROUNDOFF["fp32"] == np.finfo(np.float32).eps / 2 and UNIT_ROUNDOFF["fp64"] == np.finfo(np.float64).eps / 2
    # ALBERT-large, 32 tokens: the paper's k = 1 and threshold 1e-5 are trusted in fp32, not in bf16
    assert perturbation_floor("fp32", 32, 1024) < 1e-3 < 1 < perturbation_floor("bf16", 32, 1024)
    assert perturbation_floor("tf32", 32, 1024) == 10 * 2**-11 * math.sqrt(32 * 1024)
    assert deviation_floor("fp32", 1024) < 1e-5 < deviation_floor("tf32", 1024) < deviation_floor("bf16", 1024)


BF16 = """
[[measure]]
kind = "lyapunov"
k = {k}

[[measure]]
kind = "token_deviation"
"""


def test_an_untrusted_precision_is_refused_and_can_be_asked_for(tmp_path):
    text = maps_spec("low", steps=20, samples=8, measures=BF16.format(k=1e-3), n=64).replace(
        'precision = "fp64"', 'precision = "bf16"')
    spec = write_spec(tmp_path, text)
    for command in ("plan", "apply"):
        out = run_cli(command, spec, cwd=tmp_path)
        assert out.returncode == 65 and "Traceback" not in out.stderr
        assert "[[measure]] #1 (lyapunov) k: logistic: k = 0.001 is not trusted in bf16" in out.stderr
        assert "untrusted_precision = true" in out.stderr
    assert not (tmp_path / "store").exists()

    # (k = 2 throws the logistic map off its domain [0, 1], which is refused unless asked for)
    trusted = write_spec(tmp_path, maps_spec("ok", steps=20, samples=8, measures=BF16.format(k=2.0), n=64).replace(
        'precision = "fp64"', 'precision = "bf16"\nuntrusted_perturbation = true'), "ok.toml")
    assert run_cli("apply", trusted, cwd=tmp_path).returncode == 0
    ds = xr.open_zarr(tmp_path / "store/ok.zarr", consolidated=False)
    assert list(ds["precision"].values) == ["bf16", "bf16"]
    assert np.isfinite(ds["lyapunov"].sel(network="tanh").values).all()  # (k = 2 throws the logistic map off [0, 1])

    asked = write_spec(tmp_path, text.replace('precision = "bf16"', 'precision = "bf16"\nuntrusted_precision = true'),
                       "asked.toml")
    assert run_cli("apply", asked, cwd=tmp_path).returncode == 0
