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

Input layout of the similarity measures (:mod:`analyses.cca`): a *view* is a 2-D array of shape
(datapoints x neurons) -- one row per datapoint (e.g. a word token), one column per neuron -- and
two views compared with each other must have the same rows in the same order. This is the
transpose of google/svcca's (neurons x datapoints); a view whose shape cannot be right (not 2-D,
or row counts that differ) raises ``ValueError``, it is never transposed silently. Views may be
torch tensors or numpy arrays; results are float64 tensors.

and of the TransJect paper (Sec. 4):

- :mod:`analyses.entropy` -- layer-wise differential entropy of token representations (Eq. 8, Fig. 5a)
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
from analyses.lyapunov import initial_perturbation, local_lyapunov, per_step_exponent, renormalize
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
