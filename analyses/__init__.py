"""Measures of network dynamics: pure functions, tensors in, tensors out.

One measure per module (Inoue et al. 2021, "Transient Chaos in BERT"):

- :mod:`analyses.token_deviation` -- D(t), synchronization offset (Eq. 5, Fig. 2A-B)
- :mod:`analyses.lyapunov` -- local Lyapunov exponent (Algorithm A1, Fig. 2C, 4B)
- :mod:`analyses.effective_dimension` -- N_eff (Eq. 6, Fig. 2C)
- :mod:`analyses.transient_chaos` -- transient chaos length (Sec. II.B, Fig. 4D)
- :mod:`analyses.pca` -- principal component projection (Fig. 4C)

and of training dynamics (Saphra, LSTM training dynamics thesis, Ch. 4-6):

- :mod:`analyses.cca` -- CCA, SVCCA, PWCCA (paper and google/svcca conventions), linear CKA
  (biased and debiased), RBF CKA
- :mod:`analyses.sparsity` -- sparsity chi = ||v||_2 / ||v||_1, per-word means, frequency correlation
- :mod:`analyses.diagnostic` -- diagnostic classifiers
- :mod:`analyses.loss_change` -- loss change allocation
- :mod:`analyses.contextual_decomposition` -- contextual decomposition of LSTMs, decompositional
  interdependence (Ch. 5, Sec. 2.1-2.2, Eq. 2)

and of the TransJect paper (Sec. 4):

- :mod:`analyses.entropy` -- layer-wise differential entropy of token representations (Eq. 8, Fig. 5a)
- :mod:`analyses.token_geometry` -- token-pair distances and activation ratios (Figs. 1, 5c)

Inputs, for every measure
-------------------------
Every array argument may be a torch tensor or a numpy array (a nested list too); a numpy array is
converted with its dtype kept, so float64 stays float64 (:mod:`analyses._arrays`). Results are torch
tensors, except :mod:`analyses.entropy` and ``token_geometry.quantiles``, which give numpy back for
numpy in. A value computed in float64 is returned in float64: the Lyapunov exponent, N_eff, PCA,
CCA/CKA, Pearson correlations, loss change allocations and transient-chaos summaries always are;
``sparsity`` and ``token_deviation`` keep the input's float dtype, except half precision (float16,
bfloat16), which is computed and returned in float32; every other measure computes half precision in
float32 or float64 too. A shape that cannot be right raises ``ValueError`` naming the argument and its shape; no
input is ever transposed or flattened to fit.

The layouts (the leading axis is the batch of samples wherever there is one):

=========================================  ==============================================================
measure                                    inputs
=========================================  ==============================================================
``cca``, ``svcca``, ``pwcca``,             two *views*, 2-D ``(datapoints, neurons)``: one row per
``linear_cka``, ``rbf_cka``                datapoint (e.g. a word token), one column per neuron; the two
                                           views have the same rows in the same order. This is the
                                           transpose of google/svcca's ``(neurons, datapoints)``.
``token_deviation``                        ``x`` ``(..., n_tokens, n_hidden)``, at least 2-D
``synchronization_offset``                 ``deviation`` ``(..., T)``, D(t) along the last axis
``local_lyapunov``                         ``x0`` ``(batch, ...)``: one state per sample, every other axis
                                           is the state; ``step`` maps such a batch (as tensors)
``initial_perturbation``, ``renormalize``  ``x``, ``y`` ``(batch, ...)``, the same shape
``per_step_exponent``                      ``lam`` any shape
``transient_chaos``                        ``lam`` ``(..., intervals)``, at least 1-D
``effective_dimension``,                   ``states`` ``(samples, *features)``, at least 2-D
``participation_spectrum``
``pca_projection``                         ``points`` ``(n_points, *features)``, at least 2-D
``sparsity``                               ``v`` at least 1-D, the vector along ``dim``
``pearson``                                ``x``, ``y`` ``(n,)`` each
``frequency_correlation``                  ``word_means``, ``word_counts`` ``(vocab,)`` each
``train_diagnostic_classifier``            ``features`` ``(n, d)``, ``labels`` ``(n,)``
``loss_change_allocation``                 mappings name -> array of the parameter's shape
``differential_entropy``                   the samples of one distribution along ``dim``
``token_entropy``                          ``hidden`` ``(batch, seq, d)``, mask ``(batch, seq)``
``layer_entropy``                          per layer ``(batch, seq, d)``, mask ``(batch, seq)``
``pair_distances``                         ``(layers, seq, d)`` or a list of ``(seq, d)``; pairs ``(P, 2)``
``activation_ratios``                      ``x_in`` ``(seq, d_in)``, ``x_out`` ``(seq, d_out)``
``contextual_decomposition``               token ids ``(batch, seq)`` or vectors ``(batch, seq, d_in)``; focus
=========================================  ==============================================================
"""

from analyses.cca import CCAResult, SVCCAResult, cca, linear_cka, pwcca, rbf_cka, svcca
from analyses.contextual_decomposition import (
    CDResult,
    Interdependence,
    LSTMWeights,
    contextual_decomposition,
    decompositional_interdependence,
    interdependence,
    lstm_weights,
)
from analyses.diagnostic import DiagnosticResult, train_diagnostic_classifier
from analyses.effective_dimension import effective_dimension, participation_spectrum
from analyses.entropy import differential_entropy, layer_entropy, token_entropy
from analyses.loss_change import LossChangeAllocator, group_allocations, loss_change_allocation
from analyses.lyapunov import default_k, initial_perturbation, local_lyapunov, per_step_exponent, renormalize
from analyses.pca import pca_projection
from analyses.sparsity import WordSparsityAccumulator, frequency_correlation, pearson, sparsity
from analyses.token_deviation import SyncOffsetTracker, synchronization_offset, token_deviation
from analyses.transient_chaos import TransientChaos, summarize_chaos, transient_chaos

__all__ = [
    "token_deviation",
    "synchronization_offset",
    "SyncOffsetTracker",
    "initial_perturbation",
    "renormalize",
    "local_lyapunov",
    "default_k",
    "per_step_exponent",
    "effective_dimension",
    "participation_spectrum",
    "TransientChaos",
    "transient_chaos",
    "summarize_chaos",
    "pca_projection",
    "cca",
    "svcca",
    "pwcca",
    "linear_cka",
    "rbf_cka",
    "CCAResult",
    "SVCCAResult",
    "sparsity",
    "WordSparsityAccumulator",
    "pearson",
    "frequency_correlation",
    "train_diagnostic_classifier",
    "DiagnosticResult",
    "loss_change_allocation",
    "LossChangeAllocator",
    "group_allocations",
    "contextual_decomposition",
    "CDResult",
    "LSTMWeights",
    "lstm_weights",
    "decompositional_interdependence",
    "interdependence",
    "Interdependence",
    "differential_entropy",
    "token_entropy",
    "layer_entropy",
]
