"""Stores and what lies beside them: locations (disk, S3), the zarr store, completion records, locks, history, verification and the event log."""
