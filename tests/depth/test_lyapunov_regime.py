"""The Lyapunov exponent checks its own regime on every map (issue 49): through ``runner apply`` at
the defaults, in fp64 and fp32, each known answer is met within 0.02, or the samples are flagged
(unresolved, nonlinear), left out of ``show``'s headline and warned at apply: never a silently wrong
number. Reference values are closed forms computed here, or cited."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from runner.studies.depth.measures.lyapunov import TWIN_OUTCOMES
from tests.runner.helpers import run_cli, write_spec

ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = 0.02

SPEC = """
[experiment]
name = "{name}"
store = "store/{name}.zarr"

[[model]]
name = "m"
source = "{source}"
params = {params}

[input]
samples = {samples}

[dynamics]
steps = {steps}
precision = "{precision}"

[[measure]]
kind = "lyapunov"
{lyapunov}
"""


def _apply(run, tmp_path, name, source, params="{}", precision="fp64", steps=1000, samples=16, lyapunov=""):
    """Apply the spec; (the store, apply's stderr, show --json's headline and what it left out)."""
    write_spec(tmp_path, SPEC.format(name=name, source=source, params=params, precision=precision, steps=steps,
                                     samples=samples, lyapunov=lyapunov), f"{name}.toml")
    code, _, err = run("apply", f"{name}.toml")
    assert code == 0, err
    code, out, show_err = run("show", f"store/{name}.zarr", "--json")
    assert code == 0, show_err
    result = next(r for r in json.loads(out)["results"] if r["variable"] == "lyapunov_per_step")
    return xr.open_zarr(tmp_path / f"store/{name}.zarr", consolidated=False), err, result


def _outcomes(ds) -> set[str]:
    return {TWIN_OUTCOMES[int(c)] for c in np.unique(ds.lyapunov_twin.values)}


def _logistic_cycle_exponent(r: float) -> float:
    """ln|f'(x1) f'(x2)| / 2 on the 2-cycle of x -> r x (1 - x), x_{1,2} = (r + 1 +- sqrt((r + 1)(r - 3))) / 2r
    (Strogatz, Nonlinear Dynamics and Chaos, Sec. 10.3), or ln|2 - r| at the fixed point 1 - 1/r (1 < r < 3)."""
    if r < 3:
        return math.log(abs(2 - r))
    root = math.sqrt((r + 1) * (r - 3))
    x1, x2 = (r + 1 + root) / (2 * r), (r + 1 - root) / (2 * r)
    return math.log(abs(r * (1 - 2 * x1) * r * (1 - 2 * x2))) / 2


def _henon_fixed_point_exponent(a: float, b: float) -> float:
    """ln of the largest |eigenvalue| of the Henon map's Jacobian [[-2 a x*, 1], [b, 0]] at its fixed point
    x* = (-(1 - b) + sqrt((1 - b)^2 + 4 a)) / 2a."""
    x = (-(1 - b) + math.sqrt((1 - b) ** 2 + 4 * a)) / (2 * a)
    return float(np.log(np.abs(np.linalg.eigvals([[-2 * a * x, 1.0], [b, 0.0]])).max()))


def test_the_closed_forms_are_right():
    assert _logistic_cycle_exponent(2.5) == pytest.approx(math.log(0.5))
    # the 2-cycle's multiplier is 4 + 2r - r^2 (Strogatz, Exercise 10.3.2)
    assert _logistic_cycle_exponent(3.2) == pytest.approx(math.log(abs(4 + 2 * 3.2 - 3.2 ** 2)) / 2)
    assert _henon_fixed_point_exponent(0.2, 0.3) == pytest.approx(-0.2140, abs=1e-3)


@pytest.mark.parametrize("precision", ["fp64", "fp32"])
def test_henon_at_the_defaults(in_process, tmp_path, precision):
    """The Henon map (a = 1.4, b = 0.3): 0.4192 (Sprott, Chaos and Time-Series Analysis, 2003, Table
    A.1: 0.41922). Before: every twin diverged at the default k = 1 and show said 3.291 (fp64) or 0.167."""
    ds, _, result = _apply(in_process, tmp_path, "henon", "map:henon", "{ a = 1.4, b = 0.3 }", precision)
    assert result["per_network"]["m"] == pytest.approx(0.4192, abs=TOLERANCE)
    assert float(ds.lyapunov_k[0]) < 1e-3  # from the states: far below the paper's k = 1 for ALBERT


@pytest.mark.parametrize("precision", ["fp64", "fp32"])
def test_henon_at_its_stable_fixed_point(in_process, tmp_path, precision):
    """At a = 0.2, b = 0.3 the orbit settles on a stable fixed point (before: -0.2298 in fp32)."""
    ds, _, result = _apply(in_process, tmp_path, "fixed", "map:henon", "{ a = 0.2, b = 0.3 }", precision)
    assert result["per_network"]["m"] == pytest.approx(_henon_fixed_point_exponent(0.2, 0.3), abs=TOLERANCE)


@pytest.mark.parametrize("precision", ["fp64", "fp32"])
@pytest.mark.parametrize("r", [3.2, 2.5])
def test_logistic_cycles_are_met_or_marked_unresolved(in_process, tmp_path, precision, r):
    """A stable 2-cycle (r = 3.2) and fixed point (r = 2.5) contract the twin by e^-9 and e^-7 over tau = 10
    steps: in fp64 it stays resolved and lambda is the cycle's; in fp32 it collapses onto the orbit, and
    the samples are unresolved, warned and left out (before: -0.535 and -0.579, every sample "stayed")."""
    ds, err, result = _apply(in_process, tmp_path, "logistic", "map:logistic", f"{{ r = {r} }}", precision, steps=2000)
    value = result["per_network"]["m"]
    expected = _logistic_cycle_exponent(r)
    if precision == "fp64":
        assert value == pytest.approx(expected, abs=TOLERANCE)
        assert "warning" not in err or "unresolved" in err  # a sample may start on the fold (x = 1/2)
    else:
        assert value is None or value == pytest.approx(expected, abs=TOLERANCE)
        assert "unresolved" in _outcomes(ds)
        assert "unresolved" in err and "left out of show's headline" in err
        assert result["left_out"]["m"].get("unresolved", 0) > 0


@pytest.mark.parametrize("tau,precision,flagged", [(10, "fp64", False), (1, "fp32", False), (10, "fp32", True)])
def test_logistic_at_r_4(in_process, tmp_path, tau, precision, flagged):
    """ln 2 (Ott, Chaos in Dynamical Systems, Sec. 2.2). In fp32 over tau = 10 doublings no k is both
    resolved and linear (1000 k must stay below 1e-3 of the domain): flagged, never a wrong number."""
    ds, err, result = _apply(in_process, tmp_path, "r4", "map:logistic", "{ r = 4.0 }", precision,
                             lyapunov=f"tau = {tau}")
    if flagged:
        assert result["per_network"]["m"] is None and "nonlinear" in _outcomes(ds) and "nonlinear" in err
    else:
        assert result["per_network"]["m"] == pytest.approx(math.log(2), abs=TOLERANCE)


@pytest.mark.parametrize("precision", ["fp64", "fp32"])
def test_lorenz96_at_the_defaults(in_process, tmp_path, precision):
    """N = 40, F = 8, dt = 0.05: 1.68 per time unit (Karimi & Paul 2010, Chaos 20, 043105), 0.084 per step;
    finite-time averages over 16 samples x 50 time units spread by a few percent."""
    _, _, result = _apply(in_process, tmp_path, "l96", "map:lorenz96", "{ n = 40, forcing = 8.0, dt = 0.05 }",
                          precision)
    assert result["per_network"]["m"] / 0.05 == pytest.approx(1.68, abs=0.12)


def test_the_reservoir_at_the_defaults_is_its_small_k_value(in_process, tmp_path):
    """The quickstart's tanh reservoir: at the default k, in fp64 and fp32, within 2 % of fp64 at k = 1e-7;
    at the paper's k = 1 (the quickstart's before: -9 %) it is flagged nonlinear."""
    reservoir = dict(source="map:tanh", params="{ g = 1.5, n = 64 }", steps=300, samples=64)
    _, _, small = _apply(in_process, tmp_path, "small", **reservoir, lyapunov="k = 1e-7")
    reference = small["per_network"]["m"]
    for precision in ("fp64", "fp32"):
        _, err, result = _apply(in_process, tmp_path, f"default_{precision}", **reservoir, precision=precision)
        assert result["per_network"]["m"] == pytest.approx(reference, rel=0.02), precision
        assert "warning" not in err
    ds, err, result = _apply(in_process, tmp_path, "paper", **reservoir, lyapunov="k = 1.0")
    assert _outcomes(ds) == {"nonlinear"} and result["per_network"]["m"] is None
    assert result["left_out"]["m"] == {"nonlinear": 64}
    warning, = [line for line in err.splitlines() if "warning" in line]
    assert "64 nonlinear of 64 samples" in warning and "lower k" in warning
    # what it disagreed with: the check's exponent, at 0.1 k, stored per sample
    assert np.isfinite(ds.lyapunov_check.values[0, :16]).all() and np.isnan(ds.lyapunov_check.values[0, 16:]).all()


def test_a_plugin_map_outside_its_linear_regime_is_flagged(tmp_path):
    """A plug-in family (tests/plugins/toy_map.py, x -> 4x^3 - 3x: ln 3) declares no domain: at the
    defaults ln 3; at k = 1e-3 over tau = 5 (separation up to 0.24) flagged nonlinear, warned, left out."""
    env = {"TRANSIENT_PLUGINS": "tests.plugins.toy_map", "PYTHONPATH": str(ROOT)}
    for name, lyapunov in (("defaults", ""), ("large", "k = 1e-3\ntau = 5")):
        write_spec(tmp_path, SPEC.format(name=name, source="map:chebyshev", params="{}", precision="fp64",
                                         steps=300, samples=16, lyapunov=lyapunov), f"{name}.toml")
        applied = run_cli("apply", f"{name}.toml", cwd=tmp_path, **env)
        assert applied.returncode == 0, applied.stderr
        shown = run_cli("show", f"store/{name}.zarr", cwd=tmp_path, **env)
        assert shown.returncode == 0, shown.stderr
        ds = xr.open_zarr(tmp_path / f"store/{name}.zarr", consolidated=False)
        lam = ds.lyapunov_per_step.where(ds.lyapunov_twin == TWIN_OUTCOMES.index("stayed"))
        if name == "defaults":
            assert float(lam.mean()) == pytest.approx(math.log(3), abs=TOLERANCE)
            assert "warning" not in applied.stderr
        else:
            assert (ds.lyapunov_twin.values == TWIN_OUTCOMES.index("nonlinear")).all()
            assert sum("warning" in line for line in applied.stderr.splitlines()) == 1
            assert "16 nonlinear of 16 samples" in applied.stderr
            assert "m=-" in shown.stdout and "leaves out 16 nonlinear" in shown.stdout
