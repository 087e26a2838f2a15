"""The training study's data: its corpora, the thesis' preprocessing and tag sets, and its two
generated sources (``builtin:tiny-tagged``, ``scaffold:``), registered here."""

from runner.studies.training.data import scaffold, tiny_tagged  # noqa: F401 - each registers its source
