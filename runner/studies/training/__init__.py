"""Training dynamics (Saphra 2021): LSTM language models and taggers measured at checkpoints."""

from runner.studies.training.study import TrainingStudy  # noqa: F401  (registers the study)
