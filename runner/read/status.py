"""What a store holds and how far its run is, read from another process without locking.

Sources: the completion records in the store's root attrs, and the event log beside the store.
Shared by ``runner status``, ``runner show`` and the monitor.
"""

from __future__ import annotations

import re
import shlex
import socket
import textwrap
from pathlib import Path

import numpy as np

from runner.core.commandline import program
from runner.core import processes
from runner.storage.events import read_events
from runner.core.layout import internal
from runner.storage.location import location, zarr_store
from runner.storage.store import check_reachable, read_tasks, read_tasks_staged, runner_dir
from runner.core.estimate import duration, measured, remembered
from runner.storage.history import versions


def store_of(target: Path) -> Path:
    """The store a path names: itself, or the store of a spec file (on object storage: reachable)."""
    target = location(target)
    if target.suffix == ".toml":
        from runner.spec.specfile import read_toml, validate  # lazy: pydantic
        from runner.plugin.study import study_for  # lazy: pydantic

        from runner.spec.sweep import split  # lazy: pydantic

        sf = split(read_toml(target))[0]
        target = validate(study_for(sf).spec_model(), sf).store_path()
    check_reachable(target)  # a bucket that cannot be reached: one line naming the store, exit 66
    return target


def _alive(event: dict) -> bool:
    """The writer of ``event`` still runs. A writer on another host (a store on S3 or a shared
    folder) is taken to run until its run says it finished; an event before writers were named, to
    be of this host."""
    return not processes.gone_here({"host": socket.gethostname(), **event})


def load_status(target: Path) -> dict:
    path = store_of(target)
    if not (path / "zarr.json").exists() and not runner_dir(path).exists():
        return {"store": str(path), "state": "absent", "tasks": [], "message": f"no store yet: run `{program()} apply`"}
    records, staged = read_tasks_staged(path)
    events = list(read_events(runner_dir(path) / "events.jsonl"))
    status = fold_status(path, events, records)
    return {**status, "staged": sorted(staged)} if staged else status


def fold_status(path: Path, events: list[dict], records: dict[str, dict], is_alive=None) -> dict:
    """The status of a store from its events (oldest first) and completion records.

    ``is_alive(event) -> bool`` tells whether the writer of the last run still lives (default: this
    host's process table, :func:`_alive`). The monitor calls this with the events it has read so far, incrementally.
    """
    is_alive = is_alive or _alive
    runs = [e for e in events if e["event"] == "run_started"]
    last_run = runs[-1] if runs else None
    tasks: dict[str, dict] = {}
    if last_run:
        for t in last_run["tasks"]:
            tasks[t["id"]] = {**t, "state": "done" if t["id"] in records else "pending", "step": 0}
    for tid, rec in records.items():
        tasks.setdefault(tid, {"id": tid, "network": rec.get("network"), "network_label": rec.get("network_label"),
                               "measure": rec.get("measure"), "kind": rec.get("kind"), "steps": 0,
                               "checkpoint": rec.get("checkpoint")})
        tasks[tid].update(state="done", seconds=rec.get("seconds"), resumed_from=rec.get("resumed_from"),
                          **({"seconds_before": rec["seconds_before"]} if rec.get("seconds_before") else {}))
    run_events = [e for e in events if last_run and e.get("run") == last_run["run"]]
    finished = next((e for e in reversed(run_events) if e["event"] == "run_finished"), None)
    alive = bool(last_run) and is_alive(last_run) and finished is None
    for e in run_events:
        ids = e.get("task", [])
        for tid in ids if isinstance(ids, list) else [ids]:
            if tid not in tasks or tasks[tid]["state"] == "done" and e["event"] != "task_failed":
                continue
            if e["event"] == "task_started":
                tasks[tid].update(state="running" if alive else "interrupted", started=e["ts"])
            elif e["event"] == "progress":
                tasks[tid].update(step=e["step"], steps_per_s=e.get("steps_per_s"), updated=e["ts"])
            elif e["event"] == "task_failed":
                tasks[tid].update(state="failed", error=e.get("error"))
            elif e["event"] == "task_done" and alive:  # the record is written first: a stale read of a live run
                tasks[tid].update(state="done", seconds=e.get("seconds"))
    for t in tasks.values():
        if t["state"] == "done":
            t["step"] = t.get("steps") or 0  # finished: all its steps (0 for a task without steps)
            if t.get("not_applicable"):
                t["state"] = "n/a"  # recorded so that it is not planned again; nothing was computed (as plan says)
        if t["state"] == "running" and t.get("steps_per_s") and t.get("steps"):
            t["eta_s"] = (t["steps"] - t.get("step", 0)) / t["steps_per_s"]
    if alive:
        state = "running"
    elif finished is not None:
        state = finished["status"]
    else:
        state = "interrupted" if last_run else "unknown"
    if tasks and all(t["state"] in ("done", "n/a") for t in tasks.values()):
        state = "done"
    elif state == "done":  # the run finished, but records are missing now (forgotten, deleted): the records decide
        state = "incomplete"
    message = None
    preparing = _preparing(events, last_run, is_alive)
    if preparing is not None:  # a newer run is locked and loading, before its tasks are known
        state, message = preparing
    return {"store": str(path), "state": state, "device": last_run.get("device") if last_run else None,
            "updated": events[-1]["ts"] if events else None, "tasks": sorted(tasks.values(), key=_order),
            **({"message": message} if message else {})}


def status_json(status: dict) -> dict:
    """``status --json``: each task's ``network`` by its label and ``checkpoint`` null when it has none,
    as ``plan --json`` gives them (``network_index``: the network's position in the spec;
    ``network_label`` stays, the label too)."""
    def task(t: dict) -> dict:
        out = {**t, "network": t.get("network_label"), "network_index": t.get("network")}
        if out.get("checkpoint") is not None and out["checkpoint"] < 0:
            out["checkpoint"] = None
        return out

    return {**status, "tasks": [task(t) for t in status.get("tasks", [])]}


def _preparing(events: list[dict], last_run: dict | None, is_alive) -> tuple[str, str] | None:
    """(state, message) when the newest run has not started its tasks yet, else None."""
    prep = next((e for e in reversed(events) if e["event"] == "run_preparing"), None)
    if prep is None or (last_run is not None and (last_run.get("run") == prep.get("run") or last_run["ts"] > prep["ts"])):
        return None
    finished = next((e for e in reversed(events) if e["event"] == "run_finished" and e.get("run") == prep.get("run")),
                    None)
    if finished is not None:
        return None if finished["status"] == "done" else (finished["status"], "the run ended before its tasks started")
    if not is_alive(prep):
        return "interrupted", "the run ended before its tasks started"
    return "preparing", f"apply (pid {prep.get('pid')}) is {prep.get('stage', 'preparing')}"


def _order(t: dict) -> tuple:
    """Network by network (the spec's order), then names with their numbers by value, then checkpoint."""
    return (t.get("network") if t.get("network") is not None else -1, natural(t.get("network_label")),
            natural(t.get("measure")), t.get("checkpoint") if t.get("checkpoint") is not None else -1)


def natural(text) -> tuple:
    """A sort key that orders the numbers inside names by value: ``@2`` before ``@10``."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(text or "")))


def _seconds_text(rec: dict) -> str:
    """A finished task's time; for a longer run, the whole and the extension's part."""
    seconds, before = float(rec.get("seconds") or 0), float(rec.get("seconds_before") or 0)
    return f"{seconds + before:.1f} s ({seconds:.1f} s extending)" if before else f"{seconds:.1f} s"


def render_status(status: dict) -> str:
    lines = [f"store {status['store']}: {status['state']}"]
    if status.get("message"):
        lines.append(status["message"])
    if status.get("device"):
        lines.append(f"device {status['device']}")
    if status.get("staged"):
        lines.append(f"{len(status['staged'])} task(s) finished in the next version, which readers see once the run "
                     f"switches it in (a stopped run: `{program()} apply` continues it)")
    if status["tasks"]:
        lines.append(f"{'task':<17} {'network':<16} {'measure':<20} {'state':<12} progress")
    for t in status["tasks"]:
        progress = ""
        if t["state"] == "done":
            progress = _seconds_text(t)
        elif t.get("steps"):
            progress = f"{t.get('step', 0)}/{t['steps']}"
            if t.get("steps_per_s"):
                progress += f" {t['steps_per_s']:.1f} steps/s"
            if t.get("eta_s") is not None:
                progress += f" ETA {t['eta_s']:.0f} s"
        if t.get("error"):
            progress += f" {t['error']}"
        lines.append(f"{t['id']:<17} {str(t.get('network_label')):<16} {str(t.get('measure')):<20} {t['state']:<12} {progress}")
    n = len(status["tasks"])
    done = sum(t["state"] == "done" for t in status["tasks"])
    skipped = sum(t["state"] == "n/a" for t in status["tasks"])
    if n:
        lines.append(f"no task applies ({skipped} not applicable)" if skipped == n else
                     f"{done}/{n - skipped} tasks done" + (f", {skipped} not applicable" if skipped else ""))
    return "\n".join(lines)


def fit(lines: list[str], width: int = 80) -> list[str]:
    """``lines`` wrapped at words to ``width`` columns, each continuing under its text column (after
    its first run of two or more spaces: ``  name     (dims) ...``), else indented 4 more; a word
    longer than the line (a path) is kept whole."""
    out = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        m = re.match(r"^(\s*\S.*?\s{2,})(?=\S)", line)
        indent = len(m.group(1)) if m and len(m.group(1)) <= width // 2 else len(line) - len(line.lstrip()) + 4
        out += textwrap.wrap(line, width=width, subsequent_indent=" " * indent, break_on_hyphens=False,
                             break_long_words=False)
    return out


def render_show(path: Path, width: int = 80) -> str:
    """What ``show`` prints, in ``width`` columns."""
    import xarray as xr  # lazy: xarray

    path = location(path)
    if not (path / "zarr.json").exists():
        return f"{path}: not a store (no zarr.json)"
    ds = xr.open_zarr(zarr_store(path, read_only=True), consolidated=False)
    lines = [f"store {path}", "dimensions: " + ", ".join(f"{k}={v}" for k, v in ds.sizes.items()), "variables:"]
    for name, v in ds.data_vars.items():
        lines.append(f"  {name:<24} ({', '.join(v.dims)}) {v.dtype}  {v.attrs.get('long_name', '')}"
                     f" [{v.attrs.get('units', '')}]")
    lines.append("coordinates: " + ", ".join(ds.coords))
    lines += _results(ds)
    lines += _outcomes(ds)
    lines += _tables(ds)
    records = read_tasks(path)
    lines.append(f"completed tasks: {len(records)}")
    for tid, rec in sorted(records.items(), key=lambda kv: _order(kv[1])):
        lines.append(f"  {tid}  {rec.get('network_label', ''):<16} {rec.get('measure', ''):<20} "
                     f"{_seconds_text(rec)} on {rec.get('device', '?')}")
    lines += _predicted(path, records)
    prov = internal(ds.attrs)
    versions = prov.get("package_versions", {})
    lines.append("provenance: spec sha256 " + str(prov.get("spec_sha256", "?"))[:16]
                 + f", git {str(prov.get('git_commit', '?'))[:12]}" + (" (with changes)" if prov.get("git_dirty") else "")
                 + f", code sha256 {str(prov.get('code_sha256', '?'))[:12]} ({_code_files(prov)} files"
                 + (f", listed in {prov['provenance_file']})" if prov.get("provenance_file") else ")")
                 + f", device {prov.get('device', '?')}, updated {prov.get('updated_utc', '?')}")
    if prov.get("overrides"):  # the spec as it ran: its file with these changes (spec sha256 is of the result)
        lines.append("overrides: " + shlex.join(arg for o in prov["overrides"] for arg in ("--set", o)))
    if prov.get("threads"):
        lines.append(f"cpu threads: {prov['threads']['threads']} ({prov['threads']['why']})")
    lines.append("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    lines += _history(path)
    return "\n".join(fit(lines, width))


def _history(path: Path) -> list[str]:
    kept = versions(path)
    if not kept:
        return []
    return [f"history: {len(kept)} earlier version(s), kept when apply --replace replaced results "
            f"(`{program()} history {path}`):"] + [f"  {v.describe()}" for v in kept]


#: How ``show`` reduces one network's values of a variable to a headline number (the variable's
#: runner attribute's ``headline`` names the reduction: see runner.plugin.measures.hints).
REDUCTIONS = {
    "mean": lambda v: v.mean(),
    "finite_mean": lambda v: v.where(np.isfinite(v)).mean(),
    "median": lambda v: v.median(),
    "last": lambda v: v.isel({v.dims[-1]: -1}) if v.ndim else v,
    "first_mean": lambda v: v.isel({v.dims[0]: 0}).mean(),
    "count_finite": lambda v: np.isfinite(v).sum(),
    "count_true": lambda v: v.sum(),
    "value": lambda v: v,
}


def _valid(ds, name: str):
    """The values of ``name`` the headline counts: where its hint's outcome variable (``valid``)
    has one of the valid meanings; all where it has none, or the outcome is not written yet."""
    var = ds[name]
    valid = internal(var.attrs).get("headline_valid")
    if not valid or valid[0] not in ds:
        return var
    outcome = ds[valid[0]]
    meanings = str(outcome.attrs.get("flag_meanings", "")).split()
    codes = [c for m, c in zip(meanings, outcome.attrs.get("flag_values", [])) if m in valid[1]]
    unwritten = outcome.isnull() | (outcome == -1)  # the fill, decoded to NaN or not
    return var.where(outcome.isin(codes) | unwritten)


def left_out(ds, name: str) -> dict[str, dict[str, int]]:
    """Per network, the samples the headline of ``name`` leaves out, by outcome (empty: none)."""
    valid = internal(ds[name].attrs).get("headline_valid")
    if not valid or valid[0] not in ds:
        return {}
    counts = outcome_counts(ds[[valid[0]]]).get(valid[0], {})
    return {net: {m: n for m, n in by.items() if n and m not in valid[1]} for net, by in counts.items()
            if any(n and m not in valid[1] for m, n in by.items())}


def headlines(ds) -> list[tuple[str, str, dict[str, float | None]]]:
    """(label, variable, value per network; None: not computed yet) of each variable with a
    headline hint, reduced as the hint asks over the samples it counts (:func:`left_out`)."""
    rows = []
    for name, var in ds.data_vars.items():
        spec = internal(var.attrs).get("headline")
        if spec and "network" in var.dims and spec[1] in REDUCTIONS:
            fn, counted = REDUCTIONS[spec[1]], _valid(ds, name)
            values = [float(fn(counted.isel(network=i)).load()) for i in range(ds.sizes["network"])]
            rows.append((spec[0], name, {str(n): (v if v == v else None) for n, v in zip(ds["network"].values, values)}))
    return rows


def _results(ds) -> list[str]:
    """A few headline numbers per network, as the variables' headline hints ask
    (NaN: not computed yet), and the samples each leaves out."""
    rows = headlines(ds)
    if not rows:
        return []
    lines = ["results (per network; - = none or not computed yet):"]
    for label, name, values in rows:
        lines.append(f"  {label:<26} " + "  ".join(f"{n}={v:.4g}" if v is not None else f"{n}=-"
                                                  for n, v in values.items()))
        for net, by in left_out(ds, name).items():
            said = ", ".join(f"{n} {m.replace('_', ' ')}" for m, n in by.items())
            lines.append(f"  {'':<26} {net}: leaves out {said} (see {internal(ds[name].attrs)['headline_valid'][0]})")
    return lines


def outcome_counts(ds) -> dict[str, dict[str, dict[str, int]]]:
    """Per categorical outcome variable (CF flags, per network): samples of each outcome per network."""
    out = {}
    for name, var in ds.data_vars.items():
        meanings = str(var.attrs.get("flag_meanings", "")).split()
        if not meanings or "network" not in var.dims:
            continue
        out[name] = {str(net): {m: int(np.sum(ds[name].isel(network=i).values.ravel() == code))
                                for m, code in zip(meanings, var.attrs["flag_values"])}
                     for i, net in enumerate(ds["network"].values)}
    return out


def show_json(path: Path) -> dict:
    """What ``show`` prints, as data (``runner show --json``)."""
    import xarray as xr  # lazy: xarray

    ds = xr.open_zarr(zarr_store(location(path), read_only=True), consolidated=False)
    prov = internal(ds.attrs)
    return {
        "store": str(path), "dimensions": dict(ds.sizes),
        "variables": [{"name": n, "dims": list(v.dims), "dtype": str(v.dtype), "long_name": v.attrs.get("long_name"),
                       "units": v.attrs.get("units")} for n, v in ds.data_vars.items()],
        "results": [{"label": label, "variable": name, "per_network": values, "left_out": left_out(ds, name)}
                    for label, name, values in headlines(ds)],
        "outcomes": outcome_counts(ds),
        "tasks": [{"id": tid, **{k: rec.get(k) for k in ("network_label", "measure", "kind", "checkpoint", "seconds",
                                                        "seconds_before", "device", "finished_utc")}}
                  for tid, rec in sorted(read_tasks(path).items(), key=lambda kv: _order(kv[1]))],
        "provenance": {k: prov.get(k) for k in ("spec_sha256", "overrides", "git_commit", "git_dirty", "code_sha256",
                                                 "device", "threads", "updated_utc", "package_versions",
                                                 "provenance_file")},
        "history": [{"name": v.name, "store": str(v.store), "created_utc": v.created} for v in versions(path)],
    }


def _outcomes(ds) -> list[str]:
    """Per categorical outcome (a variable with CF flags, per network and sample): how many samples
    of each network had each outcome."""
    lines = []
    for name, var in ds.data_vars.items():
        meanings = str(var.attrs.get("flag_meanings", "")).split()
        if not meanings or "network" not in var.dims:
            continue
        lines.append(f"  {str(var.attrs.get('long_name', name))} ({name}):")
        for i, net in enumerate(ds["network"].values):
            values = ds[name].isel(network=i).values.ravel()
            counts = [(m, int(np.sum(values == code))) for m, code in zip(meanings, var.attrs["flag_values"])]
            said = ", ".join(f"{n} {m.replace('_', ' ')}" for m, n in counts if n)
            lines.append(f"    {str(net):<24} {said or '-'}")
    return (["outcomes (per network: samples of each kind; - = not computed yet):"] + lines) if lines else []


def _tables(ds) -> list[str]:
    """For each variable with a ``table`` hint: its headline value's mean and sample
    standard deviation over the replicates of each ``model`` (rows in the order of the networks),
    as papers report accuracies over seeds."""
    if "model" not in ds.coords or "network" not in ds.dims:
        return []
    models = [str(m) for m in ds["model"].values]
    lines = []
    for name, var in ds.data_vars.items():
        title, spec = internal(var.attrs).get("table"), internal(var.attrs).get("headline")
        if not title or not spec or "network" not in var.dims:
            continue
        reduction = REDUCTIONS.get(spec[1])
        if reduction is None:
            continue
        counted = _valid(ds, name)
        values = np.array([float(reduction(counted.isel(network=i)).load()) for i in range(ds.sizes["network"])])
        width = max(len(m) for m in models)
        lines += [f"{title}:", f"  {'model':<{width}}  {'mean':>8}   {'s.d.':>7}  n"]
        for m in dict.fromkeys(models):
            v = values[[k for k, x in enumerate(models) if x == m]]
            v = v[np.isfinite(v)]
            if not v.size:
                lines.append(f"  {m:<{width}}  {'-':>8}   {'-':>7}  0")
                continue
            sd = f"{v.std(ddof=1):7.4f}" if v.size > 1 else f"{'-':>7}"
            lines.append(f"  {m:<{width}}  {v.mean():8.4f} ± {sd}  {v.size}")
    return lines


def _code_files(prov: dict) -> int:
    """How many code files the provenance hashes (a store written before the list moved to its
    runner folder holds the list itself)."""
    return prov.get("code_files_count", len(prov.get("code_files", {})))


def _predicted(path: Path, records: dict[str, dict]) -> list[str]:
    """The estimate recorded when the last run started, against the tasks' measured seconds."""
    started = next((e for e in reversed(list(read_events(runner_dir(path) / "events.jsonl")))
                    if e["event"] == "run_started"), None)
    est = (started or {}).get("estimate")
    if not est:
        return []
    later = ""
    if est.get("missing"):  # nothing calibrated as it started: a plan may have calibrated since
        device = est.get("device") or started.get("device")
        cached = remembered(device, started["spec_sha256"]) if device and started.get("spec_sha256") else None
        if cached is None:
            return [f"predicted vs measured: no estimate ({est['missing']})"]
        est, later = cached, "; calibrated after the run started"
    rows = measured(est, records)
    bound = {u["label"] for u in est.get("units", []) if u.get("lower_bound")}
    lines = [f"predicted vs measured device time (estimate on {est['device']}{later}; -: not run, or resumed):",
             f"  {'':<24} {'predicted':>12} {'measured':>9}  measured/predicted"]
    for label, predicted, seconds in rows:
        ratio = f"  {seconds / predicted:.2f}" if seconds and predicted else ""
        got = duration(seconds) if seconds is not None else "-"
        at_least = ">= " if label in bound else ""
        lines.append(f"  {label:<24} {at_least + duration(predicted):>12} {got:>9}{ratio}")
    timed = [(p, s) for _, p, s in rows if s is not None]
    if timed:
        p, s = sum(p for p, _ in timed), sum(s for _, s in timed)
        lines.append(f"  {'total':<24} {('>= ' if bound else '') + duration(p):>12} {duration(s):>9}"
                     + (f"  {s / p:.2f}" if p else ""))
    return lines
