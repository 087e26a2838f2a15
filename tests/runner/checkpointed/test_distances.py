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


def test_named_pairs_resolve_to_their_positions_and_a_word_paired_with_itself_is_refused():
    import pytest

    from runner.checkpointed.measures.distances import resolve_pairs

    sentence = ["The", "cat", "sat", "on", "the", "mat"]
    assert resolve_pairs(sentence, [["cat", "mat"]], 10) == ([(1, 5)], ["cat~mat"])
    with pytest.raises(ValueError, match="'cat' and 'Cat' are the same token \\(position 1\\)"):
        resolve_pairs(sentence, [["cat", "Cat"]], 10)
    with pytest.raises(ValueError, match="the analysis sentence has no 'dog'"):
        resolve_pairs(sentence, [["cat", "dog"]], 10)
