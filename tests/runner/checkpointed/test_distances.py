"""The kit's distances measure: the Euclidean ratio to the first layer, on known answers."""

from __future__ import annotations

import numpy as np


def test_the_euclidean_ratio_leaves_out_pairs_at_distance_0():
    from runner.checkpointed.measures.distances import mean_ratio_to_first

    eu = np.array([[1.0, 0.0, 2.0], [2.0, 5.0, 2.0]])  # layers x pairs; the second pair: one word twice
    np.testing.assert_array_equal(mean_ratio_to_first(eu), [1.0, 1.5])  # (2 + 1) / 2: the pair at 0 left out
    assert np.isnan(mean_ratio_to_first(np.zeros((2, 1)))).all()  # no pair with a ratio: no mean


def test_the_stored_description_says_which_pairs_are_left_out():
    from runner.checkpointed.measures.distances import Distances, Params
    from runner.core.layout import LayoutBuilder
    from runner.plugin.measures import declare

    b = LayoutBuilder()
    for axis in ("network", "checkpoint", "layer"):  # the study's axes
        b.index(axis, 1)
    declare(Distances(Params(kind="distances", pairs=[["a", "b"]])), b,
            type("Shape", (), {"sentence": ["a", "b"], "layers": ["embedding"], "names": ["n"]})())
    assert "whose layer-0 distance is 0" in b.vars["euclidean_ratio"].attrs["description"]
