"""Executors and what a run does on a device: scheduling, recording, checkpoints, devices."""
