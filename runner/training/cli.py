"""``runner plan`` for specs with a ``[training]`` table (called by :mod:`runner.cli`)."""

from __future__ import annotations

import json

EXIT_OK = 0


def cmd_plan(args) -> int:
    from runner.cli import print_unmet
    from runner.store import read_tasks
    from runner.training.apply import plan_rows, prepare, render_plan

    p = prepare(args.spec)
    done = read_tasks(p.store_path)
    if getattr(args, "json", False):
        print(json.dumps({"spec": str(args.spec), "store": str(p.store_path), "spec_sha256": p.study.sha256(),
                          "resolved": p.study.model_dump(mode="json"),
                          "steps_per_epoch": p.plan.steps_per_epoch if p.plan else None,
                          "checkpoint_steps": p.plan.steps if p.plan else None, "tasks": plan_rows(p, done),
                          "unmet": p.unmet}, indent=2))
    else:
        print(render_plan(p, done))
        print_unmet(p.unmet)
    return EXIT_OK
