"""STS-B readout (Inoue et al. 2021, Fig. 3B): Pearson r and the batched Adam readouts, on known answers."""

from __future__ import annotations

import torch
from scipy.stats import pearsonr

from analyses.sts import pearson, readout_predictions, train_linear_readouts


def test_pearson_is_scipys_over_the_finite_rows():
    g = torch.Generator().manual_seed(0)
    pred, target = torch.randn(2, 50, generator=g, dtype=torch.float64), torch.randn(50, generator=g, dtype=torch.float64)
    pred[1, :5] = float("nan")
    r = pearson(pred, target)
    assert abs(r[0].item() - pearsonr(pred[0].numpy(), target.numpy()).statistic) < 1e-12
    assert abs(r[1].item() - pearsonr(pred[1, 5:].numpy(), target[5:].numpy()).statistic) < 1e-12
    assert torch.isnan(pearson(torch.ones(1, 10), target[:10])).all()  # no spread


def test_a_linearly_decodable_score_gives_r_one_and_noise_gives_r_near_zero():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 600, 8, generator=g)
    y = x[0] @ torch.randn(8, generator=g) + 2.5  # step 0 encodes the score, step 1 is unrelated noise
    w = train_linear_readouts(x[:, :500], y[:500], epochs=20, lr=5e-2)
    r = pearson(readout_predictions(w, x[:, 500:]), y[500:])
    assert r[0] > 0.999
    assert abs(r[1]) < 0.3


def test_readouts_trained_together_equal_each_trained_alone():
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(3, 100, 5, generator=g), torch.rand(100, generator=g) * 5
    x[1, 3] = float("nan")  # a diverged sample is left out of its step's loss only
    together = train_linear_readouts(x, y, epochs=3, lr=1e-2, seed=7)
    for k in range(3):
        torch.testing.assert_close(train_linear_readouts(x[k:k + 1], y, epochs=3, lr=1e-2, seed=7)[0], together[k])
    assert torch.isfinite(together).all()
    assert torch.isnan(readout_predictions(together, x)[1, 3])
