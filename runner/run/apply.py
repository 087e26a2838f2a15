"""``runner plan`` and ``runner apply`` for every study: validate, resolve, plan, run what is missing.

Everything that can be wrong with the input (spec keys, paths, model ids, data sets, sizes, the
store's lock) is checked before the first step is computed. A spec whose tasks are all recorded
done costs a validation and a read of the store's records: no model is built, no text tokenized.
"""

from __future__ import annotations

import json
from contextlib import nullcontext
import logging
import os
import sys
import textwrap
import time
from dataclasses import dataclass
from dataclasses import replace as replace_fields
from pathlib import Path

from runner.core import errors
from runner.core.errors import ConsentNeeded, Locked
from runner.core import interrupt
from runner.run.changes import Changes, changes_of, summary
from runner.run.decide import decide, finished
from runner.core.estimate import Calibrator, estimate
from runner.run.execute.recorder import Recorder
from runner.run.execute.registry import ExecutorOptions, executor_class, executor_problem, executors
from runner.run.execute.scheduler import Scheduler, dry_run
from runner.storage.history import history_dir, served_note, snapshot, versions
from runner.core.layout import INTERNAL, internal
from runner.storage.location import location, write_atomic
from runner.run.provenance import provenance, write_full
from runner.storage.store import now
from runner.run.provenance import root_attrs as provenance_root_attrs
from runner.storage.records import as_bound, renumber_chunks
from runner.storage.verify import Damage, rebind, repair, verify
from runner.storage.store import Store, held_stage, read_tasks, records_lost, root_attrs, root_reads, runner_dir
from runner.storage.store_errors import StorePathError, StoreWriteError, writing
from runner.plugin.study import Prepared, ShardError, split_group
from runner.core.commandline import command, hint
from runner.spec.specfile import SpecFile
from runner.spec.sweep import Sweep, is_sweep, record
from runner.run.threads import ThreadChoice, for_run, threads_problem
from runner.run.threads import use as use_threads
from runner.core.device import describe, device_unavailable, make_deterministic, pick_device
from runner.core.progress import ProgressView
from runner.core.requirements import lines as requirement_lines
from runner.run.execute import lease
from runner.run.execute.ray_cluster import check_address, stop_leftover
from runner.storage.events import EventLog


class ReplaceRefused(ConsentNeeded):
    """Applying the spec would replace or drop finished results, and the user has not agreed to it
    (``apply --replace`` or ``[experiment] replace = true``); nothing ran."""

    def __init__(self, store: Path, spec: SpecFile, changes: Changes | None, extra: list[str] | None = None,
                 lost_records: bool = False):
        rerun = command("apply", spec.path, spec.overrides, "--replace")
        spec = spec.path
        self.changes = changes
        lines = []
        if lost_records:
            lines.append(f"  its completion records ({runner_dir(store) / 'records'}) are missing, so which of its results "
                         "are finished is unknown (was its .runner folder deleted, or the store copied without it?)")
        by_change: dict[str, dict[str, list[str]]] = {}  # the same change, said once for its results
        for r in (changes.replace if changes else []):
            what = "; ".join(r.changes) if r.changes else "its parameters changed"
            by_change.setdefault(what, {}).setdefault(r.network, []).append(r.task.label)
        for what, nets in by_change.items():
            where = "; ".join(f"{net} {', '.join(dict.fromkeys(names))}" for net, names in nets.items())
            lines.append(f"  replace {where}: {what}")
        if changes and changes.drop:
            lines.append(f"  drop {summary(changes.drop, changes.records)}: no longer in the spec")
        lines += [f"  drop {e}" for e in (extra or [])]
        shown = lines[:12] + ([f"  ... and {len(lines) - 12} more (runner plan {spec})"] if len(lines) > 12 else [])
        served = served_note(store, changes.planned_ids()) if changes else None
        super().__init__(
            f"{store} holds finished results that this spec would replace:\n" + "\n".join(shown) + "\n"
            + (textwrap.fill(f"Note: {served}", 88, subsequent_indent="  ") + "\n" if served else "")
            + (f"Nothing was run. {location(store).described.capitalize()} keeps no earlier version, so they "
               "cannot be replaced there: give the changed spec another [experiment] name or store URL."
               if not location(store).keeps_versions else
               hint("Nothing was run. To keep both, give the changed spec another [experiment] name or store. To "
                    f"replace them, keeping the store as it is now readable in {history_dir(store)}/, set "
                    "[experiment] replace = true or run:", rerun)))


class Unmet(errors.Unavailable):
    """Requirements this machine does not meet (a model not cached and no network, a missing extra,
    no CUDA); ``apply`` refuses before any compute, ``plan`` lists them."""

    def __init__(self, requirements: list[str]):
        self.requirements = requirements
        super().__init__("this machine does not meet the spec's requirements:\n" + "\n".join(requirement_lines(requirements)))


@dataclass
class Outcome:
    ran: list[str]
    failed: dict[str, str]
    skipped: int
    """Planned tasks that did not run: done before, or taken over (below)."""
    interrupted: bool = False
    taken_over: int = 0
    """Of ``skipped``: results a longer run keeps as they are (their records taken over, nothing ran)."""


def damage_of(path: Path, quick: bool = False):
    """What :func:`runner.storage.verify.verify` finds in the store at ``path`` (nothing for a new store)."""
    path = location(path)
    return verify(path, quick) if (path / "zarr.json").exists() else Damage(path)


def states(p: Prepared) -> dict[str, str]:
    """What ``apply`` would do with each task: the scheduler's dry run against the store's records
    (less those of tasks whose chunk files are missing or empty: apply recomputes them; a chunk
    that is there but corrupt only ``apply``, ``verify`` and ``status`` find, by reading it)."""
    damaged = damage_of(p.store_path, quick=True).redo
    return dry_run(p.tasks, {tid: rec for tid, rec in read_tasks(p.store_path, working=True).items()
                             if tid not in damaged})


def apply(p: Prepared, *, device: str | None = None, quiet: bool = False,
          executor: ExecutorOptions | None = None, replace: bool = False, threads: int | None = None) -> Outcome:
    """Run the tasks the store is missing with ``executor`` (default: here, one group at a time).
    Finished results the changed spec would replace or drop are only touched with ``replace`` (or
    ``[experiment] replace = true``), after the store as it was is kept in its history; otherwise
    :class:`ReplaceRefused`, before anything runs. SIGINT/SIGTERM stop it at the next step
    (``interrupted``); a store that cannot be written ends it with :class:`StoreWriteError`
    (finished work kept). ``threads``: CPU threads (default: :mod:`runner.run.threads` chooses).

    Three steps: decide (:func:`runner.run.decide.decide`, from the records alone, before anything is
    loaded), open (the lock, the events, the models; under the lock, decide again and keep the store's
    version: :meth:`_Run.prepare_store`; the next version's layout and inputs: :meth:`_Run.open_version`),
    execute (:meth:`_Run.execute`)."""
    options = executor or ExecutorOptions()
    _check_runnable(p, options)
    consent = replace or p.spec.experiment.replace
    done = read_tasks(p.store_path, working=True)
    damage = damage_of(p.store_path)  # reads back the chunks finished tasks recorded
    lost = records_lost(p.store_path)
    held = held_stage(p.store_path) is not None  # a stopped run's values, still to be switched in
    if finished([t.id for t in p.tasks], done, records_lost=lost, whole=damage.ok and not held):
        return Outcome([], {}, len(p.tasks))  # nothing to do costs a read of the results: no lock, no models
    changes = changes_of(p, done)
    Store(p.store_path).check_unlocked()  # a store being written is locked (75), whatever consent it needs
    if decide([t.id for t in p.tasks], done, changes, records_lost=lost, whole=damage.ok, consent=consent).refused:
        raise ReplaceRefused(p.store_path, p.spec_file, changes, lost_records=lost)  # before anything is loaded
    dev = pick_device(device or p.device)
    make_deterministic(dev)
    cpu = for_run(p, dev, threads, Calibrator())
    use_threads(cpu)
    run = _Run(p, dev, cpu, options, device, *open_run(p.store_path, quiet))
    return run.go(damage, consent, lost)


def _check_runnable(p: Prepared, options: ExecutorOptions) -> None:
    """Unmet requirements, an unknown executor, a cluster that does not answer (said in seconds) or
    shards the spec cannot take: before anything is loaded."""
    problem = executor_problem(options.name)
    if p.unmet or problem:
        raise Unmet(p.unmet + ([problem] if problem else []))
    if options.address:
        check_address(options.address)
    check_shards(p, options.shards)


class _Run:
    """One apply's open run: its store (locked), events and progress, and the steps that use them."""

    def __init__(self, p: Prepared, dev, cpu: ThreadChoice, options: ExecutorOptions, device: str | None,
                 store: Store, events: EventLog, view: ProgressView):
        self.p, self.dev, self.cpu, self.options, self.device = p, dev, cpu, options, device
        self.store, self.events, self.view = store, events, view
        self.outcome = Outcome([], {}, 0)

    def go(self, damage: Damage, consent: bool, lost: bool) -> Outcome:
        p, events = self.p, self.events
        t_run, status = time.monotonic(), "failed"
        builds = _BuildProgress(events, self.view)
        try:
            events.emit("run_preparing", spec=str(p.spec_file.path), store=str(p.store_path),
                        stage="loading models and data")
            session = p.study.open(p, self.dev, self.view.warn)  # a Ctrl-C here stops at once: nothing written yet
            with interrupt.graceful_stop():
                changes, sources, kept, reshape = self.prepare_store(session, damage, consent, lost)
                done = self.open_version(session, changes, kept, reshape)
                status = self.execute(session, done, changes, sources)
                self.store.switch_held()  # stopped before here (Ctrl-C, kill), the next apply continues it
        except KeyboardInterrupt:
            self.outcome.interrupted = True
            status = "interrupted"
        except ReplaceRefused:
            status = "refused"
            raise
        finally:
            builds.close()
            events.emit("run_finished", status=status, seconds=round(time.monotonic() - t_run, 3))
            close_run(self.store, events, self.view)
        return self.outcome

    def prepare_store(self, session, damage: Damage, consent: bool, lost: bool):
        """Under the lock: repair what is damaged, decide again (with the arrays the layout remakes),
        and keep the store as it is as a version before anything changes."""
        p, store = self.p, self.store
        if not damage.ok:  # before the arrays are opened: a corrupt one is removed and made again
            self._repair(damage)
        done = read_tasks(p.store_path, working=True)  # under the lock now
        changes = changes_of(p, done)
        reshape = store.reshape(session.layout)
        decision = decide([t.id for t in p.tasks], done, changes, records_lost=lost, whole=True, consent=consent,
                          remade=reshape.lost(done))
        also = [tid for tid in decision.forget if tid not in changes.lost()]
        if decision.refused:
            raise ReplaceRefused(p.store_path, p.spec_file, changes,
                                 [f"{summary(also, done)}: its arrays change shape"] if also else None, lost)
        kept = None
        if decision.keep_version:
            kept = _keep_history(p, changes, also, done, decision.reason)
            interrupt.stall_point(store.state_dir, "replace", 1)  # test hook: a kill after the copy
            store.forget(list(decision.forget))
            interrupt.stall_point(store.state_dir, "replace", 2)  # and after the records went
            self.events.emit("results_replaced", history=str(kept.store), replaced=changes.replaced_ids,
                             dropped=changes.drop + also, extended=changes.extended_ids)
            self.view.warn(f"kept the store as it was in {kept.where} ({len(decision.forget)} finished result(s) "
                           f"{'extended, ' if changes.extend else ''}replaced or dropped; `runner history` lists "
                           "the versions)")
        # the longer run continues what the records said was finished; what it continues is kept
        # beside the records, so that an apply killed before its first durable point still continues
        sources = _extending(store, decision.extend, done)
        if sources:
            p.tasks = [replace_fields(t, extends=sources[t.id]) if t.id in sources else t for t in p.tasks]
        return changes, sources, kept, reshape

    def _repair(self, damage: Damage) -> None:
        # repaired in the next version, held to the run's end: readers see the version they were
        # told is damaged until the repaired one is whole (in place where the root does not read)
        with self.store.transaction(hold=True) if root_reads(self.p.store_path) else nullcontext():
            redo = repair(self.store.root, damage, self.store)
        self.events.emit("results_damaged", task=redo, arrays=damage.variables)
        restored = f"; metadata written back from the manifest: {', '.join(a or '(root)' for a in damage.altered)}" \
            if damage.altered else ""
        removed = f"; removed {len(damage.kept)} altered kept file(s), never continued from" if damage.kept else ""
        self.view.warn(f"{self.p.store_path}: {len(damage.problems)} damaged chunk(s), metadata, record(s) or kept "
                       f"file(s) of {', '.join(damage.variables)}; recomputing the {len(redo)} task(s) that wrote "
                       "them" + restored + removed)

    def open_version(self, session, changes: Changes, kept, reshape) -> dict[str, dict]:
        """The next version of the store: its layout, root attributes, taken-over records and inputs,
        switched in whole (:meth:`Store.transaction`); the finished tasks it holds."""
        p, store = self.p, self.store
        # readers see the store as it was until the next version is whole; a run that replaces or extends
        # finished results writes its values there too, switched in when it ends (Store.switch_held)
        with store.transaction(hold=kept is not None):
            recreated = store.open(session.layout, _root_attrs(p, session.layout, describe(self.dev), self.cpu,
                                                               store.state_dir), reshape)
            store.append_history(f"{now()} runner apply {p.spec_file.path} (spec sha256 {p.spec.sha256()[:12]})"
                                 + (f"; earlier results kept in {kept.store}" if kept else ""))
            if changes.extend:  # results a longer run keeps as they are: their records taken over, nothing runs
                taken = changes.taken_over(p.labels)
                store.record_many(taken)
                self.outcome.taken_over = len(taken)
            session.write_inputs(store)
            store.seal()  # the manifest binds the inputs too
            interrupt.stall_point(store.state_dir, "inputs", 1)  # test hook: the inputs are in the next version
            done = store.tasks()  # without the tasks whose arrays were remade
            _renumber(store, p, done, session.layout, set(recreated))
        return done

    def execute(self, session, done: dict[str, dict], changes: Changes, sources: dict) -> str:
        """Run what is missing with the executor; the run's status (``done`` or ``failed``)."""
        p, outcome = self.p, self.outcome
        todo = [t for t in p.tasks if t.id not in done]
        outcome.skipped = len(p.tasks) - len(todo)
        self.events.emit("run_started", spec=str(p.spec_file.path), spec_sha256=p.spec.sha256(),
                         device=describe(self.dev), threads=self.cpu.to_json(), store=str(p.store_path),
                         tasks=[_task_info(t, p, t.id in done) for t in p.tasks], estimate=_estimate(p, self.dev))
        if todo:
            groups = {t.group or t.id: t.steps for t in todo}
            self.view.start(total=sum(groups.values()), tasks=len(todo), stepless=sum(s == 0 for s in groups.values()))
        options = self.options
        runner = executor_class(options.name)(p, self.dev, replace_fields(
            options, extra={**options.extra, "device": self.device or p.device}))
        recorder = Recorder(p, session, self.store, self.events, self.view, self.dev, options.shards,
                            before=_seconds_before(p.store_path, changes.records, sources))
        try:
            left = Scheduler(p.tasks, done, session.available()).run(runner, recorder)
        finally:
            runner.close()
        outcome.ran, outcome.failed = recorder.ran, dict(recorder.failed)
        for t in left:
            if t.id not in outcome.failed:
                outcome.failed[t.id] = "skipped: what it needs did not finish"
        if not outcome.failed:
            (self.store.state_dir / EXTENDING).unlink(missing_ok=True)
        return "failed" if outcome.failed else "done"


class _BuildProgress(logging.Handler):
    """First-use builds of models (the ``models`` loggers' INFO records, e.g. "building <model>:
    step 120/200"): printed (unless quiet) and written as the run's preparing stage, which the
    monitor and ``status`` show."""

    def __init__(self, events, view):
        super().__init__(logging.INFO)
        self.events, self.view = events, view
        self.logger = logging.getLogger("models")
        self.level_before = self.logger.level
        self.logger.setLevel(logging.INFO)
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        self.events.emit("run_preparing", stage=message)
        self.view.note(message)  # through the view: above its bars when a build starts mid-run

    def close(self) -> None:
        self.logger.removeHandler(self)
        self.logger.setLevel(self.level_before)
        super().close()


def _keep_history(p: Prepared, changes: Changes, also: list[str], records: dict[str, dict], reason: str):
    """Keep the store as it is now in its history, saying what is about to be replaced or dropped."""
    if not p.store_path.keeps_versions:
        raise StorePathError(f"{p.store_path}: replacing or dropping finished results keeps a version of the store "
                             "in its history, which is kept on local disks and, on object storage, for a store named "
                             "NAME.zarr; apply the spec to a new store URL, or remove the store first")
    old = internal(root_attrs(p.store_path))
    return snapshot(p.store_path, {
        "created_utc": now(), "reason": reason,
        "spec_sha256": old.get("spec_sha256"), "spec_toml": old.get("spec_toml"),
        "replaced_by_spec_sha256": p.spec.sha256(),
        "replaced": [{"ids": r.old_ids, "network": r.network, "measure": r.task.label, "new_id": r.task.id,
                      "changes": r.changes} for r in changes.replace],
        "extended": [{"ids": r.old_ids, "network": r.network, "measure": r.task.label, "new_id": r.task.id,
                      "changes": r.changes, "how": r.how} for r in changes.extend],
        "dropped": [{"id": i, "network": records.get(i, {}).get("network_label"),
                     "measure": records.get(i, {}).get("label")} for i in changes.drop + also],
        "records": records})


#: Beside the records: planned task id -> the finished ids it continues, while a longer run is under way.
EXTENDING = "extending.json"


def _seconds_before(path: Path, records: dict[str, dict], sources: dict[str, tuple[str, ...]]) -> dict[str, float]:
    """The time the finished results a longer run continues took, by task: what ``status`` adds to the
    extension's own (from the records, or the history's newest version after a kill took them)."""
    if not sources:
        return {}
    kept = versions(path)
    old = {**((kept[-1].manifest.get("records") or {}) if kept else {}), **records}
    out = {}
    for tid, ids in sources.items():
        spent = [float(old[i].get("seconds") or 0) + float(old[i].get("seconds_before") or 0) for i in ids if i in old]
        if spent:
            out[tid] = round(max(spent), 3)
    return out


def _extending(store: Store, sources: dict[str, tuple[str, ...]], done: dict[str, dict]) -> dict[str, tuple[str, ...]]:
    """The tasks a longer run continues: those ``changes`` found now, and those an earlier apply of
    it found before it was killed (their records were gone then), less the finished ones."""
    path = store.state_dir / EXTENDING
    try:
        earlier = {k: tuple(v) for k, v in json.loads(path.read_bytes()).items()} if path.is_file() else {}
    except (OSError, ValueError):
        earlier = {}
    out = {t: ids for t, ids in {**earlier, **sources}.items() if t not in done}
    if sources:
        with writing(store.state_dir):
            write_atomic(path, json.dumps(out, sort_keys=True).encode())
    return out


def _root_attrs(p: Prepared, layout, device: str, threads: ThreadChoice, state_dir) -> dict:
    """The root attributes apply writes: what a reader looks for, and the provenance's summary under
    ``runner`` (the full provenance written to the runner folder ``state_dir``)."""
    prov = write_full(state_dir, provenance(p.spec_file.text, p.spec.sha256(), device, study=p.study.name,
                                            threads=threads.to_json(), **p.attrs))
    e = p.spec.experiment
    refs = [*p.study.references, *(v.attrs.get("reference", "") for v in layout.vars.values())]
    title = f"{e.name}: {e.description}" if e.description else e.name
    kinds = list(dict.fromkeys(m.kind for m in getattr(p.spec, "measure", [])))
    keywords = ["neural networks", "dynamics", p.study.name, *kinds]
    return {**provenance_root_attrs(title, refs, prov["git_commit"], prov["git_dirty"], _summary(p, title, kinds),
                                    keywords), INTERNAL: prov}


def _summary(p: Prepared, title: str, kinds: list[str]) -> str:
    """ACDD's ``summary``: the title, the study, its measures and networks (the first 10 named)."""
    about = p.study.description or (type(p.study).__doc__ or "").strip().split("\n")[0].rstrip(".")
    names = ", ".join(p.labels[:10]) + (f", ... ({len(p.labels)} in all)" if len(p.labels) > 10 else "")
    measured = f"; measures: {', '.join(kinds)}" if kinds else ""
    return f"{title}. The {p.study.name} study{f' ({about})' if about else ''}{measured}; networks: {names}."


def _renumber(store: Store, p: Prepared, done: dict[str, dict], layout, remade: set[str] = frozenset()) -> None:
    """Records of kept results whose network moved (a network added or taken out before it) get its
    new index, and so do the chunks they list; the chunks of kept results in arrays remade with
    their values carried over (verified before) are bound to their new bytes and keys."""
    dims = {v.name: v.dims for v in layout.vars.values()}
    before = internal(root_attrs(store.path) or {}).get("layout_id")
    done = {tid: as_bound(rec, before) for tid, rec in done.items()}
    moved = {t.id: {**done[t.id], "network": t.network} for t in p.tasks
             if t.id in done and done[t.id].get("network") != t.network}
    for tid, rec in moved.items():
        if "chunks" in rec:  # records made before chunks were listed have none
            rec["chunks"] = renumber_chunks(rec["chunks"], dims, done[tid].get("network"), rec["network"])
    for tid, rec in done.items():
        rec = moved.get(tid, rec)
        if remade & set(rec.get("chunks") or {}):
            moved[tid] = {**rec, "chunks": rebind(store.root, rec["chunks"], remade)}
    if moved and store.layout_id is not None:  # until the switch, the store is the version before
        moved = {tid: {**rec, "layout_id": store.layout_id,
                       "previous": {"layout_id": before, "network": done[tid].get("network"),
                                    "chunks": done[tid].get("chunks") or {}}} for tid, rec in moved.items()}
    if moved:
        store.record_many(moved)


def _cli_flag(name: str, value: str | None = None) -> str:
    return f"--{name}" + (f" {value}" if value is not None else "")


def options_problem(*, device: str | None = None, shards: int = 1, threads: int | None = None,
                    executor: str = "local", address: str | None = None, flag=_cli_flag) -> str | None:
    """Why apply's options cannot be used (a device this machine lacks, shards or threads out of
    range, an unknown executor, an address without Ray), or None; checked before the spec is read,
    by ``runner apply`` and :func:`runner.api.apply` alike. ``flag(name, value=None)`` writes an
    option as its caller names it (``--shards``; the API: ``shards``)."""
    if device is not None and (problem := device_unavailable(device)):
        return f"{flag('device')}: {problem}"
    if shards < 1:
        return f"{flag('shards')}: give a number >= 1, not {shards}"
    if (problem := threads_problem(threads, flag("threads"))) is not None:
        return problem
    if executor not in executors():  # a missing extra is an unmet requirement, said with the plan's
        return f"{flag('executor')}: {executor_problem(executor)}"
    if address is not None and not address.strip():
        return f"{flag('address')} needs a Ray cluster's address (auto, ray://HOST:10001); leave it out to start one"
    if address and executor != "ray":
        return f"{flag('address')} names a Ray cluster: use it with {flag('executor', 'ray')}"
    return None


def check_shards(p: Prepared, shards: int) -> None:
    """Refuse, before anything runs, sample shards of a group whose measures cannot be split."""
    if shards <= 1:
        return
    groups: dict[str, list] = {}
    for t in p.tasks:
        groups.setdefault(t.group or t.id, []).append(t)
    problems = []
    for group in groups.values():
        try:
            split_group(p, group, shards)
        except ShardError as err:
            problems.append(str(err))
    if problems:
        raise ShardError("; ".join(dict.fromkeys(problems)))


def apply_sweep(sweep: Sweep, prepared: list[Prepared], *, device: str | None = None, quiet: bool = False,
                executor: ExecutorOptions | None = None, replace: bool = False, threads: int | None = None) -> Outcome:
    """Apply each point of a sweep in turn (a point that is done costs a read of its records). A
    point that would replace finished results without consent stops the sweep before anything of
    any point runs."""
    import zarr  # lazy: zarr

    total = Outcome([], {}, 0)
    if all(all(t.id in read_tasks(p.store_path) for t in p.tasks) and damage_of(p.store_path).ok for p in prepared):
        total.skipped = sum(len(p.tasks) for p in prepared)
        return total
    if not (replace or prepared[0].spec.experiment.replace):
        refused = [(p, changes_of(p, read_tasks(p.store_path))) for p in prepared]
        for p, changes in refused:
            if changes.needs_consent or records_lost(p.store_path):
                raise ReplaceRefused(p.store_path, p.spec_file, changes, lost_records=records_lost(p.store_path))
    record(sweep, prepared[0].spec_file.text)
    options = executor or ExecutorOptions()
    try:
        for i, (point, p) in enumerate(zip(sweep.points, prepared, strict=True)):
            if not quiet:
                print(f"sweep point {point.name}", file=sys.stderr)
            one = apply(p, device=device, quiet=quiet, executor=replace_fields(options, point=i), replace=replace,
                        threads=threads)
            total.ran += one.ran
            total.failed.update(one.failed)
            total.skipped += one.skipped
            total.taken_over += one.taken_over
            if one.interrupted:
                total.interrupted = True
                break
    finally:
        with writing(sweep.root):
            zarr.consolidate_metadata(sweep.root)  # the root opens consolidated with every point in it
    return total


def open_run(store_path: Path, quiet: bool):
    """Lock the store (a second apply is refused here) and open its event log and progress view."""
    store = Store(store_path)
    store.lock()
    stop_leftover(store.state_dir)  # the local Ray cluster of an earlier apply whose driver was killed
    with writing(store.state_dir):
        lease.take(store.state_dir)  # workers of an earlier holder may not write from now on
    return store, EventLog(store.state_dir / "events.jsonl"), ProgressView(quiet=quiet)


def close_run(store: Store, events, view) -> None:
    """End an apply whatever happened: stop the bars, refresh the store's metadata, release the lock.

    Every step runs even when an earlier one fails. When the run is already ending with an error
    (a full disk), a failed refresh says nothing more: that error is the one message, and the next
    apply refreshes the metadata. Otherwise the refresh's own error is raised."""
    view.stop()
    failed: StoreWriteError | Locked | None = None
    try:
        if store.group is not None:
            store.set_internal(updated_utc=now())
            store.consolidate()
            store.fold_records()  # on object storage: all records in one object, read in one GET
    except (StoreWriteError, Locked) as err:  # a lost lock (object storage) refuses these writes too
        failed = err
    finally:
        events.close()
        store.unlock()
    if failed is not None and sys.exc_info()[1] is None:
        raise failed


def _estimate(p: Prepared, dev) -> dict:
    """The plan's estimate from cached calibrations (apply calibrates nothing), for ``show``."""
    try:
        return estimate(p, dev, calibrate=False, others=False).to_json()
    except Exception as err:  # an estimate is never worth failing a run for
        return {"device": None, "missing": f"{type(err).__name__}: {err}"}


def _task_info(t, p: Prepared, done: bool) -> dict:
    return {"id": t.id, "network": t.network, "network_label": p.labels[t.network], "measure": t.label,
            "kind": t.kind, "checkpoint": t.checkpoint, "steps": t.steps, "state": "done" if done else "pending",
            **({"group": t.group} if t.group else {}), **({"not_applicable": t.skip} if t.skip else {})}


def describe_store(path: Path, spec: Path | None = None) -> str:
    """Where the store goes, as an absolute path (a relative store is relative to the working
    directory), with :func:`store_note` when there is one."""
    note = store_note(path, spec)
    where = str(location(path).absolute())
    return f"{where} {note}" if note else where


def store_note(path: Path, spec: Path | None = None) -> str | None:
    """What a user should know of where the store goes, or None: on object storage; outside the
    working directory; or a relative store of a ``spec`` run from another folder, which goes under
    the working directory (not the spec's project), naming a store of that path beside the spec.
    Paths are compared resolved (``../proj/specs/x.toml``, a link to the project), so the note comes
    from a sibling folder, the project's parent or anywhere else."""
    if location(path).note:
        return location(path).note
    cwd = Path.cwd().resolve()
    absolute = Path(os.path.abspath(path)).resolve()
    notes = [] if absolute.is_relative_to(cwd) else [f"(outside the working directory {cwd})"]
    if spec is not None and not Path(path).is_absolute():
        folder = Path(spec).resolve().parent
        beside = next((root for root in [folder, *folder.parents][:3]
                       if (root / path).exists() and (root / path).resolve() != absolute), None)
        if beside is not None or not folder.is_relative_to(cwd):
            notes.append("(relative to the working directory, not to the spec's folder)")
        if beside is not None:
            notes[-1] += (f"; {beside / path} exists: run from {beside} to use it, or set [experiment] store "
                          "to an absolute path")
    return " ".join(notes) or None


def open_snippet(store_path: Path) -> str:
    if is_sweep(store_path):
        return ("from runner.spec.sweep import open_sweep\n"
                f"ds = open_sweep({str(store_path)!r})  # the points as one dataset; or xr.open_datatree(path)\n"
                "print(ds)")
    return f"{location(store_path).open_lines()}\nprint(ds)"
