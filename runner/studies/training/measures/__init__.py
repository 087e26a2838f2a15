"""The training study's measures, one registration per module (imported here to register them)."""

from . import diagnostic, lca, sparsity, svcca  # noqa: F401
