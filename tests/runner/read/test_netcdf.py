"""A store as netCDF (runner/read/netcdf.py): flag_values of the variable's own type, attributes netCDF
can hold, zarr's encodings left behind."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from runner.read.netcdf import for_netcdf

netCDF4 = pytest.importorskip("netCDF4", reason="netCDF4 (the test extra's compliance-checker brings it)")


def test_flag_values_take_the_stored_type_and_attributes_fit_netcdf(tmp_path):
    store = tmp_path / "s.zarr"
    ds = xr.Dataset({"outcome": ("network", np.array([0, 1], dtype=np.int8),
                                 {"flag_values": [0, 1], "flag_meanings": "a b", "hint": True, "none": None,
                                  "at": ["x", "y"], "nested": {"k": 1}}),
                     "text": ("network", np.array(["p", "q"], dtype=object))},
                    coords={"network": ("network", np.array(["n1", "n2"], dtype=object), {"long_name": "network"})})
    ds["outcome"].encoding["_FillValue"] = -1
    ds.to_zarr(store, zarr_format=3, consolidated=False)
    read = xr.open_zarr(store, consolidated=False)
    assert read["outcome"].attrs["flag_values"] == [0, 1]  # JSON in zarr
    ready = for_netcdf(read)
    ready.to_netcdf(tmp_path / "s.nc", engine="netcdf4")
    with netCDF4.Dataset(tmp_path / "s.nc") as nc:
        v = nc["outcome"]
        assert v.dtype == np.int8 and v.flag_values.dtype == np.int8 and list(v.flag_values) == [0, 1]
        assert v.hint == "true" and v.at == '["x", "y"]' and v.nested == '{"k": 1}' and "none" not in v.ncattrs()
        assert v._FillValue == -1 and list(nc["network_label"][:]) == ["n1", "n2"]


def test_an_index_of_strings_becomes_a_label_variable(tmp_path):
    ds = xr.Dataset({"x": ("network", [1.0, 2.0], {"units": "1"})},
                    coords={"network": ("network", np.array(["a", "b"], dtype=object), {"long_name": "network"}),
                            "sample": ("sample", np.arange(3), {"long_name": "sample"})})
    ready = for_netcdf(ds)
    assert "network" not in ready.variables and "sample" in ready.indexes  # numbers stay coordinate variables
    assert ready["network_label"].dims == ("network",) and ready["network_label"].attrs["long_name"] == "network"
    ready.to_netcdf(tmp_path / "s.nc", engine="netcdf4")
    back = xr.open_dataset(tmp_path / "s.nc").set_xindex("network_label")
    assert float(back["x"].sel(network_label="b")) == 2.0


def test_a_coordinate_variable_has_no_fill(tmp_path):
    ds = xr.Dataset({"x": ("quantile", [1.0, 2.0], {"units": "1"})},
                    coords={"quantile": ("quantile", np.array([0.25, 0.75]), {"long_name": "quantile"})})
    for_netcdf(ds).to_netcdf(tmp_path / "s.nc", engine="netcdf4")
    with netCDF4.Dataset(tmp_path / "s.nc") as nc:
        assert "_FillValue" not in nc["quantile"].ncattrs() and "_FillValue" in nc["x"].ncattrs()


@pytest.fixture
def small_store(tmp_path, in_process):
    from tests.runner.helpers import maps_spec, write_spec

    assert in_process("apply", "-q", write_spec(tmp_path, maps_spec("nc", steps=20, samples=4)))[0] == 0
    return tmp_path / "store/nc.zarr"


def test_the_export_refuses_what_is_no_store_and_outputs_that_would_land_in_one(tmp_path, small_store):
    from runner.read.netcdf import ExportError, to_netcdf

    (tmp_path / "a_file").write_text("x")
    (tmp_path / "folder").mkdir()
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    cases = [((tmp_path / "missing.zarr", tmp_path / "x.nc"), "is not a store (nothing is there)"),
             ((tmp_path / "a_file", tmp_path / "x.nc"), "is not a store (a file is there)"),
             ((tmp_path / "store/nc.runner", tmp_path / "x.nc"), "a folder without a zarr.json"),
             ((None, tmp_path / "x.nc"), "takes a store path and a file path, not NoneType"),
             ((small_store, small_store / "zarr.json"), "is inside the zarr store"),
             ((small_store, small_store), "is a zarr store"),
             ((small_store, tmp_path / "store/nc.runner/x.nc"), "where the runner keeps nc.zarr's run state"),
             ((small_store, tmp_path / "store/nc.history/x.nc"), "nc.zarr's earlier versions"),
             ((small_store, tmp_path / "folder"), "is a folder; name the netCDF file"),
             ((small_store, tmp_path / "no/such/x.nc"), "does not exist"),
             ((small_store, tmp_path / "a_file/x.nc"), "a_file is a file, not a folder"),
             ((small_store, small_store / "lyapunov" / "x.nc"), "is inside the zarr store"),
             ((small_store, tmp_path / "store/nc.runner/records/x.nc"), "where the runner keeps nc.zarr's run state"),
             ((tmp_path / "store", tmp_path / "x.nc"), "is not a store (a folder without a zarr.json is there)"),
             ((small_store / "lyapunov", tmp_path / "x.nc"), "is a zarr store this runner did not write"),
             (("", tmp_path / "x.nc"), "not an empty one"),
             ((small_store, " "), "not an empty one"),
             ((small_store, 3), "takes a store path and a file path, not PosixPath and int")]
    for (store, out), said in cases:
        with pytest.raises(ExportError, match=said.replace("(", r"\(").replace(")", r"\)")):
            to_netcdf(store, out)
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before
    assert xr.open_zarr(small_store, consolidated=False).load() is not None  # the store is whole


def test_the_export_refuses_a_damaged_store_and_writes_a_whole_one(tmp_path, small_store):
    from runner.read.netcdf import ExportError, to_netcdf

    written = to_netcdf(small_store, tmp_path / "nc.nc")
    with netCDF4.Dataset(written) as nc:
        assert "lyapunov_per_step" in nc.variables
    chunk = next(p for p in (small_store / "lyapunov_per_step").rglob("*") if p.is_file() and p.name != "zarr.json")
    chunk.write_bytes(b"\0" * chunk.stat().st_size)
    with pytest.raises(ExportError, match="nothing is exported from a damaged store"):
        to_netcdf(small_store, tmp_path / "again.nc")
    assert not (tmp_path / "again.nc").exists()
