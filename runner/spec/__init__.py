"""Spec files: reading and locating problems, --set overrides, sweeps."""
