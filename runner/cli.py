"""``runner``: plan | apply | status | verify | show | monitor | figures | explain.

Exit codes (one convention for every command, after sysexits.h):
  0    success, also "nothing to do" and output cut short by a closed pipe (`| head`)
  1    a task failed (the others ran; see `runner status`)
  2    usage: unknown option, bad --device, --set, --threads, --shards, --executor or --log-to, unknown
       name for explain
  65   the spec is invalid (every problem listed as FILE:LINE: [table] key: message, or as
       FILE: --set KEY=VALUE: [table] key: message where an override made it)
  66   an input is missing or unreadable: no such spec file or store (status, show, figures), a store
       location that names none (an unknown scheme, a malformed bucket or key, '~'), a plugin of
       TRANSIENT_PLUGINS that cannot be loaded, a zarr store this project did not write or whose
       metadata is corrupt, or a requirement this machine does not meet (a model or data set neither
       cached nor reachable, a missing extra, no CUDA, a local file that cannot be read)
  74   the store cannot be written (disk full, read-only; figures: --out); finished work is kept.
       Also: the store is damaged (verify, show, figures: chunks of finished results missing,
       truncated or corrupt); `runner apply` recomputes them
  75   another apply holds the store (retry later)
  77   apply would replace finished results whose parameters changed: nothing ran; see `runner plan`,
       then `runner apply --replace` (the store as it was is kept: `runner history`)
  130  interrupted (Ctrl-C or SIGTERM); apply again to resume
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shutil
import sys
import textwrap
import threading
from dataclasses import asdict
from importlib import metadata
from pathlib import Path

from rich.filesize import decimal

from models.registry_base import did_you_mean
from runner.core.errors import (EXIT_FAILED, EXIT_INTERRUPTED, EXIT_IOERR, EXIT_LOCKED,  # noqa: F401 (the codes, named)
                                EXIT_OK, EXIT_REPLACE, EXIT_SPEC, EXIT_UNAVAILABLE, EXIT_USAGE, StorageError,
                                Unavailable, UsageError)
from runner.core.errors import exit_code as _exit_code
from runner.core.estimate import BUDGET_S, Calibrator, estimate, render_points
from runner.core.estimate import render as render_estimate
from runner.core.formats import STORE_FORMAT
from runner.core.plan import plan_rows
from runner.core.requirements import lines as requirement_lines
from runner.core.requirements import to_json as requirement_json
from runner.core.requirements import without_device
from runner.run.changes import changes_of, summary
from runner.run.execute.registry import ExecutorOptions, executor_problem
from runner.run.threads import for_run, threads_problem
from runner.run.threads import use as use_threads
from runner.core.commandline import command, hint, program
from runner.storage.kept import resume_points
from runner.storage.location import location
from runner.storage.readers import reading


SET_HELP = ("change one value of the spec: a dotted key ([i] for an entry of an array of tables) and a TOML value, "
            "e.g. --set experiment.seed=3 --set 'model[0].seed=3' (repeatable; recorded in the provenance)")

THREADS_HELP = ("CPU threads for torch (overrides [experiment] threads); default: the runner times 1 thread, "
                "the idle CPUs and all CPUs on the model at hand and takes the fastest")


class NoStore(Unavailable):
    """The store a command reads does not exist, or is not one this project wrote (exit 66)."""


class CannotWrite(StorageError):
    """A file a command writes outside the store (``figures --out``) cannot be written (exit 74)."""


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    argv = sys.argv[1:] if argv is None else argv
    unknown = _unknown_command(parser, argv)
    if unknown:
        print(f"error: {unknown}", file=sys.stderr)
        return EXIT_USAGE
    try:
        args = parser.parse_args(argv)  # a store given as a target is parsed here (BadLocation: exit 66)
        if not getattr(args, "command", None):
            parser.print_help()
            return EXIT_USAGE
        return args.func(args)
    except KeyboardInterrupt:
        print(f"interrupted; run `{program()} apply` again to resume", file=sys.stderr)
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


def _unknown_command(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """Why the first argument is not a command (with the likely one), or None."""
    if not argv or argv[0].startswith("-"):
        return None
    commands = next(a.choices for a in parser._subparsers._group_actions if a.dest == "command")
    if argv[0] in commands:
        return None
    return f"unknown command {argv[0]!r}{did_you_mean(argv[0], commands)}; commands: {', '.join(commands)}"


def _stdout_to_devnull() -> None:
    """The reader went away (``runner plan | head -1``): drop the rest of the output quietly
    (Python would otherwise report the broken pipe again when it flushes stdout at exit)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _known_error(err: Exception) -> int | None:
    """The exit code of an error reported in one line (a :class:`runner.core.errors.RunnerError`), or None."""
    return _exit_code(err)


class _Parser(argparse.ArgumentParser):
    """argparse's parser, with a suggestion for a mistyped option (``--replce``: did you mean ``--replace``?)."""

    def parse_args(self, args=None, namespace=None):
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            command = getattr(namespace, "command", None)
            chooser = self._subparsers._group_actions[0].choices if self._subparsers and command else {}
            parser = chooser.get(command, self)
            parser.error("; ".join(_unrecognized(arg, parser) for arg in extras))  # exits 2, as argparse does
        return namespace


def _unrecognized(arg: str, parser: argparse.ArgumentParser) -> str:
    """``unrecognized argument ARG`` with the option of ``parser`` it likely meant."""
    options = [o for action in parser._actions for o in action.option_strings]
    close = difflib.get_close_matches(arg.split("=", 1)[0], options, n=1) if arg.startswith("-") else []
    return f"unrecognized argument {arg}" + (f"; did you mean {close[0]}?" if close else "")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="runner", description="Declarative experiments on the dynamics of neural networks.",
        epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("plan", help="show what apply would run, the resolved parameters and what is done")
    p.add_argument("spec", type=Path, help="TOML spec, e.g. specs/quickstart.toml")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--no-estimate", action="store_true",
                   help="skip the cost estimate (device time and disk; calibrates a few steps unless cached)")
    p.add_argument("--recalibrate", action="store_true", help="time the estimate's steps again (not the cached times)")
    p.add_argument("--calibrate", action="store_true",
                   help="time the estimate's steps without the few-seconds limit of a plain plan (cached for later plans)")
    p.add_argument("--threads", type=int, metavar="N", help=THREADS_HELP)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=SET_HELP)
    p.add_argument("--verbose", "-v", action="store_true",
                   help="the underlying libraries' messages in full (default: one line per requirement)")
    p.add_argument("--detailed-exitcode", action="store_true",
                   help="exit 0 when there is nothing to do, 2 when there is work to do, 66 when requirements are unmet")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("apply", help="run what the store is missing (resumable, idempotent)")
    p.add_argument("spec", type=Path, help="TOML spec, e.g. specs/quickstart.toml")
    p.add_argument("--device", help="override the device the spec asks for (auto, cpu, cuda, cuda:1, ...)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    p.add_argument("--monitor", action="store_true", help="run and watch it in the terminal monitor")
    p.add_argument("--executor", default="local", help="where tasks run: local (default, this process), ray "
                   "(a Ray cluster; pip install -e '.[ray]') or one an installed plugin names (transient.executors)")
    p.add_argument("--address", help="--executor ray: the cluster to join (auto, ray://host:10001); default: start "
                   "a local one")
    p.add_argument("--shards", type=int, default=1, help="split each group of tasks into this many sample shards (a study "
                   "that cannot split its groups refuses, exit 2)")
    p.add_argument("--replace", action="store_true", help="replace finished results whose parameters changed (the "
                   "store as it was is kept in store/<name>.history/; without it apply refuses, exit 77)")
    p.add_argument("--threads", type=int, metavar="N", help=THREADS_HELP)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=SET_HELP)
    p.add_argument("--log-to", metavar="TRACKER[:URI]", help="also export the store to an experiment tracker: mlflow "
                   "(default URI sqlite:///<store folder>/mlflow.db; pip install -e '.[tracker]')")
    p.set_defaults(func=cmd_apply)

    p = sub.add_parser("monitor", help="terminal monitor of a store: tasks, progress, live plots",
                       description="Watch a store, whether its run is going, finished or interrupted. A store "
                       "that does not exist yet is waited for: start `runner apply` in another terminal.")
    p.add_argument("target", type=location, help="store directory (store/x.zarr) or spec (specs/x.toml)")
    p.set_defaults(func=cmd_monitor)

    p = sub.add_parser("status", help="progress of a store's tasks (from a store or its spec)")
    p.add_argument("target", type=location, help="store directory (store/x.zarr) or spec (specs/x.toml)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("verify", help="read back every chunk of the store's finished results (exit 74 if damaged)",
                       description="Check a store as `git fsck` does: its metadata, and every chunk its finished "
                       "tasks recorded (missing, truncated, or failing its crc32c checksum). Names the damaged "
                       "tasks; `runner apply` recomputes exactly them.")
    p.add_argument("target", type=location, help="store directory (store/x.zarr) or spec (specs/x.toml), or a "
                   "kept version's store (store/x.history/VERSION/x.zarr)")
    p.add_argument("--version", metavar="VERSION", help="check this kept version of the store (its name, as "
                   "`runner history` lists them) against the records and manifest it carries")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("show", help="headline results, variables, dimensions, provenance and tasks of a store")
    p.add_argument("store", type=location, help="store directory (store/x.zarr) or spec (specs/x.toml)")
    p.add_argument("--json", action="store_true", help="machine-readable output (docs/json.md)")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("history", help="earlier versions of a store, kept when apply --replace replaced results",
                       description="List the versions of a store that `apply --replace` kept (each opens with "
                       "xr.open_zarr), or remove one.")
    p.add_argument("target", type=location, help="store directory (store/x.zarr) or spec (specs/x.toml)")
    p.add_argument("--remove", metavar="VERSION", help="delete this version (its name, as listed)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("figures", help="draw the papers' figures from a store (PNG, SVG and figures.json)",
                       description="Draw every figure the store's study can draw, from a finished or a partial "
                       "run; a figure whose variables the store lacks, or whose data has no values yet, is listed as skipped "
                       "with the reason. A store no recipe covers gets a fallback plot per numeric variable.")
    p.add_argument("target", type=location, help="store directory (store/x.zarr) or spec (specs/x.toml)")
    p.add_argument("--out", help="folder for the figures (default: store/<name>.figures)")
    p.add_argument("--json", action="store_true", help="machine-readable output (docs/json.md)")
    p.add_argument("--only", action="append", metavar="FIG",
                   help="draw only this figure id, or var:NAME for a fallback plot of variable NAME (repeatable)")
    p.add_argument("--force", action="store_true",
                   help="draw again even when the store's results have not changed since the figures were drawn")
    p.set_defaults(func=cmd_figures)

    p = sub.add_parser("explain", help="parameters of a spec table or measure, with defaults and meaning")
    p.add_argument("name", nargs="?", help="a measure kind or a spec table of a registered study (without NAME: "
                   "every study's tables and measures)")
    p.set_defaults(func=cmd_explain)
    return parser


# --------------------------------------------------------------------------- commands


def _version() -> str:
    try:
        return metadata.version("transient")
    except metadata.PackageNotFoundError:
        return "(not installed)"


def cmd_plan(args) -> int:
    from runner.run.prepare import prepare_all  # lazy: filelock, numpy, pydantic
    from runner.run.apply import states  # lazy: filelock, numpy, pydantic

    _check_threads(args)
    _DAMAGE.clear()  # read afresh by each command (the CLI may run many in one process)
    sweep, prepared = prepare_all(args.spec, args.set)
    _check_flags(prepared[0].study, [f for f, on in (("--calibrate", args.calibrate),
                                                     ("--recalibrate", args.recalibrate)) if on])
    code = _plan_one(args, prepared[0]) if sweep is None else _plan_sweep(args, sweep, prepared)
    if code != EXIT_OK or not args.detailed_exitcode:
        return code
    if any(p.unmet for p in prepared):
        return EXIT_UNAVAILABLE
    if any(s != "done" for p in prepared for s in states(p).values()):
        return EXIT_USAGE
    # nothing missing: read every recorded chunk back, so that a truncated or flipped one is work to
    # do (the repair apply would make), as verify would find it (once: the plan's repair line read them)
    return EXIT_USAGE if any(not _damage(p.store_path, full=True).ok for p in prepared) else EXIT_OK


def _plan_sweep(args, sweep, prepared) -> int:
    from runner.plugin.study import plan_lines  # lazy: numpy, pydantic
    from runner.run.apply import describe_store, states  # lazy: filelock, numpy, pydantic

    rows = [(point, p, states(p)) for point, p in zip(sweep.points, prepared, strict=True)]
    unmet = list(dict.fromkeys(u for p in prepared for u in p.unmet))
    calibrated = _calibrator(args, finished=all(_finished(p, st) for _, p, st in rows))
    cpu = _threads(args, prepared[0], calibrated)
    ests = [] if args.no_estimate else [estimate(p, calibrated=calibrated) for p in prepared]
    if args.json:
        _emit({"spec": str(args.spec), "study": prepared[0].study.name, "store": str(sweep.root),
                          "overrides": args.set, "sweep": sweep.axes, "unmet": [requirement_json(u) for u in unmet], **({"estimate": [e.to_json() for e in ests]} if ests else {}),
                          **({"threads": cpu.to_json()} if cpu else {}),
                          "points": [{"name": pt.name, "values": pt.values, "store": str(p.store_path),
                                      "spec_sha256": p.spec.sha256(), "tasks": plan_rows(p.tasks, st, p.labels)}
                                     for pt, p, st in rows]})
        return EXIT_OK
    first = prepared[0]
    _say(f"experiment {first.spec.experiment.name}: {first.spec.experiment.description}")
    _say(f"study      {first.study.name}")
    _say(f"store      {describe_store(sweep.root, first.spec_file.path)}")
    if args.set:
        _say("overrides  " + " ".join(f"--set {o}" for o in args.set))
    for line in sweep.describe():
        _say(line)
    _say(f"first point ({sweep.points[0].name}):")
    for line in plan_lines(first):
        _say(line)
    if cpu:
        _say(f"threads    {cpu.describe()}")
    _say("points")
    total = done = 0
    for point, p, st in rows:
        n_done = sum(v == "done" for v in st.values())
        total, done = total + len(p.tasks), done + n_done
        _say(f"  {point.name:<24} {len(p.tasks) - n_done} to run, {n_done} done")
    for line in render_points(ests, [pt.name for pt in sweep.points]) if ests else []:
        _say(line)
    if unmet:
        _say("Plan: not resolved until the requirements below are met")
    else:
        _say(f"Plan: {total - done} to run, {done} done, in {len(rows)} point(s)")
    print_unmet(unmet, args.verbose)
    return EXIT_OK


def _plan_one(args, p) -> int:
    from runner.plugin.study import plan_fields, plan_lines  # lazy: numpy, pydantic
    from runner.run.apply import describe_store, states  # lazy: filelock, numpy, pydantic
    from runner.storage.store import read_tasks  # lazy: filelock, numpy

    state = states(p)
    changes = changes_of(p, read_tasks(p.store_path, working=True)) if all(t.id for t in p.tasks) else None
    replacing = {r.task.id: r for r in changes.replace} if changes else {}
    extending = {r.task.id: r for r in changes.extend} if changes else {}
    finished = _finished(p, state, changes) and not (args.calibrate or args.recalibrate)
    calibrated = _calibrator(args, finished=finished)
    # nothing to run: no threads to choose and no device time to estimate (and no torch to load)
    cpu = None if finished else _threads(args, p, calibrated)
    est = None if args.no_estimate or finished else estimate(p, calibrated=calibrated)
    if args.json:
        rows = plan_rows(p.tasks, state, p.labels)
        for row in rows:
            if row["id"] in replacing:
                row.update(action="replace", changes=replacing[row["id"]].changes)
            elif row["id"] in extending:
                row.update(action="extend", changes=extending[row["id"]].changes, how=extending[row["id"]].how)
            else:
                row["action"] = {"done": "keep", "pending": "add", "blocked": "add"}.get(row["state"], row["state"])
        _emit({"spec": str(args.spec), "study": p.study.name, "store": str(p.store_path),
                          "spec_sha256": p.spec.sha256(), "overrides": args.set,
                          "resolved": p.spec.model_dump(mode="json"),
                          **plan_fields(p), "tasks": rows, "unmet": [requirement_json(u) for u in p.unmet],
                          **(_changes_json(changes) if changes else {}),
                          **({"threads": cpu.to_json()} if cpu else {}),
                          **({"estimate": est.to_json()} if est else {})})
        return EXIT_OK
    spec = p.spec
    _say(f"experiment {spec.experiment.name}: {spec.experiment.description}")
    _say(f"study      {p.study.name}")
    _say(f"store      {describe_store(p.store_path, p.spec_file.path)}")
    if args.set:
        _say("overrides  " + " ".join(f"--set {o}" for o in args.set))
    for line in plan_lines(p):
        _say(line)
    if cpu:
        _say(f"threads    {cpu.describe()}")
    _say("tasks")
    groups: dict[tuple[int, str], list] = {}
    for t in p.tasks:
        groups.setdefault((t.network, t.name), []).append(t)
    resumes = _resume_points(p.store_path)
    for (network, name), ts in groups.items():
        replaced = [replacing[t.id] for t in ts if t.id in replacing]
        why = f"replace: {_changed_text(replaced)}" if replaced else ""
        if not replaced and (extended := [extending[t.id] for t in ts if t.id in extending]):
            replaced, why = extended, f"extend: {_changed_text(extended)} ({extended[0].how})"
        if len(ts) == 1 and ts[0].id:
            skip = f"not applicable: {ts[0].skip}" if ts[0].skip else ""
            resumed = f" (resumes from step {resumes[ts[0].id]})" if state[ts[0].id] != "done" and ts[0].id in resumes \
                else ""
            _say(f"  {ts[0].id}  {p.labels[network]:<16} {name:<20} {why or skip or state[ts[0].id]}{resumed}")
        elif not ts[0].id:
            _say(f"  {'?':<16}  {p.labels[network]:<16} {name:<20} ids follow once the requirements are met")
        else:
            n_done = sum(state[t.id] == "done" for t in ts)
            _say(f"  {f'{len(ts)} tasks':<16}  {p.labels[network]:<16} {name:<20} {n_done}/{len(ts)} done"
                  + (f", {len(replaced)} {why}" if replaced else ""))
    for line in _changes_lines(changes) if changes else []:
        _say(line)
    for line in render_estimate(est, state) if est else []:
        _say(line)
    if finished and not args.no_estimate:
        _say(f"estimate   nothing to run, so not timed (`{program()} plan --calibrate SPEC` times it anyway)")
    if p.unmet:
        _say("Plan: not resolved until the requirements below are met")
    else:
        damage = _damage(p.store_path, full=args.detailed_exitcode)
        repair = [tid for tid in damage.redo if state.get(tid) == "done"]  # a chunk read back damaged
        n_done = sum(v == "done" for v in state.values()) - len(repair)
        n_taken = len(changes.taken_over(p.labels)) if changes is not None else 0
        consent = changes is not None and changes.needs_consent
        _say(f"Plan: {len(p.tasks) - n_done - n_taken} to run" + (f" ({len(repair)} to repair)" if repair else "")
             + f", {n_done} done" + (f", {n_taken} taken over (a longer run keeps them as they are)" if n_taken else "")
              + (f"; {len(changes.replace)} replace and {len(changes.drop)} drop finished results: apply refuses "
                 f"without --replace, which keeps the store as it is now in {_history_of(p.store_path)}/"
                 f" ({_kept_bytes(p, changes, state)})" if consent else "")
              + (f"; {len(changes.extend)} extend finished results (no consent needed; the store as it is now is "
                 f"kept in {_history_of(p.store_path)}/: {_kept_bytes(p, changes, state)})"
                 if changes is not None and changes.extend else ""))
        if consent:
            from runner.storage.history import served_note  # lazy: filelock, numpy

            served = served_note(p.store_path, [t.id for t in p.tasks])
            if served:
                _say(f"Note: {served}")
        _repair_line(damage, full=args.detailed_exitcode)
    print_unmet(p.unmet, args.verbose)
    return EXIT_OK


def _damage(path: Path, full: bool):
    """What plan sees damaged: without reading chunks back (files missing or empty, metadata that
    differs from the manifest), or reading every recorded chunk back (``full``, as verify does: what
    ``plan --detailed-exitcode`` asks; read once per store and command)."""
    from runner.run.apply import damage_of  # lazy: filelock, numpy, pydantic

    key = (str(path), full)
    if key not in _DAMAGE:
        _DAMAGE[key] = damage_of(path, quick=not full)
    return _DAMAGE[key]


#: The damage read by this command, per (store, full): plan's repair line and its exit code share one read.
_DAMAGE: dict[tuple[str, bool], object] = {}


def _repair_line(damage, full: bool) -> None:
    """``repair ...``: what is damaged and what apply recomputes to repair it."""
    if not damage.ok:
        what = ", ".join(dict.fromkeys(f"{a} {k}" for a, k, _ in damage.problems[:4]))
        _say(f"repair     {len(damage.problems)} damaged: {what}{' ...' if len(damage.problems) > 4 else ''}; apply "
             f"repairs them (recomputes {len(damage.redo)} task(s))"
             + ("" if full else f"; `{program()} verify` reads every chunk back"))


def _check_flags(study, flags: list[str]) -> None:
    """Refuse the flags given that do not apply to the spec's study (before anything runs)."""
    from runner.plugin.study import flag_problem  # lazy: numpy, pydantic

    for flag in flags:
        problem = flag_problem(study, flag)
        if problem:
            raise UsageError(problem)


def _check_threads(args) -> None:
    problem = threads_problem(args.threads)
    if problem:
        raise UsageError(problem)


def _calibrator(args, finished: bool = False):
    """The calibrations a plan may run: cached ones only with --no-estimate or when nothing is left to
    run (``finished``: timing steps would cost seconds for nothing, unless asked to calibrate); at
    most a few seconds in all (thread timing and estimate together) unless asked to calibrate."""
    if finished and not (args.calibrate or args.recalibrate):
        return Calibrator(calibrate=False, uncached=f"nothing to run, so not timed; `{program()} plan --calibrate "
                          "SPEC` times it")
    return Calibrator(calibrate=not args.no_estimate, refresh=args.recalibrate, budget=_budget(args))


def _finished(p, state: dict[str, str], changes=None) -> bool:
    """Every task of a prepared spec is done and none is to be replaced or extended: apply has nothing to run."""
    return not p.unmet and all(v == "done" for v in state.values()) and not (changes and (changes.replace or changes.extend))


def _threads(args, p, calibrated):
    """The CPU threads apply would use here (and set them, so that the estimate is timed with them);
    None where the spec's device is not available."""
    from runner.core.device import device_unavailable, pick_device  # lazy: pydantic

    if p.unmet or device_unavailable(p.device):
        return None
    choice = for_run(p, pick_device(p.device), args.threads, calibrated)
    use_threads(choice)
    return choice


def _budget(args) -> float | None:
    """Seconds plan may spend timing steps for its estimate (None: no limit, when asked to calibrate)."""
    return None if args.calibrate or args.recalibrate else BUDGET_S


def _resume_points(path) -> dict[str, int]:
    """Task id -> the step its stopped pass resumes from (nothing for a store not made yet)."""
    from runner.storage.store import runner_dir, store_id  # lazy: filelock, numpy

    return resume_points(runner_dir(path), store_id(path)) if location(path).exists() else {}


def _kept_bytes(p, changes, state: dict[str, str]) -> str:
    """What the version a run keeps costs: about the bytes of the files the run rewrites, since it
    shares every other file with the store."""
    from runner.storage.history import bytes_kept  # lazy: filelock, numpy

    extending = {r.task.id for r in changes.extend}
    runs = [(t.network, t.measure, t.id in extending) for t in p.tasks if state.get(t.id) != "done"]
    return f"about {decimal(bytes_kept(p.store_path, runs))} of its own, the files this run rewrites"


def _history_of(path: Path) -> Path:
    from runner.storage.history import history_dir  # lazy: filelock, numpy

    return history_dir(path)


def _changed_text(replaced: list) -> str:
    """What changed, said once for the tasks of a group (they share their changes)."""
    changes = list(dict.fromkeys(c for r in replaced for c in r.changes))
    if not changes:
        return "its parameters changed"
    return "; ".join(changes[:3]) + (f"; and {len(changes) - 3} more" if len(changes) > 3 else "")


def _changes_lines(changes) -> list[str]:
    """Finished results the spec no longer plans: dropped with their network, or kept as they are."""
    lines = []
    if changes.drop:
        lines.append(f"  drop      {summary(changes.drop, changes.records)}: network no longer in the spec")
    if changes.kept:
        lines.append(f"  keep      {summary(changes.kept, changes.records)}: no longer in the spec, kept as they are")
    return (["finished results no longer in the spec"] + lines) if lines else []


def _changes_json(changes) -> dict:
    rec = changes.records
    return {"replace": [{"id": r.task.id, "replaces": r.old_ids, "network": r.network, "measure": r.task.label,
                         "changes": r.changes} for r in changes.replace],
            "extend": [{"id": r.task.id, "extends": r.old_ids, "network": r.network, "measure": r.task.label,
                        "changes": r.changes, "how": r.how} for r in changes.extend],
            "drop": [{"id": i, "network": rec[i].get("network_label"), "measure": rec[i].get("label")}
                     for i in changes.drop],
            "kept": [{"id": i, "network": rec[i].get("network_label"), "measure": rec[i].get("label")}
                     for i in changes.kept]}


def print_unmet(unmet: list[str], verbose: bool = False) -> None:
    """The requirements this machine does not meet (grouped, wrapped to the terminal; the libraries'
    own messages with ``verbose``); apply refuses to start until they are."""
    if unmet:
        print(f"requirements not met here ({len(unmet)}; `{program()} apply` refuses until they are):")
        for line in requirement_lines(unmet, _width(), verbose):
            print(line)


def _say(line: str) -> None:
    """Print a line of human output wrapped to the terminal, continuing under its text column
    (``store      ...``, ``  name         ...``)."""
    width = _width()
    if len(line) <= width:
        print(line)
        return
    m = re.match(r"^(\s*\S+\s{2,})", line)
    indent = " " * (len(m.group(1)) if m and len(m.group(1)) <= 30 else len(line) - len(line.lstrip()) + 4)
    print("\n".join(textwrap.wrap(line, width=width, subsequent_indent=indent, break_on_hyphens=False,
                                   break_long_words=False)))


def _width() -> int:
    """The terminal's width, at least 80 (a pipe: 80)."""
    return max(80, shutil.get_terminal_size((80, 24)).columns)


def cmd_apply(args) -> int:
    from runner.run.apply import (Unmet, apply, apply_sweep, describe_store,  # lazy: filelock, numpy, pydantic
                                  options_problem, store_note)
    from runner.run.prepare import prepare_all  # lazy: filelock, numpy, pydantic

    problem = options_problem(device=args.device, shards=args.shards, threads=args.threads, executor=args.executor,
                              address=args.address)
    if problem:
        raise UsageError(problem)
    options = ExecutorOptions(args.executor, args.address, args.shards)
    sweep, prepared = prepare_all(args.spec, args.set)  # every input error is reported here, before anything runs
    _check_flags(prepared[0].study, ["--shards"] if args.shards > 1 else [])
    if args.device:  # the flag replaces the spec's device: the spec's device requirement no longer applies
        for p in prepared:
            p.unmet = without_device(p.unmet)
    unmet = list(dict.fromkeys(u for p in prepared for u in p.unmet))
    unmet += [problem] if (problem := executor_problem(args.executor)) else []
    if args.log_to is not None and not args.log_to.strip():
        raise UsageError("--log-to needs a tracker: mlflow, or mlflow:URI")
    if args.log_to:
        from runner.read.tracker import TrackerError, check, check_target  # lazy: numpy

        try:
            unmet += [problem] if (problem := check(args.log_to)) else []
        except TrackerError as err:
            raise UsageError(str(err)) from None
    if unmet:
        raise Unmet(unmet)
    if args.log_to:
        check_target(args.log_to)  # where the runs would go takes them: said before anything runs (66)
    store_path = sweep.root if sweep else prepared[0].store_path
    if args.monitor:
        if options != ExecutorOptions():
            raise UsageError(f"--monitor runs the apply here; for --executor/--shards start `{program()} apply` in one "
                             f"terminal and `{program()} monitor STORE` in another")
        if sweep:
            raise UsageError(f"--monitor shows one store; apply the sweep, then `{program()} monitor` one of its "
                             "points: "
                             + ", ".join(str(p.store_path) for p in prepared))
        from runner.tui.app import run_apply_with_monitor  # lazy: filelock, numpy, textual_plotext

        return run_apply_with_monitor(args.spec, device=args.device, overrides=args.set, store=store_path)
    if not args.quiet and store_note(store_path, prepared[0].spec_file.path):
        print(f"store: {describe_store(store_path, prepared[0].spec_file.path)}", file=sys.stderr)
    finish_tracking = _stream_to_tracker(args.log_to, [p.store_path for p in prepared]) if args.log_to else None
    try:
        if sweep is None:
            code = report_outcome(apply(prepared[0], device=args.device, quiet=args.quiet, executor=options,
                                        replace=args.replace, threads=args.threads), args.spec, store_path,
                                  args.set)
        else:
            code = report_outcome(apply_sweep(sweep, prepared, device=args.device, quiet=args.quiet,
                                              executor=options, replace=args.replace, threads=args.threads),
                                  args.spec, store_path, args.set)
    finally:
        if finish_tracking is not None:
            finish_tracking()
    return code


def _stream_to_tracker(target: str, stores: list[Path]):
    """Stream each store to the tracker while apply runs (a thread per store); the returned
    function stops them, and each then finishes (headline numbers, figures) and says where it logged."""
    from runner.read.tracker import stream  # lazy: numpy

    stop = threading.Event()

    def follow(store: Path) -> None:
        try:
            print(stream(store, target, stop).finish(), file=sys.stderr)
        except Exception as err:  # noqa: BLE001 - the run's results are in the store whatever the tracker says
            line = (str(err).strip().splitlines() or [""])[0]  # one line, whatever the tracker's library raises
            print(f"warning: --log-to {target}: {type(err).__name__}: {line}", file=sys.stderr)

    threads = [threading.Thread(target=follow, args=(store,), daemon=True) for store in stores]
    for t in threads:
        t.start()

    def finish() -> None:
        stop.set()
        for t in threads:
            t.join()

    return finish


def _emit(value, **options) -> None:
    """Print one JSON document (``--json``): each object in it (each of a list's objects) names the
    ``store_format`` its keys are stable within (docs/json.md)."""
    stamp = lambda d: {"store_format": STORE_FORMAT, **d} if isinstance(d, dict) else d  # noqa: E731
    print(json.dumps([stamp(v) for v in value] if isinstance(value, list) else stamp(value), indent=2, **options))


def report_outcome(outcome, spec: Path, store_path: Path, overrides=()) -> int:
    """Say what an apply did and return its exit code (a hint to run it again keeps ``overrides``)."""
    from runner.run.apply import open_snippet  # lazy: filelock, numpy, pydantic

    if outcome.interrupted:
        print(hint(f"interrupted; finished work is kept in {store_path}; to resume, run:",
                   command("apply", spec, overrides)), file=sys.stderr)
        return EXIT_INTERRUPTED
    if not outcome.ran and not outcome.failed:
        print(f"nothing to do: all {outcome.skipped} tasks of {spec} are done in {store_path}")
        return EXIT_OK
    taken = f", {outcome.taken_over} taken over" if outcome.taken_over else ""
    print(f"ran {len(outcome.ran)} task(s), {outcome.skipped - outcome.taken_over} already done{taken}; "
          f"store: {store_path}")
    if outcome.failed:
        for tid, msg in outcome.failed.items():
            print(f"task {tid} failed: {msg}", file=sys.stderr)
        return EXIT_FAILED
    print("open it with:\n" + open_snippet(store_path))
    print(f"headline numbers per network: {program()} show {store_path}", file=sys.stderr)
    return EXIT_OK


def cmd_monitor(args) -> int:
    from runner.read.status import store_of  # lazy: filelock, numpy
    from runner.storage.store import runner_dir  # lazy: filelock, numpy
    from runner.tui.app import run_monitor  # lazy: filelock, numpy, textual_plotext

    path = store_of(args.target)
    _not_a_store(path)
    if location(args.target).suffix != ".toml" and not (path / "zarr.json").exists() and not runner_dir(path).exists():
        spec = _spec_of_store(path)
        if spec is None:
            raise NoStore(f"{path}: no such store, and no spec here plans it{_similar_store(path)}; "
                          f"`{program()} monitor SPEC` waits for the store the spec's apply will create")
        print(f"{path}: waiting for `{program()} apply {spec}` to create it", file=sys.stderr)
    swept = _sweep_points(path) if (path / "zarr.json").exists() else None
    if swept is not None:
        raise UsageError("a sweep's store holds one store per point; monitor one of them: "
                         + ", ".join(str(p) for _, p in swept))

    return run_monitor(args.target)


def _spec_of_store(path: Path) -> Path | None:
    """A spec near here (``*.toml`` and ``specs/**/*.toml`` of the working directory) whose store is ``path``."""
    from runner.read.status import store_of  # lazy: filelock, numpy

    for spec in sorted({*Path().glob("*.toml"), *Path().glob("specs/**/*.toml")}):
        try:
            if store_of(spec).resolve() == path.resolve():
                return spec
        except Exception:  # noqa: BLE001 - a spec that does not validate plans no store
            continue
    return None


def _similar_store(path: Path) -> str:
    """`` (did you mean 'store/x.zarr'?)`` for a store beside ``path`` with a close name."""
    from runner.spec.specfile import closest  # lazy: pydantic

    parent = path.parent
    close = closest(path.name, [p.name for p in parent.iterdir() if (p / "zarr.json").exists()] if parent.is_dir() else [])
    return f" (did you mean {str(parent / close)!r}?)" if close else ""


def _not_a_store(path: Path) -> None:
    """:class:`NoStore` for a path that is a part of a store, not one: an array's folder (its
    ``zarr.json`` is an array's) or the runner's folder beside a store."""
    from runner.storage.store import node_type  # lazy: filelock, numpy

    if path.suffix == ".runner" and (path.with_suffix(".zarr").exists() or path.is_dir()):
        raise NoStore(f"{path}: the runner's folder beside the store {path.with_suffix('.zarr')}; give the store")
    if path.suffix == ".history" and path.is_dir() and not (path / "zarr.json").exists():
        raise NoStore(f"{path}: the earlier versions of the store {path.with_suffix('.zarr')}; give the store "
                      f"(`{program()} history {path.with_suffix('.zarr')}` lists them)")
    if node_type(path) == "array":
        raise NoStore(f"{path}: an array of a store, not a store; give the store that holds it ({path.parent})")


def _existing_store(target: Path) -> Path:
    from runner.read.status import store_of  # lazy: filelock, numpy
    from runner.storage.store import runner_dir  # lazy: filelock, numpy

    path = store_of(target)
    _not_a_store(path)
    if not (path / "zarr.json").exists() and not runner_dir(path).exists():
        hint = f" (run `{program()} apply {target}`)" if location(target).suffix == ".toml" else _similar_store(path)
        raise NoStore(f"{path}: no such store{hint}")
    return path


def _sweep_points(path: Path) -> list[tuple[str, Path]] | None:
    """(name, store) of each point of a sweep's store, or None for a store without a sweep."""
    from runner.spec.sweep import is_sweep, points  # lazy: pydantic

    if not is_sweep(path):
        return None
    return [(pt["name"], path / pt["name"]) for pt in points(path)]


def cmd_status(args) -> int:
    from runner.read.status import render_status, status_json  # lazy: filelock, numpy

    path = _existing_store(args.target)
    swept = _sweep_points(path)
    if swept is None:
        status = _checked_status(path, args.target)
        _emit(status_json(status)) if args.json else print(render_status(status))
        return EXIT_OK
    statuses = {name: _checked_status(point, args.target) for name, point in swept}
    if args.json:
        _emit({"sweep": str(path), "points": {name: status_json(st) for name, st in statuses.items()}})
    else:
        print("\n\n".join(f"sweep point {name} ({path / name})\n{render_status(st)}" for name, st in statuses.items()))
    return EXIT_OK


def _checked_status(path: Path, target: Path) -> dict:
    """The status of one store, its finished results read back first (:mod:`runner.storage.verify`)."""
    from runner.read.status import load_status  # lazy: filelock, numpy
    from runner.storage.verify import mark_damaged, spec_of, verify  # lazy: filelock, numpy

    if not (path / "zarr.json").exists():
        return load_status(path)
    with _reading(path):  # a whole version of the store, never one an apply is switching in
        damage = verify(path)  # a store it cannot read: StoreUnreadable, never "done"
        return mark_damaged(load_status(path), damage, spec_of(path, target))


def _reading(path: Path):
    """The readers' lock of the store at ``path``, held shared (:mod:`runner.storage.readers`)."""
    from runner.storage.store import runner_dir  # lazy: filelock, numpy

    return reading(runner_dir(path))


def cmd_verify(args) -> int:
    from runner.storage.history import version_at, versions  # lazy: filelock, numpy
    from runner.storage.verify import StoreDamaged as StoreDamagedError  # lazy: filelock, numpy
    from runner.storage.verify import render, to_json, verify  # lazy: filelock, numpy

    kept = version_at(args.target) if args.version is None else None
    if args.version is not None:
        from runner.read.status import store_of  # lazy: filelock, numpy
        from runner.storage.history import history_dir  # lazy: filelock, numpy

        if not history_dir(store_of(args.target)).exists():
            _existing_store(args.target)  # neither a store nor its history: say so first
        found = {v.name: v for v in versions(store_of(args.target))}
        if args.version not in found:
            raise NoStore(f"{args.target} has no kept version {args.version!r}; versions: {', '.join(found) or 'none'} "
                          f"(`{program()} history {args.target}`)")
        kept = found[args.version]
    if kept is not None and "unreadable" in kept.manifest:
        raise StoreDamagedError(f"kept version {kept.name}: {kept.manifest['unreadable']}")
    if kept is not None:
        damage = verify(kept.store, version=kept)
        _emit([to_json(damage)]) if args.json else print(f"kept version {kept.name}\n{render(damage)}")
        return EXIT_OK if damage.ok else EXIT_IOERR
    path = _existing_store(args.target)
    if not (path / "zarr.json").exists():
        raise NoStore(f"{path}: its run has not created the store yet (see `{program()} status {args.target}`)")
    swept = _sweep_points(path)
    found = []
    for point in [point for _, point in swept if (point / "zarr.json").exists()] if swept else [path]:
        with _reading(point):
            found.append(verify(point))
    _emit([to_json(d) for d in found]) if args.json else print("\n\n".join(render(d) for d in found))
    return EXIT_OK if all(d.ok for d in found) else EXIT_IOERR


def cmd_show(args) -> int:
    from runner.read.status import render_show  # lazy: filelock, numpy
    from runner.storage.verify import trusted  # lazy: filelock, numpy

    path = _existing_store(args.store)
    if not (path / "zarr.json").exists():
        raise NoStore(f"{path}: its run has not created the store yet (see `{program()} status {args.store}`)")
    swept = _sweep_points(path)
    points = [(name, point) for name, point in swept if (point / "zarr.json").exists()] if swept else [(None, path)]
    shown = {}
    for name, point in points:
        with _reading(point):  # checked and read as one version of the store
            trusted(point, args.store)
            if args.json:
                from runner.read.status import show_json  # lazy: filelock, numpy

                shown[name] = show_json(point)
            else:
                shown[name] = render_show(point, _width())
    if args.json:
        _emit(shown[None] if swept is None else {"sweep": str(path), "points": shown}, default=str)
    elif swept is None:
        print(shown[None])
    else:
        print("\n\n".join(f"sweep point {name} ({point})\n{shown[name]}" for name, point in points))
    return EXIT_OK


def cmd_history(args) -> int:
    from runner.storage.history import history_dir, remove, versions  # lazy: filelock, numpy
    from runner.read.status import store_of  # lazy: filelock, numpy

    path = store_of(args.target)
    if args.remove is not None and not args.remove.strip():
        raise UsageError(f"--remove needs a version's name, as `{program()} history {args.target}` lists them")
    if not history_dir(path).exists():
        _existing_store(args.target)  # neither a store nor its history: say so, never "no earlier versions"
    if args.remove:
        try:
            gone = remove(path, args.remove)
        except KeyError as err:
            raise NoStore(err.args[0]) from None
        if args.json:
            _emit({"removed": gone.name, "folder": str(gone.folder)})
        else:
            print(f"removed {gone.name} ({gone.folder})")
        return EXIT_OK
    found = versions(path)
    checked = {v.name: _version_damage(v, path) for v in found}
    if args.json:
        _emit([{"name": v.name, "store": str(v.store), **{k: v.manifest.get(k) for k in
                ("created_utc", "reason", "spec_sha256", "replaced", "extended", "dropped")},
                "own_bytes": v.own_bytes(), "ok": checked[v.name][0], "damage": checked[v.name][1]} for v in found])
        return EXIT_OK
    if not found:
        kept = (f"{location(path).described} keeps none: apply --replace is refused there"
                if not location(path).keeps_versions
                else f"apply --replace keeps one in {history_dir(path)}/")
        print(f"{path}: no earlier versions ({kept})")
        return EXIT_OK
    how = "xr.open_zarr(STORE)" if not location(path).note else f"runner.api.open({str(path)!r}, history=True)"
    print(f"{len(found)} earlier version(s) of {path}, oldest first (open one with {how}):")
    for v in found:
        ok, what = checked[v.name]
        print(f"  {v.describe()}" + ("" if ok else f"\n      DAMAGED: {what}; `{program()} verify {args.target} "
                                                  f"--version {v.name}` lists it (a kept version is never written: "
                                                  "remove it or keep it as it is)"))
        for r in v.manifest.get("replaced", [])[:6]:
            print(f"      replaced {r['network']} {r['measure']}: {'; '.join(r['changes']) or 'parameters changed'}")
        for r in v.manifest.get("extended", [])[:6]:
            print(f"      extended {r['network']} {r['measure']}: {'; '.join(r['changes'])}")
        for d in v.manifest.get("dropped", [])[:6]:
            print(f"      dropped {d['network']} {d['measure']}")
    print(f"remove one with `{program()} history {args.target} --remove VERSION`")
    return EXIT_OK


def _version_damage(version, path=None) -> tuple[bool, str]:
    """(whole, what is wrong) of a kept version, checked against what it carries (and, given the store's
    ``path``, that it is a version of that store)."""
    from runner.storage.store import store_id  # lazy: filelock, numpy
    from runner.storage.verify import StoreUnreadable, verify  # lazy: filelock, numpy

    if "unreadable" in version.manifest:
        return False, version.manifest["unreadable"]
    ours, theirs = (store_id(path), store_id(version.store)) if path is not None else (None, None)
    if ours is not None and theirs is not None and ours != theirs:
        return False, (f"a version of another store (store id {theirs[:12]}; this store's is {ours[:12]}), kept here "
                       "by an earlier store at this path or copied in")
    try:
        damage = verify(version.store, version=version)
    except StoreUnreadable as err:
        return False, str(err)
    if damage.ok:
        return True, ""
    shown = "; ".join(f"{a} {k}: {w}" for a, k, w in damage.problems[:2])
    return False, f"{len(damage.problems)} problem(s): {shown}" + (" ..." if len(damage.problems) > 2 else "")


def cmd_figures(args) -> int:
    from runner.read.figures import default_out, figures, fingerprint, up_to_date  # lazy: numpy
    from runner.storage.store import output_problem  # lazy: filelock, numpy
    from runner.storage.verify import trusted  # lazy: filelock, numpy

    if args.out is not None and not args.out.strip():  # Path("") is the working directory
        raise UsageError("--out needs a folder for the figures (default: store/<name>.figures)")
    path = _existing_store(args.target)
    if not (path / "zarr.json").exists():
        raise NoStore(f"{path}: its run has not created the store yet (see `{program()} status {args.target}`)")
    swept = _sweep_points(path)
    for point in [point for _, point in swept if (point / "zarr.json").exists()] if swept else [path]:
        with _reading(point):
            trusted(point, args.target)
    out = Path(args.out) if args.out is not None else default_out(path)
    flag = "--out: " if args.out else ""
    problem = output_problem(out) if args.out is not None else None
    if problem:
        raise CannotWrite(f"{flag}{problem}")
    if out.exists() and not out.is_dir():
        raise CannotWrite(f"{flag}{out} exists and is not a folder; name a folder for the figures")
    stamp = fingerprint(path, args.only)
    kept = None if args.force else up_to_date(out, stamp)
    fresh = kept is not None
    try:
        drawn = kept if fresh else figures(path, out=out, only=args.only, stamp=stamp)
    except KeyError as err:
        raise UsageError(f"--only: {err.args[0]}") from None
    except OSError as err:  # the folder cannot be made, or a figure cannot be written in it
        what = f"write the figures in {out}" if out.is_dir() else f"create the folder {out}"
        raise CannotWrite(f"{flag}cannot {what} ({err.strerror or err})") from None
    if args.json:
        _emit({"out": str(out), "up_to_date": fresh, "figures": [asdict(d) for d in drawn]})
        return EXIT_OK
    n = sum(d.status == "drawn" for d in drawn)
    if fresh:
        print(f"nothing to do: the {n} figure(s) in {out} show the store's results as they are (--force draws "
              "them again)")
        return EXIT_OK
    if not args.only and any(d.id.startswith("var:") for d in drawn):
        print("no figure recipe covers this store: a fallback plot of each numeric variable (var:NAME)")
    absent = [d for d in drawn if d.status != "drawn" and d.reason.startswith("the store has no ")]
    width = max([28, *(len(d.reproduces) for d in drawn if d not in absent)])
    for d in drawn:
        if d not in absent:
            what = f"{', '.join(d.files)}" if d.status == "drawn" else f"skipped: {d.reason}"
            print(f"  {d.id:<20} {d.reproduces:<{width}} {what}")
    if absent:
        print(f"  not in this spec's measures: {', '.join(d.id for d in absent)} (figures.json says what each needs)")
    print(f"{n} figure(s) in {out} (list: {out / 'figures.json'})")
    return EXIT_OK


def _plain(text: str) -> str:
    """A docstring as plain text: reStructuredText's ``literals`` and :role:`targets` without their marks."""
    text = re.sub(r":\w+:`~?([^`]+)`", r"\1", text)
    return re.sub(r"``([^`]+)``", r"\1", text)


def cmd_explain(args) -> int:
    from runner.plugin.measures import measures  # lazy: numpy, pydantic
    from runner.spec.specfile import Experiment  # lazy: pydantic
    from runner.plugin.study import studies  # lazy: numpy, pydantic

    found: list[tuple[str, type, bool]] = []  # (study, table, is a measure)
    for name, cls in studies().items():
        tables = {"experiment": Experiment, **cls().tables()}
        kinds = {kind: reg.Params for kind, reg in measures(name).items()}
        if not args.name:
            print(f"{name + ':':<10} {cls.description}")
            print(f"{'':<10} tables {', '.join(tables)}; measures {', '.join(kinds)}")
            continue
        if args.name in tables:
            found.append((name, tables[args.name], False))
        if args.name in kinds:
            found.append((name, kinds[args.name], True))
    if not args.name:
        print(f"run `{program()} explain NAME` for the parameters of one, with defaults (the papers' settings)")
        return EXIT_OK
    if not found:
        known = {n for name, cls in studies().items()
                 for n in [*({"experiment": Experiment, **cls().tables()}), *measures(name)]}
        raise UsageError(f"unknown name {args.name!r}{did_you_mean(args.name, sorted(known))}; `{program()} explain` "
                         "lists the tables and measures")
    for study, cls, is_measure in found:
        if len(found) > 1:
            print(f"[{args.name}] of the {study} study:")
        if is_measure and cls.__doc__:
            print(_plain(cls.__doc__.strip()))
        for name, field in cls.model_fields.items():
            if name == "kind":
                continue
            print(f"  {name} = {_default_text(field)}")
            if field.description:
                print(f"      {_plain(' '.join(field.description.split()))}")
        if is_measure:
            for line in _variables_lines(studies()[study](), args.name):
                print(line)
    return EXIT_OK


def _default_text(field) -> str:
    """A parameter's default as ``explain`` shows it: ``(per network)`` for one left None to be chosen for
    each network (its description, printed below, says how), not ``None``."""
    if field.is_required():
        return "(required)"
    default = field.get_default(call_default_factory=True)
    if default is None and re.search(r"\bper network\b", field.description or "", re.IGNORECASE):
        return "(per network: see below)"
    return repr(default)


def _variables_lines(study, kind: str) -> list[str]:
    """What ``explain`` says a measure writes: each variable with its dims, units and meaning."""
    from runner.plugin.study import study_variables  # lazy: numpy, pydantic

    try:
        found = study_variables(study, kind)
    except Exception as err:  # noqa: BLE001 - explaining never fails for want of an example
        return [f"variables: not shown here ({type(err).__name__}: {err})"]
    if found is None:
        return ["variables: not shown (laying them out needs data of the measure's own, such as a treebank); "
                f"`{program()} show STORE` lists them in a store it wrote"]
    lines = ["variables (as the store holds them; sizes follow the spec):"]
    for v in found:
        units = v.attrs.get("units")
        lines.append(f"  {v.name} ({', '.join(v.dims)})" + (f" [{units}]" if units else ""))
        lines.append(f"      {_plain(str(v.attrs.get('long_name', '')))}")
    return lines


if __name__ == "__main__":
    sys.exit(main())
