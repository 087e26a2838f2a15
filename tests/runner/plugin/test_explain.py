"""runner explain: every measure's parameters and the variables it writes (names, dims, units) as a
store holds them, in plain text."""

from __future__ import annotations

import textwrap

import pytest
import xarray as xr

from runner.plugin.measures import measures
from runner.plugin.loader import load_plugins
from runner.plugin.study import studies

from tests.runner.helpers import maps_spec

load_plugins()
KINDS = [(study, kind) for study in studies() for kind in measures(study)]


@pytest.mark.parametrize("study, kind", KINDS, ids=[f"{s}:{k}" for s, k in KINDS])
def test_every_measure_is_explained_with_its_variables(in_process, study, kind):
    code, out, err = in_process("explain", kind)
    assert code == 0, err
    assert "``" not in out and ":func:" not in out  # plain text, not reStructuredText
    assert "variables (as the store holds them" in out or "variables: not shown" in out, out


def test_explain_says_what_the_store_will_hold(in_process, tmp_path):
    """The variables explain lists for a measure are those a real store of it holds: names, dims, units."""
    spec = tmp_path / "maps.toml"
    spec.write_text(textwrap.dedent(maps_spec("maps", steps=40, samples=4)))
    assert in_process("apply", spec, "-q")[0] == 0
    ds = xr.open_zarr(tmp_path / "store" / "maps.zarr")
    for kind in ("lyapunov", "transient_chaos", "effective_dimension"):
        _, out, _ = in_process("explain", kind)
        listed = [line.strip() for line in out.split("variables (as the store holds them")[1].splitlines()[1::2]]
        stored = [f"{n} ({', '.join(v.dims)})" + (f" [{v.attrs['units']}]" if "units" in v.attrs else "")
                  for n, v in ds.data_vars.items() if v.attrs.get("runner", "") and f'"measure": "{kind}"' in
                  str(v.attrs.get("runner"))]
        assert listed and sorted(listed) == sorted(stored), (kind, listed, stored)


def test_a_default_chosen_per_network_is_said_so(in_process):
    code, out, _ = in_process("explain", "lyapunov")
    assert code == 0 and "  k = (per network: see below)" in out and "k = None" not in out
