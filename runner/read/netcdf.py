"""A store as a netCDF file, for tools that read netCDF (the IOOS compliance checker, ncdump, Panoply).

A zarr v3 store keeps attributes as JSON: ``flag_values`` is a list of ints there, and an attribute
may be a boolean or a nested value that netCDF cannot hold. :func:`for_netcdf` gives each
``flag_values`` the type of its variable as stored (int8 for an outcome: CF wants them alike),
turns each index of strings into a label variable (``network`` into ``network_label``: CF wants
coordinate variables numeric), writes booleans as ``"true"``/``"false"``, nested values and lists of
strings as JSON text, drops ``None``, and keeps of each variable's encoding only what netCDF uses
(its stored type and fill). :func:`to_netcdf` writes it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

#: The suffix of the label variable (CF 6.1) that holds a string index's values in netCDF.
LABEL = "_label"
#: The encoding entries a netCDF file keeps from a zarr store's (chunks and codecs are zarr's own).
KEPT_ENCODING = ("dtype", "_FillValue", "units", "calendar")


def _attr(value: Any) -> Any:
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, dict) or (isinstance(value, (list, tuple)) and not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in value)):
        return json.dumps(value)  # kept whole, as JSON text
    return value


def _attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: _attr(v) for k, v in attrs.items() if v is not None}


def for_netcdf(ds):
    """``ds`` (``xr.open_zarr`` of a store) ready for ``to_netcdf``: attributes netCDF can hold,
    ``flag_values`` of each variable's stored type, and each index of strings (``network``,
    ``layer``, ...) as a label variable ``<dim>_label`` along its dimension: CF's coordinate variables
    (named as their dimension) are numeric and strictly monotonic, and labels are auxiliary
    coordinates (CF 6.1). ``ds.set_xindex("network_label")`` selects by label again."""
    labels = [str(d) for d in ds.dims if d in ds.coords and ds[d].dtype.kind in "OUST"]
    out = ds.drop_indexes(labels).rename_vars({d: f"{d}{LABEL}" for d in labels}) if labels else ds.copy()
    out.attrs = _attrs(dict(ds.attrs))
    for name in list(out.variables):
        var = out.variables[name]
        stored = np.dtype(var.encoding.get("dtype", var.dtype))
        attrs = _attrs(dict(var.attrs))
        if "flag_values" in attrs:
            attrs["flag_values"] = np.asarray(attrs["flag_values"], dtype=stored)
        var.attrs = attrs
        var.encoding = {k: v for k, v in var.encoding.items() if k in KEPT_ENCODING}
        if stored.kind in "OUT" or var.dtype.kind in "OUT":  # text: netCDF4's variable-length strings
            var.encoding.pop("_FillValue", None)
            var.encoding.pop("dtype", None)
        elif var.dims == (name,):  # a coordinate variable has no missing values (CF 2.5.1): no fill
            var.encoding["_FillValue"] = None
    return out


def to_netcdf(store: str | Path, path: str | Path) -> Path:
    """Write the store at ``store`` (a path) to the netCDF-4 file ``path``; returns ``path``."""
    import xarray as xr  # lazy: xarray

    with xr.open_zarr(store, consolidated=False) as ds:
        for_netcdf(ds).to_netcdf(path, engine="netcdf4")
    return Path(path)
