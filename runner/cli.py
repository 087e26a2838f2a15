"""``runner``: plan | apply | status | show | monitor | explain.

Exit codes (one convention for every command, after sysexits.h):
  0    success, also "nothing to do" and output cut short by a closed pipe (`| head`)
  1    a task failed (the others ran; see `runner status`)
  2    usage: unknown option, bad --device, unknown name for explain
  65   the spec is invalid (every problem listed as FILE:LINE: [table] key: message)
  66   an input is missing: no such store (status, show), or a requirement this machine does
       not meet (a model or data set neither cached nor reachable, a missing extra, no CUDA)
  74   the store cannot be written (disk full, read-only); finished work is kept
  75   another apply holds the store (retry later)
  130  interrupted (Ctrl-C or SIGTERM); apply again to resume
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

(EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SPEC, EXIT_UNAVAILABLE, EXIT_IOERR, EXIT_LOCKED,
 EXIT_INTERRUPTED) = 0, 1, 2, 65, 66, 74, 75, 130


class UsageError(Exception):
    """A command-line argument that cannot be used (exit 2)."""


class NoStore(Exception):
    """The store a command reads does not exist (exit 66)."""


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("interrupted; run `runner apply` again to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _stdout_to_devnull()
        return EXIT_OK
    except Exception as err:
        code = _known_error(err)
        if code is None:
            raise
        print(f"error: {err}", file=sys.stderr)
        return code


def _stdout_to_devnull() -> None:
    """The reader went away (``runner plan | head -1``): drop the rest of the output quietly
    (Python would otherwise report the broken pipe again when it flushes stdout at exit)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _known_error(err: Exception) -> int | None:
    from runner.apply import InputsError, Unmet
    from runner.resolve import ResolveError
    from runner.specfile import SpecError
    from runner.store import StoreLocked, StorePathError, StoreWriteError
    from runner.data.corpus import CorpusError

    codes = {SpecError: EXIT_SPEC, StorePathError: EXIT_SPEC, UsageError: EXIT_USAGE, NoStore: EXIT_UNAVAILABLE,
             ResolveError: EXIT_UNAVAILABLE, InputsError: EXIT_UNAVAILABLE, CorpusError: EXIT_UNAVAILABLE,
             Unmet: EXIT_UNAVAILABLE, StoreWriteError: EXIT_IOERR, StoreLocked: EXIT_LOCKED}
    return next((code for cls, code in codes.items() if isinstance(err, cls)), None)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="runner", description="Declarative experiments on the dynamics of neural networks.",
        epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("plan", help="show what apply would run, the resolved parameters and what is done")
    p.add_argument("spec", type=Path, help="TOML spec, e.g. specs/albert_short.toml")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("apply", help="run what the store is missing (resumable, idempotent)")
    p.add_argument("spec", type=Path, help="TOML spec, e.g. specs/quickstart.toml")
    p.add_argument("--device", help="override [dynamics] device (auto, cpu, cuda, cuda:1, ...)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    p.add_argument("--monitor", action="store_true", help="run and watch it in the terminal monitor")
    p.set_defaults(func=cmd_apply)

    p = sub.add_parser("monitor", help="terminal monitor of a store: tasks, progress, live plots",
                       description="Watch a store, whether its run is going, finished or interrupted. A store "
                       "that does not exist yet is waited for: start `runner apply` in another terminal.")
    p.add_argument("target", type=Path, help="store directory (store/x.zarr) or spec (specs/x.toml)")
    p.set_defaults(func=cmd_monitor)

    p = sub.add_parser("status", help="progress of a store's tasks (from a store or its spec)")
    p.add_argument("target", type=Path, help="store directory (store/x.zarr) or spec (specs/x.toml)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("show", help="headline results, variables, dimensions, provenance and tasks of a store")
    p.add_argument("store", type=Path, help="store directory (store/x.zarr) or spec (specs/x.toml)")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("explain", help="parameters of a spec table or measure, with defaults and meaning")
    p.add_argument("name", nargs="?", help="measure kind (lyapunov, token_deviation, ...) or table (model, input, dynamics)")
    p.set_defaults(func=cmd_explain)
    return parser


# --------------------------------------------------------------------------- commands


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("transient")
    except metadata.PackageNotFoundError:
        return "(not installed)"


def _training(spec) -> bool:
    from runner.training.spec import is_training_spec

    return is_training_spec(spec)


def cmd_plan(args) -> int:
    if _training(args.spec):  # training studies: runner/training
        from runner.training.cli import cmd_plan as plan_training

        return plan_training(args)
    from runner.apply import describe_store, prepare
    from runner.layout import segment_length
    from runner.store import read_tasks

    p = prepare(args.spec)
    done = read_tasks(p.store_path)
    spec = p.spec
    tasks = [{"id": t.id, "network": p.networks[t.network].label, "measure": t.measure, "kind": t.kind,
              "deps": list(t.deps), "state": "done" if t.id in done else "pending"} for t in p.plan.tasks]
    if args.json:
        print(json.dumps({"spec": str(args.spec), "store": str(p.store_path), "spec_sha256": spec.sha256(),
                          "resolved": spec.model_dump(mode="json"), "tasks": tasks, "unmet": p.unmet}, indent=2))
        return EXIT_OK
    print(f"experiment {spec.experiment.name}: {spec.experiment.description}")
    print(f"store      {describe_store(p.store_path)}")
    print("models")
    for net in p.networks:
        m = net.model
        init = f" init={m.init.scheme}(std={m.init.std}, clip={m.init.clip})" if m.init else ""
        dims = f"{net.n_tokens}x{net.n_hidden or '?'}" + (f", {net.n_heads} heads" if net.n_heads else "")
        print(f"  {net.label:<16} {m.source} [{dims}] {net.precision}{init}")
    if spec.text_models:
        i = spec.input
        print(f"input      {i.source} ({i.subset}, {i.split}, field {i.field!r}): {i.samples} samples x {i.tokens} tokens")
    else:
        print(f"input      {spec.input.samples} initial states drawn by each map")
    d = spec.dynamics
    print(f"dynamics   steps={d.steps} precision={d.precision} device={d.device} implementation={d.implementation} "
          f"durable every {segment_length(spec)} steps")
    print("measures   (every parameter shown, defaults included)")
    for m in spec.measure:
        print(f"  {m.kind:<20} " + " ".join(f"{k}={v}" for k, v in m.params().items()))
    print("tasks")
    for t in tasks:
        print(f"  {t['id']}  {t['network']:<16} {t['measure']:<20} {t['state']}")
    n_done = sum(t["state"] == "done" for t in tasks)
    seqs = spec.input.samples * (2 if "lyapunov" in spec.measures() else 1)
    pending_nets = {t["network"] for t in tasks if t["state"] == "pending" and t["kind"] == "iterate"}
    print(f"Plan: {len(tasks) - n_done} to run, {n_done} done; "
          f"{len(pending_nets)} pass(es) of {d.steps} steps x {seqs} sequences")
    print_unmet(p.unmet)
    return EXIT_OK


def print_unmet(unmet: list[str]) -> None:
    """The requirements this machine does not meet; apply refuses to start until they are."""
    if unmet:
        print(f"requirements not met here ({len(unmet)}; `runner apply` refuses until they are):")
        for r in unmet:
            print(f"  - {r}")


def cmd_apply(args) -> int:
    from runner.apply import Unmet, describe_store

    if args.device:
        from runner.tasks.device import device_unavailable

        problem = device_unavailable(args.device)
        if problem:
            raise UsageError(f"--device: {problem}")
    if _training(args.spec):
        from runner.training.apply import apply, prepare
    else:
        from runner.apply import apply, prepare

    p = prepare(args.spec)  # every input error is reported here, before anything runs
    unmet = [u for u in p.unmet if not (args.device and "device:" in u)]
    if unmet:
        raise Unmet(unmet)
    if args.monitor:
        from runner.tui.app import run_apply_with_monitor

        return run_apply_with_monitor(args.spec, device=args.device)
    if not args.quiet and "outside" in describe_store(p.store_path):
        print(f"store: {describe_store(p.store_path)}", file=sys.stderr)
    p.unmet = unmet
    return report_outcome(apply(p, device=args.device, quiet=args.quiet), args.spec, p.store_path)


def report_outcome(outcome, spec: Path, store_path: Path) -> int:
    """Say what an apply did and return its exit code."""
    from runner.apply import open_snippet

    if outcome.interrupted:
        print(f"interrupted; finished work is kept in {store_path}; run `runner apply {spec}` to resume",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    if not outcome.ran and not outcome.failed:
        print(f"nothing to do: all {outcome.skipped} tasks of {spec} are done in {store_path}")
        return EXIT_OK
    print(f"ran {len(outcome.ran)} task(s), {outcome.skipped} already done; store: {store_path}")
    if outcome.failed:
        for tid, msg in outcome.failed.items():
            print(f"task {tid} failed: {msg}", file=sys.stderr)
        return EXIT_FAILED
    print("open it with:\n" + open_snippet(store_path))
    print(f"headline numbers per network: runner show {store_path}", file=sys.stderr)
    return EXIT_OK


def cmd_monitor(args) -> int:
    from runner.tui.app import run_monitor

    return run_monitor(args.target)


def _existing_store(target: Path) -> Path:
    from runner.status import store_of
    from runner.store import runner_dir

    path = store_of(target)
    if not (path / "zarr.json").exists() and not runner_dir(path).exists():
        hint = f" (run `runner apply {target}`)" if Path(target).suffix == ".toml" else ""
        raise NoStore(f"{path}: no such store{hint}")
    return path


def cmd_status(args) -> int:
    from runner.status import load_status, render_status

    status = load_status(_existing_store(args.target))
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        print(render_status(status))
    return EXIT_OK


def cmd_show(args) -> int:
    from runner.status import render_show

    path = _existing_store(args.store)
    if not (path / "zarr.json").exists():
        raise NoStore(f"{path}: its run has not created the store yet (see `runner status {args.store}`)")
    print(render_show(path))
    return EXIT_OK


def cmd_explain(args) -> int:
    from runner import spec as depth
    from runner.training import spec as training

    depth_tables = {"experiment": depth.Experiment, "model": depth.ModelSpec, "init": depth.InitScheme,
                    "input": depth.InputSpec, "dynamics": depth.DynamicsSpec}
    training_tables = {"corpus": training.CorpusSpec, "training": training.TrainingSpec,
                       "checkpoints": training.CheckpointSpec, "log_spaced": training.LogSpaced,
                       "network": training.NetworkSpec}
    MEASURE_TYPES = {**depth.MEASURE_TYPES, **training.MEASURE_TYPES}
    tables = {**depth_tables, **training_tables, **MEASURE_TYPES}
    if not args.name:
        print("depth dynamics:   tables " + ", ".join(depth_tables) + "; measures " + ", ".join(depth.MEASURE_TYPES))
        print("training studies: tables experiment, " + ", ".join(training_tables) + "; measures "
              + ", ".join(training.MEASURE_TYPES))
        print("run `runner explain NAME` for the parameters of one, with defaults (the papers' settings)")
        return EXIT_OK
    if args.name not in tables:
        raise UsageError(f"unknown name {args.name!r}; choose one of {', '.join(tables)}")
    cls = tables[args.name]
    if cls.__doc__ and args.name in MEASURE_TYPES:
        print(cls.__doc__.strip())
    for name, field in cls.model_fields.items():
        if name == "kind":
            continue
        default = "(required)" if field.is_required() else repr(field.get_default(call_default_factory=True))
        print(f"  {name} = {default}")
        if field.description:
            print(f"      {' '.join(field.description.split())}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
