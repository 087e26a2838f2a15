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

from runner.storage.location import location
from runner.storage.readers import reading

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


class ExportError(ValueError):
    """A store that cannot be exported, or an output path that cannot take the file; the message names it."""


def export_problem(store, path) -> str | None:
    """Why ``store`` cannot be written to the netCDF file ``path``, or None."""
    from runner.storage.store import is_runner_store, is_sweep_root, output_problem  # lazy: filelock

    if not isinstance(store, (str, Path)) or not isinstance(path, (str, Path)):
        return f"to_netcdf takes a store path and a file path, not {type(store).__name__} and {type(path).__name__}"
    if not str(store).strip() or not str(path).strip():
        return f"to_netcdf takes a store path and a file path, not an empty one ({str(store)!r}, {str(path)!r})"
    store, path = location(store), Path(path)
    if not (store / "zarr.json").is_file():
        what = "a file" if store.is_file() else "a folder without a zarr.json" if store.is_dir() else "nothing"
        return f"{store} is not a store ({what} is there)"
    if not is_runner_store(store):
        return f"{store} is a zarr store this runner did not write"
    if is_sweep_root(store):
        return f"{store} holds a sweep: export each point's store ({store}/<key>=<value>) to a file of its own"
    problem = output_problem(path)
    if problem:
        return problem
    if path.is_dir():
        return f"{path} is a folder; name the netCDF file to write (e.g. {path / Path(store.name).with_suffix('.nc')})"
    parent = path.absolute().parent
    if parent.exists() and not parent.is_dir():
        return f"{path}: {parent} is a file, not a folder"
    if not parent.is_dir():
        return f"{path}: its folder {parent} does not exist"
    return None


def to_netcdf(store: str | Path, path: str | Path) -> Path:
    """Write the store at ``store`` (a path, or a URL on object storage) to the netCDF-4 file ``path``;
    returns ``path``. Raises :class:`ExportError` for a path that is not this runner's store, a sweep's
    store (export its points), a damaged store (``runner verify``), or an output that would land in
    a store, its ``.runner`` or ``.history``, a folder or a missing folder. The store is checked and
    read as one version (under the readers' lock on a disk; the head's version on object storage)."""
    import xarray as xr  # lazy: xarray

    from runner.storage.store import runner_dir  # lazy: filelock
    from runner.storage.verify import StoreDamaged, StoreUnreadable, trusted  # lazy: filelock

    problem = export_problem(store, path)
    if problem:
        raise ExportError(problem)
    root = location(store).fresh()
    with reading(runner_dir(root)):
        try:
            trusted(root)
        except (StoreDamaged, StoreUnreadable) as err:
            raise ExportError(str(err).replace("nothing is shown from", "nothing is exported from")) from None
        with xr.open_zarr(root.reader_store(), consolidated=False) as ds:
            for_netcdf(ds).to_netcdf(path, engine="netcdf4")
    return Path(path)
