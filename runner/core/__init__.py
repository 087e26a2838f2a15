"""The bottom layer: errors and exit codes, tasks and their ids, store layouts, requirements, process identity, interrupts, progress and cost estimates."""
