"""Tests of the depth study (runner/studies/depth): its passes, measures and their stores."""
