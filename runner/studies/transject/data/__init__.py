"""The TransJect study's data: classification splits, tokenisation, and the ListOps generator
(its ``listops:`` source registers here)."""

from runner.studies.transject.data import classification  # noqa: F401 - registers the ListOps source
