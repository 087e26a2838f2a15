"""Measures of network dynamics: pure functions, tensors in, tensors out.

One measure per module (Inoue et al. 2021, "Transient Chaos in BERT"):

- :mod:`analyses.token_deviation` -- D(t), synchronization offset (Eq. 5, Fig. 2A-B)
- :mod:`analyses.lyapunov` -- local Lyapunov exponent (Algorithm A1, Fig. 2C, 4B)
- :mod:`analyses.effective_dimension` -- N_eff (Eq. 6, Fig. 2C)
- :mod:`analyses.transient_chaos` -- transient chaos length (Sec. II.B, Fig. 4D)
- :mod:`analyses.pca` -- principal component projection (Fig. 4C)

and of training dynamics (Saphra, LSTM training dynamics thesis, Ch. 4 and 6):

- :mod:`analyses.cca` -- CCA, SVCCA, PWCCA, linear CKA
- :mod:`analyses.sparsity` -- sparsity chi = ||v||_2 / ||v||_1, per-word means, frequency correlation
- :mod:`analyses.diagnostic` -- diagnostic classifiers
- :mod:`analyses.loss_change` -- loss change allocation

and of the TransJect paper (Sec. 4):

- :mod:`analyses.entropy` -- layer-wise differential entropy of token representations (Eq. 8, Fig. 5a)
"""

from analyses.cca import CCAResult, SVCCAResult, cca, linear_cka, pwcca, svcca
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
    "differential_entropy",
    "token_entropy",
    "layer_entropy",
]
