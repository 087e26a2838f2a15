"""Running a spec: prepare, apply, changes against the store, provenance, threads, and the executors (execute/)."""
