"""The kit's activation context (runner/checkpointed/activations.py): a checkpoint read once through its
family's adapter for every measure of a group, its rows as the adapter captured them, the sentence from a
new stream, and gradients through the same adapter."""

from __future__ import annotations

import torch

from models.activations import tokens
from models.lstm import LSTMLanguageModel, LSTMLanguageModelConfig
from models.registry import family_for
from runner.checkpointed.activations import ActivationCache, Reading


def _model() -> LSTMLanguageModel:
    torch.manual_seed(0)
    return LSTMLanguageModel(LSTMLanguageModelConfig(vocab_size=20, embedding_dim=6, hidden_dim=6)).eval()


def _ids(n: int, seed: int) -> torch.Tensor:
    return torch.randint(0, 20, (2, n), generator=torch.Generator().manual_seed(seed))


def test_a_checkpoint_is_read_once_and_its_rows_are_the_stream_captured():
    model, first, second, sentence = _model(), _ids(5, 1), _ids(4, 2), _ids(7, 3)[:1]
    reads = []

    def reading(n, c, gradients=False):
        reads.append((n, c))
        return Reading(family_for("builtin:lstm-lm"), model, (tokens(first), tokens(second)), tokens(sentence))

    cache = ActivationCache(reading, torch.device("cpu"), size=2)
    with cache.holding(0, 1):
        rows = cache(0, 1).rows
        assert cache(0, 1).rows is rows  # a second measure of the group reads what the first read
    assert reads == [(0, 1)]
    whole = family_for("builtin:lstm-lm").activations(model).capture(tokens(torch.cat([first, second], 1)))
    # rows: the first batch's tokens (sequence by sequence), then the second's, the hidden state carried
    want = torch.cat([whole["lstm2"][:, :5].reshape(-1, 6), whole["lstm2"][:, 5:].reshape(-1, 6)])
    torch.testing.assert_close(rows["lstm2"], want, atol=1e-6, rtol=0)
    alone = family_for("builtin:lstm-lm").activations(model).capture(tokens(sentence))
    torch.testing.assert_close(cache(0, 1).sentence["lstm1"], alone["lstm1"][0], atol=0, rtol=0)  # from zeros
    for c in (2, 3):  # two more: the first is let go
        cache(0, c)
    cache(0, 1)
    assert reads == [(0, 1), (0, 2), (0, 3), (0, 1)]


def test_gradients_come_batch_by_batch_through_the_same_adapter():
    model, x, y = _model(), _ids(6, 4), _ids(6, 5)
    halves = [(x[:, :3], y[:, :3]), (x[:, 3:], y[:, 3:])]

    def reading(n, c, gradients=False):
        losses = tuple((lambda logits, t=t: model.loss(logits, t)) for _, t in halves) if gradients else ()
        return Reading(family_for("builtin:lstm-lm"), model, tuple(tokens(i) for i, _ in halves), losses=losses)

    got = list(ActivationCache(reading, torch.device("cpu")).gradients(0, 0, ["lstm1"]))
    assert len(got) == 2 and all(set(a) == set(g) == {"lstm1"} for a, g in got)
    adapter = family_for("builtin:lstm-lm").activations(model)
    for (inputs, targets), (acts, grads) in zip(halves, got):
        want_a, want_g = adapter.capture_gradients(tokens(inputs), lambda logits, t=targets: model.loss(logits, t),
                                                   ["lstm1"])
        assert torch.equal(acts["lstm1"], want_a["lstm1"]) and torch.equal(grads["lstm1"], want_g["lstm1"])
