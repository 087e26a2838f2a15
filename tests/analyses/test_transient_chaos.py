"""Transient chaos length and mean exponent (Sec. II.B, Fig. 4D)."""

import dataclasses
import math

import pytest
import torch

from analyses.transient_chaos import TransientChaos, summarize_chaos, transient_chaos

NAN = float("nan")


def series():
    return torch.tensor(
        [
            [0.3, 0.1, -0.2, 0.5, -0.1, -0.4],  # last positive j = 3
            [-0.1, -0.2, -0.3, -0.1, -0.5, -0.2],  # never positive
            [0.2, 0.4, 0.6, 0.1, 0.3, 0.2],  # positive to the end, j = 5
            [0.2, NAN, 0.4, NAN, -0.1, 0.0],  # NaN ignored, zero is not positive: j = 2
            [0.3, 0.2, NAN, NAN, NAN, NAN],  # diverged: not measured
        ],
        dtype=torch.float64,
    )


def test_lengths_and_chaotic_flags():
    r = transient_chaos(series(), tau=50)
    assert r.length.dtype == torch.float64
    torch.testing.assert_close(r.length, torch.tensor([200, 0, 300, 150, NAN], dtype=torch.float64), equal_nan=True)
    assert r.chaotic.dtype == torch.bool
    assert r.chaotic.tolist() == [True, False, True, True, False]


def test_censored_and_unmeasured_lengths_are_marked():
    r = transient_chaos(series(), tau=50)
    # chaotic up to the last interval: the run ended first, so 300 is only a lower bound
    assert r.censored.tolist() == [False, False, True, False, False]
    assert r.measured.tolist() == [True, True, True, True, False]


def test_summary_counts_only_measured_samples():
    s = summarize_chaos(transient_chaos(torch.full((3, 4), NAN, dtype=torch.float64), tau=5))
    assert math.isnan(float(s["fraction_never_chaotic"])) and math.isnan(float(s["mean_exponent"]))


def test_mean_exponent_over_chaotic_intervals():
    r = transient_chaos(series(), tau=10)
    expected = torch.tensor(
        [(0.3 + 0.1 - 0.2 + 0.5) / 4, NAN, (0.2 + 0.4 + 0.6 + 0.1 + 0.3 + 0.2) / 6, (0.2 + 0.4) / 2, NAN],
        dtype=torch.float64,
    )
    assert r.mean_exponent.dtype == torch.float64
    torch.testing.assert_close(r.mean_exponent, expected, equal_nan=True)


def test_summary():
    s = summarize_chaos(transient_chaos(series(), tau=10))
    torch.testing.assert_close(s["fraction_never_chaotic"], torch.tensor(0.25, dtype=torch.float64))
    mean = ((0.3 + 0.1 - 0.2 + 0.5) / 4 + 1.8 / 6 + (0.2 + 0.4) / 2) / 3
    torch.testing.assert_close(s["mean_exponent"], torch.tensor(mean, dtype=torch.float64))


def test_summary_with_no_chaotic_sample():
    s = summarize_chaos(transient_chaos(-torch.ones(4, 3), tau=5))
    assert float(s["fraction_never_chaotic"]) == 1.0
    assert math.isnan(float(s["mean_exponent"]))


def test_float32_input_and_frozen_result():
    r = transient_chaos(series().float(), tau=1)
    assert r.length.tolist()[:4] == [4, 0, 6, 3] and math.isnan(r.length.tolist()[4])
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.length = torch.zeros(5)
    assert isinstance(r, TransientChaos)


def test_no_host_sync_on_meta_device():
    r = transient_chaos(torch.empty(8, 20, device="meta"), tau=50)
    assert r.length.shape == (8,) and r.mean_exponent.shape == (8,)
    assert summarize_chaos(r)["mean_exponent"].shape == ()
