"""Fixtures for runner tests (helpers live in tests/runner/helpers.py)."""
