"""Token deviation D(t) (Eq. 5) and synchronization offset (Fig. 2B)."""

import math

import pytest
import torch

from analyses.token_deviation import SyncOffsetTracker, synchronization_offset, token_deviation


def test_identical_tokens_give_zero():
    x = torch.randn(1, 1, 16).expand(3, 32, 16)
    torch.testing.assert_close(token_deviation(x), torch.zeros(3), atol=1e-12, rtol=0)
    xi = torch.randint(-50, 50, (1, 1, 16)).double().expand(3, 32, 16)
    assert torch.equal(token_deviation(xi), torch.zeros(3, dtype=torch.float64))


def test_two_tokens_at_plus_minus_a_e1():
    a = 0.75
    x = torch.zeros(2, 5, dtype=torch.float64)
    x[0, 0], x[1, 0] = a, -a
    d = token_deviation(x + 3.0)  # a common offset does not matter
    assert d.shape == ()
    assert d == a * a


def test_known_value_and_batched_shapes():
    # Tokens 0, 1, 2, 3 along one axis: mean 1.5, D = (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25.
    x = torch.tensor([0.0, 1.0, 2.0, 3.0], dtype=torch.float64)[:, None] * torch.tensor([1.0, 0.0])
    x = x.to(torch.float64).expand(2, 3, 4, 2)
    d = token_deviation(x)
    assert d.shape == (2, 3)
    torch.testing.assert_close(d, torch.full((2, 3), 1.25, dtype=torch.float64))


def test_half_precision_is_computed_in_float32():
    x = torch.randn(4, 8, 6).to(torch.bfloat16)
    d = token_deviation(x)
    assert d.dtype == torch.float32
    torch.testing.assert_close(d, token_deviation(x.double()).float())


def decaying_series():
    t = torch.arange(80, dtype=torch.float64)
    rates = torch.tensor([0.5, 0.2, 0.0, 1.0], dtype=torch.float64)[:, None]
    return torch.exp(-rates * t)  # D(t) = e^{-r t}


def test_offset_of_decaying_series():
    d = decaying_series()
    off = synchronization_offset(d, threshold=1e-5)
    # First t with e^{-r t} < 1e-5: t > 5 ln 10 / r.
    expected = [math.floor(5 * math.log(10) / r) + 1 for r in (0.5, 0.2)] + [-1, 12]
    assert off.dtype == torch.int64
    assert off.tolist() == expected


def test_offset_never_and_nan():
    d = torch.tensor([[1.0, float("nan"), 1e-6], [float("nan"), float("nan"), 1.0]])
    assert synchronization_offset(d).tolist() == [2, -1]


def test_offset_leading_dims():
    d = decaying_series().reshape(2, 2, 80)
    assert synchronization_offset(d).shape == (2, 2)


def test_tracker_agrees_with_offset():
    d = decaying_series()
    d[0, 20:30] = float("nan")  # would otherwise synchronize at t = 24
    tracker = SyncOffsetTracker(4)
    assert tracker.offset.tolist() == [-1] * 4
    for t in range(d.shape[1]):
        tracker.update(t, d[:, t])
    assert tracker.offset.dtype == torch.int64
    assert tracker.offset.tolist() == [30, 58, -1, 12]
    assert torch.equal(tracker.offset, synchronization_offset(d))
    # Once set, the offset never moves; the never-synchronized one is set now.
    tracker.update(80, torch.zeros(4))
    assert tracker.offset.tolist() == [30, 58, 80, 12]


@pytest.mark.parametrize("cut", [0, 10, 25, 79])
def test_tracker_state_dict_round_trip(cut):
    d = decaying_series()
    first = SyncOffsetTracker(4, threshold=1e-3)
    for t in range(cut):
        first.update(t, d[:, t])
    state = first.state_dict()
    resumed = SyncOffsetTracker(4)
    resumed.load_state_dict(state)
    assert resumed.threshold == 1e-3
    for t in range(cut, 80):
        first.update(t, d[:, t])
        resumed.update(t, d[:, t])
    assert torch.equal(resumed.offset, first.offset)
    assert torch.equal(resumed.offset, synchronization_offset(d, threshold=1e-3))
    # The saved state is a snapshot, not a view of the live tracker.
    expected = synchronization_offset(d[:, :cut], 1e-3) if cut else torch.full((4,), -1)
    assert state["offset"].tolist() == expected.tolist()


def test_no_host_sync_on_meta_device():
    x = torch.empty(5, 32, 64, device="meta")
    d = token_deviation(x)
    assert d.shape == (5,)
    assert synchronization_offset(torch.empty(5, 9, device="meta")).shape == (5,)
    tracker = SyncOffsetTracker(5, device="meta")
    tracker.update(0, d)
    assert tracker.offset.shape == (5,)


def test_threshold_is_strict():
    # "falls below" the threshold: D == threshold is not yet synchronized.
    d = torch.tensor([[1e-5, 1e-5, 9e-6]], dtype=torch.float64)
    assert synchronization_offset(d, threshold=1e-5).tolist() == [2]
    tracker = SyncOffsetTracker(1, threshold=1e-5)
    for t in range(3):
        tracker.update(t, d[:, t])
    assert tracker.offset.tolist() == [2]
