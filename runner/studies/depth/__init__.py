"""Depth dynamics (Inoue et al. 2021): a layer applied again and again, measured along the trajectory."""

from runner.studies.depth.study import DepthStudy  # noqa: F401  (registers the study)
