"""TransJect (the paper "Don't Bet on Sparsity: Designing Brain-Inspired Distance-Preserving
Encoder"): encoders trained on sequence classification and measured at every epoch."""

from runner.studies.transject.study import TransJectStudy  # noqa: F401  (registers the study)
