"""``runner plan`` / ``runner apply`` for specs with a ``[training]`` table (called by :mod:`runner.cli`)."""

from __future__ import annotations

import json
import sys

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130


def cmd_plan(args) -> int:
    from runner.store import read_tasks
    from runner.training.apply import plan_rows, prepare, render_plan

    p = prepare(args.spec)
    done = read_tasks(p.store_path)
    if getattr(args, "json", False):
        print(json.dumps({"spec": str(args.spec), "store": str(p.store_path), "spec_sha256": p.study.sha256(),
                          "resolved": p.study.model_dump(mode="json"), "steps_per_epoch": p.plan.steps_per_epoch,
                          "checkpoint_steps": p.plan.steps, "tasks": plan_rows(p, done)}, indent=2))
    else:
        print(render_plan(p, done))
    return EXIT_OK


def cmd_apply(args) -> int:
    from runner.apply import open_snippet
    from runner.training.apply import apply, prepare

    p = prepare(args.spec)
    outcome = apply(p, device=getattr(args, "device", None), quiet=getattr(args, "quiet", False))
    if outcome.interrupted:
        print(f"interrupted; finished work is kept in {p.store_path}; run `runner apply {args.spec}` to resume",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    if not outcome.ran and not outcome.failed:
        print(f"nothing to do: all {outcome.skipped} tasks of {args.spec} are done in {p.store_path}")
        return EXIT_OK
    print(f"ran {len(outcome.ran)} task(s), {outcome.skipped} already done; store: {p.store_path}")
    if outcome.failed:
        for tid, msg in outcome.failed.items():
            print(f"task {tid} failed: {msg}", file=sys.stderr)
        return EXIT_FAILED
    print("open it with:\n" + open_snippet(p.store_path))
    return EXIT_OK
