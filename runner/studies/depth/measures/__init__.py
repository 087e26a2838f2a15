"""The depth study's measures, one registration per module (imported here to register them)."""

from . import attention, effective_dimension, lyapunov, pca, token_deviation, trajectory, transient_chaos  # noqa: F401
