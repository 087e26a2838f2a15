"""Measures of network dynamics: pure functions, tensors in, tensors out.

One measure per module (Inoue et al. 2021, "Transient Chaos in BERT"):

- :mod:`analyses.token_deviation` -- D(t), synchronization offset (Eq. 5, Fig. 2A-B)
- :mod:`analyses.lyapunov` -- local Lyapunov exponent (Algorithm A1, Fig. 2C, 4B)
- :mod:`analyses.effective_dimension` -- N_eff (Eq. 6, Fig. 2C)
- :mod:`analyses.transient_chaos` -- transient chaos length (Sec. II.B, Fig. 4D)
- :mod:`analyses.pca` -- principal component projection (Fig. 4C)
"""

from analyses.effective_dimension import effective_dimension, participation_spectrum
from analyses.lyapunov import initial_perturbation, local_lyapunov, per_step_exponent, renormalize
from analyses.pca import pca_projection
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
]
