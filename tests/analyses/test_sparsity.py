"""Known answers for chi = ||v||_2 / ||v||_1 and its per-word statistics."""

import math

import pytest
import torch

from analyses.sparsity import WordSparsityAccumulator, frequency_correlation, pearson, sparsity


def test_sparsity_known_vectors():
    assert sparsity(torch.tensor([0.0, 0.0, -2.5, 0.0])).item() == pytest.approx(1.0)
    for d in (2, 7, 200):
        assert sparsity(torch.full((d,), 0.3, dtype=torch.float64)).item() == pytest.approx(1 / math.sqrt(d))
    assert sparsity(torch.tensor([3.0, 4.0])).item() == pytest.approx(5 / 7)
    assert sparsity(torch.tensor([3, -4])).item() == pytest.approx(5 / 7)  # integers, signs
    assert math.isnan(sparsity(torch.zeros(5)).item())


def test_sparsity_batched_and_dim():
    v = torch.tensor([[3.0, 4.0], [1.0, 0.0], [1.0, 1.0]])
    expected = torch.tensor([5 / 7, 1.0, 1 / math.sqrt(2)])
    assert torch.allclose(sparsity(v), expected)
    assert torch.allclose(sparsity(v.T, dim=0), expected)
    assert sparsity(torch.randn(4, 3, 10)).shape == (4, 3)


def test_accumulator_matches_loop_and_skips_nan():
    g = torch.Generator().manual_seed(0)
    vocab, chunks = 12, []
    acc = WordSparsityAccumulator(vocab, "cpu")
    for _ in range(5):
        ids = torch.randint(0, vocab - 2, (40,), generator=g)  # last two words unseen
        vals = torch.rand(40, generator=g)
        vals[::13] = float("nan")
        acc.update(ids, vals)
        chunks.append((ids, vals))
    sums, counts = [0.0] * vocab, [0] * vocab
    for ids, vals in chunks:
        for i, v in zip(ids.tolist(), vals.tolist()):
            if not math.isnan(v):
                sums[i] += v
                counts[i] += 1
    means = acc.means()
    assert acc.counts.tolist() == counts
    for w in range(vocab):
        if counts[w]:
            assert means[w].item() == pytest.approx(sums[w] / counts[w], rel=1e-12)
        else:
            assert math.isnan(means[w].item())

    copy = WordSparsityAccumulator(vocab, "cpu")
    copy.load_state_dict(acc.state_dict())
    assert torch.equal(copy.counts, acc.counts)
    assert torch.allclose(copy.means(), acc.means(), equal_nan=True)


def test_pearson_known_values():
    x = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert pearson(x, torch.tensor([1.0, 3.0, 2.0, 4.0])).item() == pytest.approx(0.8)
    assert pearson(x, 2 * x + 1).item() == pytest.approx(1.0)
    assert pearson(x, -x).item() == pytest.approx(-1.0)
    nan = float("nan")
    padded_x = torch.tensor([1.0, nan, 2.0, 3.0, 7.0, 4.0])
    padded_y = torch.tensor([1.0, 9.0, 3.0, 2.0, nan, 4.0])
    assert pearson(padded_x, padded_y).item() == pytest.approx(0.8)
    assert math.isnan(pearson(torch.tensor([1.0, nan]), torch.tensor([2.0, 3.0])).item())
    assert math.isnan(pearson(torch.ones(4), x).item())


def test_frequency_correlation():
    counts = torch.tensor([1000, 100, 10, 0, 5000, 300])
    nan = float("nan")
    means = torch.tensor([0.4, 0.31, 0.301, nan, 0.8, 0.33], dtype=torch.float64)  # 0.3 + 1e-4 * count
    assert frequency_correlation(means, counts).item() == pytest.approx(1.0)
    log_means = torch.log(counts.clamp_min(1).double())
    log_means[3] = nan
    assert frequency_correlation(log_means, counts, log=True).item() == pytest.approx(1.0)
    assert frequency_correlation(log_means, counts).item() < 0.99
    # min_count leaves only the three most frequent words.
    kept = torch.tensor([0.5, 9.0, 9.0, 9.0, 0.1, 0.9], dtype=torch.float64)
    expected = pearson(torch.tensor([0.5, 0.1, 0.9]), torch.tensor([1000.0, 5000.0, 300.0]))
    assert frequency_correlation(kept, counts, min_count=300).item() == pytest.approx(expected.item())
