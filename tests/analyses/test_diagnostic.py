"""Known answers for the ReLU + softmax diagnostic classifier."""

import numpy as np
import pytest
import torch

from analyses.diagnostic import train_diagnostic_classifier


@pytest.fixture(autouse=True)
def _one_thread():
    # Probes this small are faster single-threaded, and far faster on a busy
    # machine where intra-op threads wait on one another.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _features(n: int, d: int, seed: int) -> torch.Tensor:
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed))


def test_linearly_separable_labels_are_learned():
    x = _features(1200, 8, 0)
    w = torch.randn(8, 3, generator=torch.Generator().manual_seed(1))
    labels = (x @ w).argmax(dim=1)
    res = train_diagnostic_classifier(x, labels, 3, epochs=40, lr=1e-2, batch_size=320, seed=0)
    assert res.accuracy.item() > 0.9
    assert (res.n_train, res.n_val) == (960, 240)


def test_random_labels_stay_at_chance():
    x = _features(1200, 8, 2)
    labels = torch.randint(0, 4, (1200,), generator=torch.Generator().manual_seed(3))
    res = train_diagnostic_classifier(x, labels, 4, epochs=40, lr=1e-2, batch_size=320, seed=0)
    assert abs(res.accuracy.item() - 0.25) < 0.1
    assert abs(res.majority_accuracy.item() - 0.25) < 0.1


def test_seed_makes_it_deterministic():
    x = _features(400, 5, 4)
    labels = (x[:, 0] > 0).long()
    a = train_diagnostic_classifier(x, labels, 2, epochs=5, lr=1e-2, seed=7)
    b = train_diagnostic_classifier(x, labels, 2, epochs=5, lr=1e-2, seed=7)
    assert a == b


def test_wilson_interval_matches_the_textbook_values():
    from analyses.diagnostic import wilson_interval

    # Wilson 1927's score interval at 95%: 5 of 10 -> [0.2366, 0.7634]; 0 of 10 -> [0, 0.2775] (not [0, 0])
    assert np.allclose(wilson_interval(5, 10), (0.2366, 0.7634), atol=5e-5)
    assert np.allclose(wilson_interval(0, 10), (0.0, 0.2775), atol=5e-5)
    low, high = wilson_interval(np.array([1, 81]), np.array([10, 263]))  # vectorised
    assert np.allclose(low, (0.0179, 0.2553), atol=5e-4) and np.allclose(high, (0.4042, 0.3662), atol=5e-4)
    assert np.isnan(wilson_interval(0, 0)).all()


def test_an_interval_is_judged_against_the_majority_class():
    from analyses.diagnostic import against_majority

    low, high = np.array([0.5, 0.1, 0.1, 0.3]), np.array([0.7, 0.2, 0.6, 0.4])
    # above (low > majority), below (high < majority), holding it, and holding it at its edge
    np.testing.assert_array_equal(against_majority(low, high, [0.4, 0.3, 0.3, 0.4]), [0, 2, 1, 1])
