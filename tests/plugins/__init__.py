"""Plugins defined entirely in test files, loaded through ``TRANSIENT_PLUGINS`` (docs/extending.md)."""
