"""The attributes the store keeps itself (runner/storage/store.py): ACDD's date_created, set once when the
store is made, and coordinates that take their new attributes when their values did not change."""

from __future__ import annotations

import numpy as np

from runner.core.layout import LayoutBuilder
from runner.storage.store import Store


def _layout():
    b = LayoutBuilder()
    b.index("network", 2, long_name="network")
    b.axis("t_step", 0, 4, 1)
    b.var("x", "m", ("network", "t_step"), "float64", np.nan, "x", "1", "d")
    return b.build()


def test_date_created_is_set_once_and_coordinates_take_new_attributes(tmp_path):
    store = Store(tmp_path / "s.zarr")
    store.open(_layout(), {})
    created = store.group.attrs["date_created"]
    assert created.endswith("+00:00")
    store.group["t_step"].attrs.update({"units": "steps"})  # as a store written before UDUNITS units
    again = Store(tmp_path / "s.zarr")
    again.open(_layout(), {"date_modified": "later"})
    assert again.group.attrs["date_created"] == created and again.group.attrs["date_modified"] == "later"
    assert again.group["t_step"].attrs["units"] == "1"


def test_a_store_made_before_dates_takes_its_first_apply_as_its_creation(tmp_path):
    store = Store(tmp_path / "s.zarr")
    store.open(_layout(), {})
    attrs = {k: v for k, v in store.group.attrs.items() if k != "date_created"}
    store.group.attrs.put({**attrs, "history": "2025-01-02T03:04:05+00:00 runner apply a.toml\nlater"})
    again = Store(tmp_path / "s.zarr")
    again.open(_layout(), {})
    assert again.group.attrs["date_created"] == "2025-01-02T03:04:05+00:00"
