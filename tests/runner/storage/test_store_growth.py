"""A longer run's arrays grow along their step axes with the old values in place
(runner/storage/store.py's plan_reshape); an axis whose old values are not the first of the new
ones is remade empty, as before."""

from __future__ import annotations

import numpy as np

from runner.core.layout import LayoutBuilder
from runner.storage.store import Store


def _layout(stop: int, start: int = 0, segment: int = 2):
    b = LayoutBuilder(segment=segment)
    b.index("network", 2, long_name="network")
    b.axis("t_step", start, stop, 1)
    b.var("x", "m", ("network", "t_step"), "float64", np.nan, "x", "1", "d")
    return b.build()


def _written(tmp_path) -> tuple[Store, np.ndarray]:
    store = Store(tmp_path / "s.zarr")
    store.open(_layout(4), {})
    values = np.arange(10, dtype=np.float64).reshape(2, 5)
    store.write("x", (slice(None), slice(None)), values)
    return store, values


def test_a_grown_step_axis_keeps_the_old_values_first(tmp_path):
    _, values = _written(tmp_path)
    again = Store(tmp_path / "s.zarr")
    reshape = again.reshape(_layout(8))
    assert reshape.grow == {"x": (2, 9)} and not reshape.remake  # resized in place: its chunks stay
    again.open(_layout(8), {}, reshape)
    grown = again.read("x")
    assert grown.shape == (2, 9) and np.array_equal(grown[:, :5], values) and np.isnan(grown[:, 5:]).all()


def test_new_chunks_carry_the_old_values_into_a_remade_array(tmp_path):
    _, values = _written(tmp_path)
    again = Store(tmp_path / "s.zarr")
    layout = _layout(8, segment=3)  # another segment length: other chunks
    reshape = again.reshape(layout)
    assert reshape.remake == {"x": {"0", "1"}} and not reshape.grow  # every network's values carried
    again.open(layout, {}, reshape)
    grown = again.read("x")
    assert np.array_equal(grown[:, :5], values) and np.isnan(grown[:, 5:]).all()


def test_an_axis_that_moves_is_remade_empty(tmp_path):
    _written(tmp_path)
    again = Store(tmp_path / "s.zarr")
    assert again.reshape(_layout(8, start=1)).remake == {"x": set()}  # no values kept: their tasks run again
    shorter = Store(tmp_path / "s.zarr").reshape(_layout(2))
    assert shorter.remake == {"x": set()}


def test_a_variable_that_gains_a_dimension_is_remade_empty(tmp_path):
    """(network, t_step) to (network, t_step, k), with a longer step axis too: remade, not grown (the
    growth check compared shapes axis by axis and ran past the old ones)."""
    _written(tmp_path)
    b = LayoutBuilder(segment=2)
    b.index("network", 2, long_name="network")
    b.axis("t_step", 0, 8, 1)
    b.index("k", 3, long_name="k")
    b.var("x", "m", ("network", "t_step", "k"), "float64", np.nan, "x", "1", "d")
    reshape = Store(tmp_path / "s.zarr").reshape(b.build())
    assert reshape.remake == {"x": set()} and not reshape.grow
