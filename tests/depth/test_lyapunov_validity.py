"""The Lyapunov exponent's k against a map's domain: refused at plan with the fix, and a twin that
left the domain is reported as such, in agreement with every count of divergence."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import xarray as xr

from models.registry import family_for
from runner.studies.depth.measures.lyapunov import TWIN_OUTCOMES
from runner.studies.depth.measures.transient_chaos import CHAOS_OUTCOMES

#: The tolerance of the reference maps' known exponents (tests/runner/run/test_apply.py).
TOLERANCE = 0.03

SPEC = """
[experiment]
name = "logistic"
store = "store/{name}.zarr"

[[model]]
name = "logistic"
source = "map:logistic"
params = {{ r = 4.0 }}

[input]
samples = 16

[dynamics]
steps = 300
precision = "fp64"
{dynamics}

[[measure]]
kind = "lyapunov"
{lyapunov}

[[measure]]
kind = "transient_chaos"
"""


def _write(tmp_path, name, lyapunov="", dynamics=""):
    path = tmp_path / f"{name}.toml"
    path.write_text(SPEC.format(name=name, lyapunov=lyapunov, dynamics=dynamics))
    return path


def test_maps_declare_their_domain():
    assert family_for("map:logistic").domain("map:logistic") == (0.0, 1.0)
    assert family_for("map:henon").domain("map:henon") is None
    assert family_for("hf:albert-base-v2").domain("hf:albert-base-v2") is None


def test_the_papers_k_on_the_logistic_map_is_refused_at_plan_and_the_fix_gives_ln_2(tmp_path, in_process):
    code, out, err = in_process("plan", _write(tmp_path, "paper", lyapunov="k = 1.0"))  # ALBERT's k, tau = 10
    assert code == 65 and "Traceback" not in err
    assert "[[measure]] #1 (lyapunov) k: logistic: k = 1 is not small against the domain [0, 1] of map:logistic" in err
    assert "untrusted_perturbation = true" in err
    fix = float(re.search(r"set k = (\S+) ", err).group(1))
    assert fix <= 1e-3  # within the bound the message names

    code, _, err = in_process("apply", _write(tmp_path, "fixed", lyapunov=f"k = {fix!r}"))
    assert code == 0, err
    ds = xr.open_zarr(tmp_path / "store/fixed.zarr", consolidated=False)
    assert float(ds.lyapunov_per_step.mean()) == pytest.approx(math.log(2), abs=TOLERANCE)
    assert (ds.lyapunov_twin.values == TWIN_OUTCOMES.index("stayed")).all()


def test_a_map_with_a_domain_gets_a_valid_k_by_default(tmp_path, in_process):
    code, _, err = in_process("plan", _write(tmp_path, "paper", lyapunov="k = 1.0"))
    suggested = float(re.search(r"set k = (\S+) ", err).group(1))
    code, _, err = in_process("apply", _write(tmp_path, "default"))  # no k: the network's default
    assert code == 0, err
    ds = xr.open_zarr(tmp_path / "store/default.zarr", consolidated=False)
    assert float(ds.lyapunov_k.sel(network="logistic")) == suggested  # what the refusal would have suggested
    assert "k" not in ds.lyapunov.attrs  # per network, in lyapunov_k
    assert float(ds.lyapunov_per_step.mean()) == pytest.approx(math.log(2), abs=TOLERANCE)
    assert (ds.lyapunov_twin.values == TWIN_OUTCOMES.index("stayed")).all()


def test_a_twin_that_left_the_domain_is_reported_as_such_and_the_counts_agree(tmp_path, in_process):
    spec = _write(tmp_path, "asked", lyapunov="k = 1.0", dynamics="untrusted_perturbation = true")
    code, _, err = in_process("apply", spec)
    assert code == 0, err
    ds = xr.open_zarr(tmp_path / "store/asked.zarr", consolidated=False)
    assert np.isnan(ds.diverged_step.values).all()  # the state stayed in [0, 1]
    assert (ds.lyapunov_twin.values == TWIN_OUTCOMES.index("left_domain")).all()  # its twin did not
    assert (ds.chaos_outcome.values == CHAOS_OUTCOMES.index("twin_left")).all()

    code, out, err = in_process("show", tmp_path / "store/asked.zarr", "--json")
    assert code == 0, err
    shown = json.loads(out)
    diverged = next(r for r in shown["results"] if r["variable"] == "diverged_step")["per_network"]["logistic"]
    assert shown["outcomes"]["chaos_outcome"]["logistic"]["diverged"] == diverged == 0
    assert shown["outcomes"]["lyapunov_twin"]["logistic"]["left_domain"] == 16


def test_a_k_at_the_bound_with_a_long_interval_is_flagged_nonlinear(tmp_path, in_process):
    # k = width / 1000 passes plan; over tau = 10 doubling steps the separation leaves the linear regime
    code, _, err = in_process("apply", _write(tmp_path, "edge", lyapunov="k = 1e-3\ntau = 10"))
    assert code == 0, err
    ds = xr.open_zarr(tmp_path / "store/edge.zarr", consolidated=False)
    assert (ds.lyapunov_twin.values >= TWIN_OUTCOMES.index("nonlinear")).all()
    assert abs(float(ds.lyapunov_per_step.mean()) - math.log(2)) > TOLERANCE  # why it is flagged
