"""Known answers of the MLM readout's pieces (analyses/readout.py)."""

from __future__ import annotations

import numpy as np
import torch

from analyses.readout import (
    choose_masked,
    masked_token_accuracy,
    ridge_decoder,
    ridge_readout_accuracy,
)


def test_masking_takes_bert_s_count_of_non_special_tokens():
    ids = torch.tensor([[2, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 3], [2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]])
    masked = choose_masked(ids, [0, 2, 3], 0.15, torch.Generator().manual_seed(0))
    assert masked[0].sum() == 2 and not masked[0, [0, -1]].any()  # round(0.15 * 10), never [CLS]/[SEP]
    assert not masked[1].any()  # nothing maskable
    again = choose_masked(ids, [0, 2, 3], 0.15, torch.Generator().manual_seed(0))
    assert torch.equal(masked, again)


def test_accuracy_leaves_out_non_finite_states():
    head = torch.nn.Identity()  # logits = the state: predicts the arg-max coordinate
    states = torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [float("nan"), 0.0, 0.0]])
    acc = masked_token_accuracy(head, states, torch.tensor([1, 2, 2, 0]), chunk=2)
    assert acc.item() == 2 / 3
    assert masked_token_accuracy(head, states[3:], torch.tensor([0])).isnan()


def test_ridge_decoder_is_the_closed_form_solution():
    gen = np.random.default_rng(0)
    x = gen.normal(size=(50, 4))
    y = gen.integers(0, 6, size=50)
    w = ridge_decoder(torch.as_tensor(x), torch.as_tensor(y), vocab=6, ridge=0.1).numpy()
    xb = np.hstack([x, np.ones((50, 1))])
    gram = xb.T @ xb
    expected = np.linalg.solve(gram + 0.1 * np.mean(np.diag(gram)) * np.eye(5), xb.T @ np.eye(6)[y])
    np.testing.assert_allclose(w, expected, rtol=1e-10, atol=1e-12)


def test_ridge_readout_separates_separable_classes():
    gen = torch.Generator().manual_seed(0)
    means = torch.eye(8) * 5
    train_y, test_y = torch.arange(8).repeat(20), torch.arange(8).repeat(3)
    train = means[train_y] + 0.3 * torch.randn(160, 8, generator=gen)
    test = means[test_y] + 0.3 * torch.randn(24, 8, generator=gen)
    assert ridge_readout_accuracy(train, train_y, test, test_y, vocab=8).item() == 1.0
