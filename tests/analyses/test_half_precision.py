"""Half precision in, the float32 answer out: every measure family computes float16 and bfloat16
input in float32 or float64 (analyses/__init__.py), so its result on a half tensor equals its result
on the same values given as float32. The known answer is the float32 result on the rounded input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from analyses import (
    cca,
    contextual_decomposition,
    decompositional_interdependence,
    differential_entropy,
    effective_dimension,
    frequency_correlation,
    layer_entropy,
    linear_cka,
    loss_change_allocation,
    participation_spectrum,
    pca_projection,
    pearson,
    per_step_exponent,
    pwcca,
    rbf_cka,
    renormalize,
    sparsity,
    svcca,
    synchronization_offset,
    token_deviation,
    token_entropy,
    train_diagnostic_classifier,
    transient_chaos,
)
from analyses.effective_dimension import cloud_statistics
from analyses.handwriting import nmse, nmse_grid
from analyses.isomap import isomap_2d
from analyses.readout import ridge_decoder, ridge_readout_accuracy
from analyses.rule_probability import target_probability
from analyses.sts import pearson as sts_pearson
from analyses.sts import readout_predictions, train_linear_readouts
from analyses.token_geometry import activation_ratios, pair_distances, quantiles

HALF = [torch.float16, torch.bfloat16]
G = torch.Generator().manual_seed(0)
VIEW_X = torch.randn(60, 5, generator=G)                 # (datapoints, neurons)
VIEW_Y = VIEW_X @ torch.randn(5, 4, generator=G) + 0.3 * torch.randn(60, 4, generator=G)
STATES = torch.randn(3, 6, 4, generator=G)              # (batch, seq, d)
LAM = torch.tensor([[0.3, -0.1, 0.2, -0.4], [-0.2, -0.1, -0.3, -0.4]])
LABELS = torch.arange(60) % 3


def _values(out):
    """The numbers of a result: tensors, arrays, floats, tuples and dataclasses, flattened."""
    if hasattr(out, "__dataclass_fields__"):
        return [v for f in out.__dataclass_fields__ for v in _values(getattr(out, f))]
    if isinstance(out, (tuple, list)):
        return [v for o in out for v in _values(o)]
    if isinstance(out, dict):
        return [v for k in sorted(out) for v in _values(out[k])]
    if isinstance(out, torch.Tensor):
        assert out.dtype not in HALF, f"a half-precision result ({out.dtype})"
        return [out.detach().cpu().double().numpy()]
    if out is None:
        return []
    return [np.asarray(out, dtype=np.float64)]


# One entry per measure; each takes ``h``, which turns a float32 tensor into the dtype under test.
MEASURES = {
    "sparsity": lambda h: sparsity(h(STATES)),
    "sparsity.pearson": lambda h: pearson(h(VIEW_X[:, 0]), h(VIEW_X[:, 1])),
    "sparsity.frequency_correlation": lambda h: frequency_correlation(h(VIEW_X[:, 0].abs()), h(VIEW_X[:, 1].abs())),
    "token_deviation": lambda h: token_deviation(h(STATES)),
    "token_deviation.synchronization_offset": lambda h: synchronization_offset(h(LAM.abs() * 1e-4)),
    "lyapunov.renormalize": lambda h: renormalize(h(STATES), h(STATES + 0.25), 0.5)[0],
    "lyapunov.per_step_exponent": lambda h: per_step_exponent(h(LAM), 10),
    "effective_dimension": lambda h: effective_dimension(h(STATES)),
    "effective_dimension.participation_spectrum": lambda h: participation_spectrum(h(STATES)),
    "effective_dimension.cloud_statistics": lambda h: cloud_statistics(h(STATES)),
    "transient_chaos": lambda h: transient_chaos(h(LAM), 50),
    "pca": lambda h: pca_projection(h(STATES)),
    "cca": lambda h: cca(h(VIEW_X), h(VIEW_Y)).correlations,
    "cca.svcca": lambda h: svcca(h(VIEW_X), h(VIEW_Y)),
    "cca.pwcca": lambda h: pwcca(h(VIEW_X), h(VIEW_Y)),
    "cca.pwcca_google": lambda h: pwcca(h(VIEW_X), h(VIEW_Y), convention="google"),
    "cca.linear_cka": lambda h: (linear_cka(h(VIEW_X), h(VIEW_Y)), linear_cka(h(VIEW_X), h(VIEW_Y), debiased=True)),
    "cca.rbf_cka": lambda h: rbf_cka(h(VIEW_X), h(VIEW_Y)),
    "entropy": lambda h: (differential_entropy(h(VIEW_X), dim=0), differential_entropy(h(VIEW_X), dim=-1, method="gaussian")),
    "entropy.token_entropy": lambda h: token_entropy(h(STATES), k=2),
    "entropy.layer_entropy": lambda h: layer_entropy([h(STATES), h(2 * STATES)], k=2),
    "token_geometry": lambda h: (pair_distances(h(STATES), [[0, 1], [2, 5]]),
                                 activation_ratios(h(STATES[0]), h(STATES[1]), [[0, 1], [2, 5]])),
    "token_geometry.quantiles": lambda h: quantiles(h(VIEW_X), [0.1, 0.5]),
    "loss_change": lambda h: loss_change_allocation({"w": h(VIEW_X)}, {"w": h(VIEW_Y[:, :1].expand(60, 5) * 0.01)},
                                                    next_grads={"w": h(VIEW_X * 0.5)}),
    "diagnostic": lambda h: train_diagnostic_classifier(h(VIEW_X), LABELS, 3, epochs=2).accuracy,
    "contextual_decomposition": lambda h: contextual_decomposition(
        h(STATES), [[1], [0, 2], [5]], layers=[tuple(h(w) for w in _LSTM)]),
    "contextual_decomposition.interdependence": lambda h: decompositional_interdependence(
        h(VIEW_X[:, :3]), h(VIEW_Y[:, :3]), h(VIEW_X[:, 1:4])),
    "rule_probability": lambda h: target_probability(h(STATES), 2, 1),
    "sts": lambda h: (readout_predictions(train_linear_readouts(h(STATES), h(STATES[0, :, 0]), epochs=2),
                                          h(STATES)),
                      sts_pearson(h(STATES[:, :, 0]), h(STATES[0, :, 1]))),
    "readout": lambda h: (ridge_decoder(h(VIEW_X), LABELS, 3),
                          ridge_readout_accuracy(h(VIEW_X[:40]), LABELS[:40], h(VIEW_X[40:]), LABELS[40:], 3)),
    "handwriting": lambda h: (nmse(h(VIEW_X[:, :2]), h(VIEW_Y[:, :2])),
                              nmse_grid(h(torch.randn(4, 6, 3, generator=torch.Generator().manual_seed(1))),
                                        torch.tensor([0, 1, 0, 1, 0, 1]), torch.tensor([True] * 4 + [False] * 2),
                                        {1: h(torch.ones(2, 2, 2))}, [0, 1], [1], first=0)[0]),
    "isomap": lambda h: isomap_2d(h(VIEW_X[:20])),
}
_LSTM = [torch.randn(4 * 3, 4, generator=G) * 0.5, torch.randn(4 * 3, 3, generator=G) * 0.5,
         torch.randn(4 * 3, generator=G) * 0.1, torch.randn(4 * 3, generator=G) * 0.1]


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("name", sorted(MEASURES))
def test_half_precision_gives_the_float32_answer(name, dtype):
    def half(x):
        return x.to(dtype)

    def rounded(x):  # the same values as the half input, held in float32
        return x.to(dtype).to(torch.float32)

    got, want = _values(MEASURES[name](half)), _values(MEASURES[name](rounded))
    assert len(got) == len(want) > 0
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-9, equal_nan=True)


def test_sparsity_of_a_long_uniform_half_vector_does_not_overflow():
    # ||1||_1 = 1e5 overflows float16 (max 65504); chi = sqrt(n) / n = 1 / sqrt(n).
    chi = sparsity(torch.ones(100000, dtype=torch.float16))
    assert chi.dtype == torch.float32
    assert float(chi) == pytest.approx(1 / math.sqrt(100000), rel=1e-6)
    assert float(sparsity(torch.ones(100000, dtype=torch.bfloat16))) == pytest.approx(1 / math.sqrt(100000), rel=1e-6)
