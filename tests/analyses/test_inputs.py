"""Every public measure takes numpy arrays and torch tensors alike, refuses shapes that cannot be right, and
keeps float64 where it is asked for (analyses/__init__.py documents the layouts)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from analyses import (
    differential_entropy,
    effective_dimension,
    frequency_correlation,
    initial_perturbation,
    layer_entropy,
    local_lyapunov,
    loss_change_allocation,
    participation_spectrum,
    pca_projection,
    pearson,
    per_step_exponent,
    renormalize,
    sparsity,
    synchronization_offset,
    token_deviation,
    token_entropy,
    train_diagnostic_classifier,
    transient_chaos,
)
from analyses.lyapunov import default_k
from analyses.token_geometry import activation_ratios, pair_distances

RNG = np.random.default_rng(0)
A = RNG.normal(size=(12, 5))          # (samples, features)
H = RNG.normal(size=(2, 6, 4))        # (batch, seq, d) / (..., n_tokens, n_hidden)
V = RNG.normal(size=(7,))


def _same(a, b):
    a = a.numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    b = b.numpy() if isinstance(b, torch.Tensor) else np.asarray(b)
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, equal_nan=True)


CASES = {
    "sparsity": lambda x: sparsity(x(A)),
    "pearson": lambda x: pearson(x(V), x(V ** 2)),
    "frequency_correlation": lambda x: frequency_correlation(x(V), x(np.arange(7.0))),
    "effective_dimension": lambda x: effective_dimension(x(A)),
    "participation_spectrum": lambda x: participation_spectrum(x(A)),
    "token_deviation": lambda x: token_deviation(x(H)),
    "synchronization_offset": lambda x: synchronization_offset(x(np.array([[1.0, 1e-6, 1.0], [1.0, 1.0, 1.0]]))),
    "pca_projection": lambda x: pca_projection(x(A))[0],
    "per_step_exponent": lambda x: per_step_exponent(x(V), 10),
    "renormalize": lambda x: renormalize(x(A), x(A + 0.1), 0.5)[0],
    "transient_chaos": lambda x: transient_chaos(x(np.array([[0.3, -0.1, 0.2, -0.4]])), 5).length,
    "local_lyapunov": lambda x: local_lyapunov(lambda s: 4 * s * (1 - s), x(np.linspace(0.1, 0.9, 5)), steps=50,
                                               generator=torch.Generator().manual_seed(0)),
    "initial_perturbation": lambda x: initial_perturbation(x(A), 1.0, torch.Generator().manual_seed(0)),
    "loss_change_allocation": lambda x: loss_change_allocation({"w": x(A)}, {"w": x(A * 0.01)})["w"],
    "diagnostic": lambda x: train_diagnostic_classifier(x(A), x(np.arange(12) % 2), 2, epochs=2).accuracy,
    "differential_entropy": lambda x: differential_entropy(x(A), dim=0),
    "token_entropy": lambda x: token_entropy(x(H), k=2),
    "layer_entropy": lambda x: layer_entropy([x(H), x(H * 2)], k=2),
    "pair_distances": lambda x: pair_distances(x(H), [[0, 1], [2, 5]])[0],
    "activation_ratios": lambda x: activation_ratios(x(H[0]), x(H[1]), [[0, 1], [2, 5]]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_numpy_and_torch_give_the_same_result(name):
    run = CASES[name]
    from_numpy = run(lambda a: a)
    from_torch = run(torch.from_numpy)
    _same(from_numpy, from_torch)


BAD = {
    "sparsity 0-D": lambda: sparsity(np.float64(3.0)),
    "sparsity dim": lambda: sparsity(A, dim=2),
    "pearson 2-D": lambda: pearson(A, A),
    "frequency_correlation lengths": lambda: frequency_correlation(V, np.arange(6.0)),
    "effective_dimension 1-D": lambda: effective_dimension(V),
    "participation_spectrum 1-D": lambda: participation_spectrum(V),
    "token_deviation 1-D": lambda: token_deviation(V),
    "synchronization_offset 0-D": lambda: synchronization_offset(np.float64(1.0)),
    "pca_projection 1-D": lambda: pca_projection(V),
    "renormalize shapes": lambda: renormalize(A, A.T, 1.0),
    "transient_chaos 0-D": lambda: transient_chaos(np.float64(0.1), 5),
    "local_lyapunov 0-D": lambda: local_lyapunov(lambda s: s, np.float64(0.3), steps=10),
    "initial_perturbation 0-D": lambda: initial_perturbation(np.float64(0.3), 1.0),
    "loss_change_allocation shapes": lambda: loss_change_allocation({"w": A.T}, {"w": A}),
    "diagnostic transposed labels": lambda: train_diagnostic_classifier(A.T, np.arange(12) % 2, 2),
    "differential_entropy dim": lambda: differential_entropy(A, dim=3),
    "token_entropy 2-D": lambda: token_entropy(A),
    "token_entropy mask": lambda: token_entropy(H, np.ones((6, 2))),
    "layer_entropy layers": lambda: layer_entropy([H, H[:, :3]]),
    "pair_distances 2-D": lambda: pair_distances(A, [[0, 1]]),
    "activation_ratios positions": lambda: activation_ratios(H[0], H[1][:3], [[0, 1]]),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_shape_that_cannot_be_right_raises(name):
    with pytest.raises(ValueError):
        BAD[name]()


def test_cca_views_transposed_raise():
    from analyses import svcca

    with pytest.raises(ValueError):
        svcca(A, A.T)


def test_local_lyapunov_defaults_are_finite_and_fp64_gives_ln2_per_step():
    x0 = np.linspace(0.05, 0.95, 40)  # float64
    lam = local_lyapunov(lambda s: 4.0 * s * (1.0 - s), x0, steps=2000, generator=torch.Generator().manual_seed(0))
    assert lam.dtype == torch.float64 and lam.shape == (40, 200)
    assert torch.isfinite(lam).all()
    assert abs(float(per_step_exponent(lam, 10).mean()) - math.log(2.0)) < 0.01
    assert default_k(x0) == pytest.approx(np.finfo(np.float64).eps ** 0.5)
    # fp32 states: a larger default k that fp32 resolves; every value still finite
    lam32 = local_lyapunov(lambda s: 4.0 * s * (1.0 - s), torch.tensor(x0, dtype=torch.float32), steps=500)
    assert lam32.dtype == torch.float64 and torch.isfinite(lam32).all()
    assert default_k(torch.ones(3, 100)) == pytest.approx(np.finfo(np.float32).eps ** 0.5 * 10)


@pytest.mark.parametrize("dtype", [torch.float64, np.float64])
def test_float64_in_float64_out(dtype):
    x = torch.from_numpy(A) if dtype is torch.float64 else A
    assert sparsity(x).dtype == torch.float64
    assert token_deviation(H if dtype is np.float64 else torch.from_numpy(H)).dtype == torch.float64
    assert effective_dimension(x).dtype == torch.float64
    assert pca_projection(x)[0].dtype == torch.float64
    assert renormalize(x, x + 1, 1.0)[1].dtype == torch.float64
