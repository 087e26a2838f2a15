"""The stores of the tiny specs are stores a checker accepts (issue 35): the IOOS compliance checker
(the test extra's ``compliance-checker``) runs CF-1.11 and ACDD-1.3 on each, read as netCDF
(:func:`runner.read.netcdf.to_netcdf`: the checker reads netCDF, not zarr).

What fails the test:

- any ``cf:1.11`` check that fails at high priority (what CF says a file MUST do) or at medium
  priority (what it SHOULD do); the low-priority suggestions are reported, not failed on;
- any ACDD-1.3 attribute the checker rates highly recommended (the global ``title``, ``summary``,
  ``keywords``; each variable's ``long_name``, ``units``, ``coverage_content_type``), but
  ``standard_name`` (CF has none for these quantities, so the stores give none:
  docs/architecture.md) and the units of what is no quantity (booleans, strings, flags, token ids:
  the store's conventions give them none), and ACDD's recommended ``date_created`` and
  ``coverage_content_type``; the other recommended and suggested attributes (creator, geospatial
  and time coverage, ...) are reported by the checker, not failed on;
- any check of either suite that raised instead of scoring;
- a coordinate without ``long_name``, and a ``Conventions`` that does not name CF-1.11.

Each spec's store is the session's ``shipped_store`` (applied once, shared with the golden tests
and the figures').
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.golden.pins import ROOT

pytest.importorskip("compliance_checker", reason="the IOOS compliance checker is missing: pip install -e '.[test]'")
pytest.importorskip("netCDF4", reason="netCDF4 is missing (compliance-checker brings it): pip install -e '.[test]'")

#: the checker's own deprecations (its SOS checkers, how it hands the dataset to its checks)
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

#: The tiny specs: every spec of specs/tiny and the quickstart.
SPECS = {p.stem: p for p in sorted((ROOT / "specs" / "tiny").glob("*.toml"))} | {
    "quickstart": ROOT / "specs" / "quickstart.toml"}
CF, ACDD = "cf:1.11", "acdd:1.3"
HIGH, MEDIUM = 3, 2
#: ACDD's recommended attributes that the store's ``Conventions`` promises besides the highly recommended.
ACDD_PROMISED = ("date_created", "coverage_content_type")
#: What the stores leave out on purpose: CF defines no standard_name for their quantities.
ACDD_LEFT_OUT = ("standard_name",)


def check(nc) -> dict[str, tuple[list, dict]]:
    """``{suite: (scored results, checks that raised)}`` of the compliance checker on the file ``nc``."""
    from compliance_checker.runner import CheckSuite

    CheckSuite.load_all_available_checkers()
    suite = CheckSuite()
    return suite.run_all(suite.load_dataset(str(nc)), [CF, ACDD], skip_checks=[])


def failed(results) -> list:
    """The scored results that did not pass (a score below its maximum, or False)."""
    return [r for r in results if (r.value[0] < r.value[1] if isinstance(r.value, tuple) else not r.value)]


def describe(results) -> str:
    return "\n".join(f"  [{r.weight}] {r.name}: {'; '.join(map(str, r.msgs))}" for r in results)


def acdd_problems(results, unitless: set[str]) -> list:
    """The failed ACDD results the test fails on, with only the messages it fails on: at high priority
    every missing attribute but ACDD_LEFT_OUT and the units of a variable in ``unitless``, at any
    priority one of ACDD_PROMISED."""
    out = []
    for r in failed(results):
        variable = re.match(r'variable "(.+)" missing', str(r.name))
        exempt = {*ACDD_LEFT_OUT, *(("units",) if variable and variable.group(1) in unitless else ())}
        msgs = [str(m) for m in r.msgs if str(m) not in exempt]
        if (r.weight >= HIGH and msgs) or any(p in m for m in msgs for p in ACDD_PROMISED):
            out.append(type(r)(r.weight, r.value, r.name, msgs))
    return out


def unitless(ds) -> set[str]:
    """The variables that have no units by the store's conventions: booleans, strings, flags and
    integer labels (token ids), none of them a quantity; a float always has units."""
    return {str(n) for n, v in ds.variables.items()
            if "units" not in v.attrs and np.dtype(v.encoding.get("dtype", v.dtype)).kind in "biuOUST"}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SPECS))
def test_the_checker_accepts_the_store_of(name, shipped_store, tmp_path):
    import xarray as xr

    from runner.read.netcdf import to_netcdf

    store = shipped_store(name)
    with xr.open_zarr(store, consolidated=False) as ds:
        assert "CF-1.11" in ds.attrs["Conventions"] and "ACDD-1.3" in ds.attrs["Conventions"]
        assert [c for c in ds.coords if not ds[c].attrs.get("long_name")] == []
        exempt = unitless(ds)
    got = check(to_netcdf(store, tmp_path / f"{name}.nc"))
    cf, cf_raised = got[CF]
    acdd, acdd_raised = got[ACDD]
    assert not cf_raised and not acdd_raised, {**cf_raised, **acdd_raised}
    cf_errors = [r for r in failed(cf) if r.weight >= MEDIUM]
    assert not cf_errors, f"{name}: cf:1.11 fails\n{describe(cf_errors)}"
    missing = acdd_problems(acdd, exempt)
    assert not missing, f"{name}: ACDD-1.3 misses\n{describe(missing)}"
