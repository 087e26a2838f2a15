"""The store's conventions as LayoutBuilder writes them (runner/core/layout.py): UDUNITS units, what a
coordinate counts, ACDD's coverage_content_type."""

from __future__ import annotations

import numpy as np

from runner.core.layout import LayoutBuilder, counted, counts, flags, internal


def test_a_time_axis_counts_steps_in_units_udunits_parses():
    b = LayoutBuilder()
    b.axis("x_step", 0, 10, 5)
    attrs = b.coords["x_step"].attrs
    assert attrs["units"] == "1" and attrs["long_name"] == "step t" and attrs["coverage_content_type"] == "coordinate"
    assert counted(attrs) == "steps" and internal(attrs) == {"counts": "steps"}


def test_counted_reads_what_a_coordinate_counts_and_the_units_of_older_stores():
    b = LayoutBuilder()
    b.coord("epoch", np.arange(3), long_name="epoch", **counts("epochs"))
    assert counted(b.coords["epoch"].attrs) == "epochs" and b.coords["epoch"].attrs["units"] == "1"
    assert counted({"units": "steps"}) == "steps" and counted({"units": "epochs"}) == "epochs"  # store_format 3, before
    assert counted({"units": "1"}) is None and counted({}) is None and counted(None) is None


def test_variables_and_coordinates_say_their_coverage_content_type():
    b = LayoutBuilder()
    b.index("network", 2, long_name="network")
    b.var("x", "m", ("network",), "float64", np.nan, "x (steps)", "1", "d")
    b.var("y", "m", ("network",), "float64", np.nan, "y", "1", "d", coverage_content_type="auxiliaryInformation")
    b.var("z", "m", ("network",), "int8", -1, "z", None, "d", **flags("a", "b"))
    assert b.coords["network"].attrs["coverage_content_type"] == "coordinate"
    assert [b.vars[n].attrs["coverage_content_type"] for n in "xyz"] == ["modelResult", "auxiliaryInformation",
                                                                          "modelResult"]
    assert b.vars["z"].attrs["flag_values"] == [0, 1] and "units" not in b.vars["z"].attrs
