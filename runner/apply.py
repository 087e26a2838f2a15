"""``runner plan`` and ``runner apply``: validate, resolve, plan, then run what is missing.

Everything that can be wrong with the input (spec keys, paths, model ids, data sets, the store's
lock) is checked before the first step is computed.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from models.hub import hub_off
from runner import interrupt
from runner.events import EventLog
from runner.layout import available_memory, build_layout, footprint
from runner.plan import Plan, Task, make_plan
from runner.progress import ProgressView
from runner.provenance import now, provenance_attrs
from runner.resolve import Network, build_builtins, resolve, tokenizer_location
from runner.spec import Spec, Trajectory, load_spec_file
from runner.specfile import SpecError, SpecProblem, read_toml
from runner.store import Store, StoreWriteError
from runner.tasks.device import device_unavailable


class InputsError(Exception):
    """Inputs (data set or tokenizer) that cannot be loaded; the message says which and why."""


class Unmet(Exception):
    """Requirements this machine does not meet (a model not cached and no network, a missing extra,
    no CUDA); ``apply`` refuses before any compute, ``plan`` lists them."""

    def __init__(self, requirements: list[str]):
        self.requirements = requirements
        super().__init__("this machine does not meet the spec's requirements:\n"
                         + "\n".join(f"  - {r}" for r in requirements))


@dataclass
class Prepared:
    spec_path: Path
    spec_text: str
    spec: Spec
    networks: list[Network]
    plan: Plan
    unmet: list[str] = field(default_factory=list)
    """Requirements not met here; empty when the spec can run."""

    @property
    def store_path(self) -> Path:
        return self.spec.store_path()


def prepare(spec_path: str | Path) -> Prepared:
    """Validate the spec and resolve its models (reads configs only); raises SpecError.

    Requirements this machine does not meet are collected in ``unmet``, not raised, so that a
    plan can still be shown; ``apply`` refuses to start when there are any."""
    sf = read_toml(spec_path)
    spec = load_spec_file(sf)
    try:
        networks, unmet = resolve(spec)
        check_sizes(spec, networks)
    except SpecProblem as err:
        raise SpecError(sf.path, [sf.problem(err.loc, err.message, Spec)]) from None
    device = device_unavailable(spec.dynamics.device)
    if device:
        unmet.append(f"[dynamics] device: {device}")
    if spec.text_models and spec.input.source.startswith("hf:") and hub_off():
        unmet.append(f"[input] source {spec.input.source!r}: a hub dataset, streamed, and the hub is switched off "
                     "or out of reach here; give a local .txt/.jsonl/.parquet file instead")
    return Prepared(sf.path, sf.text, spec, networks, make_plan(spec, networks), unmet)


def check_sizes(spec: Spec, networks: list[Network]) -> None:
    """Refuse, before anything is allocated, a run whose store cannot fit on its disk or whose
    iteration cannot fit in this machine's memory; trajectory elements beyond every state."""
    from rich.filesize import decimal

    fp = footprint(spec, networks)
    folder = next((p for p in [spec.store_path().absolute(), *spec.store_path().absolute().parents] if p.exists()))
    free = shutil.disk_usage(folder).free
    if fp.store_total > free:
        name, size = max(fp.store.items(), key=lambda kv: kv[1])
        where = ("dynamics", "steps") if name in fp.timed else ("input", "samples")
        raise SpecProblem(where, f"the store would need {decimal(fp.store_total)} ({name}: "
                          f"{decimal(size)}) but {folder} has {decimal(free)} free; fewer steps, samples or "
                          "networks, or a larger `every`")
    memory = available_memory()
    if fp.host + fp.state > memory:
        where = ("input", "samples") if fp.state > fp.host else ("dynamics", "steps")
        raise SpecProblem(where, f"the run needs about {decimal(fp.host + fp.state)} of memory at once (state "
                          f"{decimal(fp.state)}, coordinates and results of one segment {decimal(fp.host)}); this "
                          f"machine has {decimal(memory)} available")
    sizes = [n.n_hidden for n in networks if n.n_hidden]
    for i, m in enumerate(spec.measure):
        if isinstance(m, Trajectory) and sizes:
            beyond = [e for e in m.elements if e >= max(sizes)]
            if beyond:
                raise SpecProblem(("measure", i, "elements"), f"elements {beyond} are beyond every network's "
                                  f"state (largest: {max(sizes)} elements per token)")


def draw_inputs(p: Prepared):
    """The input sentences, tokenized (None for specs with reference maps only)."""
    if not p.spec.text_models:
        return None
    from models.albert import ModelLoadError, load_tokenizer
    from runner.data.sentences import InputError, draw_samples

    inp = p.spec.input
    location = tokenizer_location(p.spec, p.networks)
    try:
        tokenizer = load_tokenizer(location)
        return draw_samples(inp.source, tokenizer=tokenizer, samples=inp.samples, tokens=inp.tokens,
                            seed=p.spec.experiment.seed, subset=inp.subset, split=inp.split, field=inp.field,
                            streaming=inp.streaming)
    except (InputError, ModelLoadError) as err:
        raise InputsError(f"[input] source {inp.source!r}: {err}") from None


@dataclass
class Outcome:
    ran: list[str]
    failed: dict[str, str]
    skipped: int
    interrupted: bool = False


def apply(p: Prepared, *, device: str | None = None, quiet: bool = False) -> Outcome:
    """Run the tasks the store is missing. SIGINT/SIGTERM stop it at the next step (``interrupted``);
    a store that cannot be written ends it with :class:`StoreWriteError` (finished work kept)."""
    from runner.tasks.derive import DERIVERS
    from runner.tasks.device import describe, make_deterministic, pick_device
    from runner.tasks.iterate import PassInputs, run_pass

    if p.unmet:
        raise Unmet(p.unmet)
    spec = p.spec
    dev = pick_device(device or spec.dynamics.device)
    make_deterministic(dev)
    store, events, view = open_run(p.store_path, quiet)
    outcome = Outcome([], {}, 0)
    t_run = time.monotonic()
    status = "failed"
    try:
        events.emit("run_preparing", spec=str(p.spec_path), store=str(p.store_path), stage="drawing inputs")
        build_builtins(p.networks)
        samples = draw_inputs(p)  # a Ctrl-C here stops at once: nothing is written yet
        layout = build_layout(spec, p.networks, samples.texts if samples else None,
                              samples.origins if samples else None)
        with interrupt.graceful_stop():
            store.open(layout, provenance_attrs(p.spec_text, spec.sha256(), describe(dev)))
            if samples is not None and not np.array_equal(store.read("input_ids"), samples.input_ids.numpy()):
                store.write("input_ids", (slice(None), slice(None)), samples.input_ids.numpy())  # only when new
            done = store.tasks()
            todo = [t for t in p.plan.tasks if t.id not in done]
            outcome.skipped = len(p.plan.tasks) - len(todo)
            events.emit("run_started", spec=str(p.spec_path), spec_sha256=spec.sha256(), device=describe(dev),
                        store=str(p.store_path), tasks=[_task_info(t, p.networks, t.id in done) for t in p.plan.tasks])
            inputs = PassInputs(samples.input_ids if samples else None, samples.attention_mask if samples else None)
            if todo:
                view.start(total=sum(t.steps for t in _passes_total(todo, p.networks)), tasks=len(todo))
            for net in p.networks:
                group = [t for t in todo if t.network == net.index and t.kind == "iterate"]
                if group:
                    interrupt.check()
                    _run_pass(p, layout, net, group, store, inputs, dev, events, view, outcome, run_pass)
            done = store.tasks()
            for t in todo:
                if t.kind == "derive" and all(d in done for d in t.deps):
                    interrupt.check()
                    t0 = time.monotonic()
                    DERIVERS[t.measure](store, t, spec)
                    store.record(t.id, _record(t, p.networks[t.network], time.monotonic() - t0, 0, dev))
                    outcome.ran.append(t.id)
                    events.emit("task_done", task=[t.id], network=t.network, seconds=round(time.monotonic() - t0, 3))
                elif t.kind == "derive":
                    outcome.failed[t.id] = "skipped: the measure it derives from did not finish"
            status = "failed" if outcome.failed else "done"
    except KeyboardInterrupt:
        outcome.interrupted = True
        status = "interrupted"
    finally:
        events.emit("run_finished", status=status, seconds=round(time.monotonic() - t_run, 3))
        close_run(store, events, view)
    return outcome


def _run_pass(p: Prepared, layout, net: Network, group: list[Task], store: Store, inputs, dev, events: EventLog,
              view: ProgressView, outcome: Outcome, run_pass) -> None:
    """One network's pass over its trajectory, running every pending iterate task of it."""
    spec = p.spec
    ids = [t.id for t in group]
    key = hashlib.sha256("/".join(sorted(ids)).encode()).hexdigest()[:16]
    checkpoint = store.state_dir / "checkpoints" / f"{key}.pt"
    label = f"{net.label} ({len(group)} measure{'s' * (len(group) > 1)})"
    bar = view.add(label, spec.dynamics.steps)
    last_emit = [0.0]

    def progress(step: int) -> None:
        view.update(bar, step)
        now_ = time.monotonic()
        if now_ - last_emit[0] > 1.0:
            last_emit[0] = now_
            events.emit("progress", task=ids, network=net.index, step=step, total_steps=spec.dynamics.steps,
                        steps_per_s=view.rate(bar))

    def notify(event: str, **fields) -> None:
        events.emit(event, task=ids, network=net.index, **fields)
        if event == "nonfinite":
            view.warn(f"{net.label}: {fields['samples']} of {spec.input.samples} samples diverged (NaN or Inf "
                      f"from step {fields['first_step']}); their values are NaN, see diverged_step")

    events.emit("task_started", task=ids, network=net.index, total_steps=spec.dynamics.steps)
    try:
        start, seconds, loop_seconds = run_pass(spec, layout, net, group, store, inputs, dev, checkpoint,
                                                progress, notify)
    except (KeyboardInterrupt, StoreWriteError):
        raise
    except Exception as err:  # one network failing must not stop the others
        msg = f"{type(err).__name__}: {err}"
        outcome.failed.update({i: msg for i in ids})
        events.emit("task_failed", task=ids, network=net.index, error=msg)
        view.fail(bar, msg)
        return
    view.done(bar)
    for t in group:
        store.record(t.id, _record(t, net, seconds, start, dev))
    outcome.ran += ids
    events.emit("task_done", task=ids, network=net.index, seconds=round(seconds, 3), resumed_from=start,
                steps_per_s=round((spec.dynamics.steps - start) / max(loop_seconds, 1e-9), 3))
    checkpoint.unlink(missing_ok=True)


def open_run(store_path: Path, quiet: bool) -> tuple[Store, EventLog, ProgressView]:
    """Lock the store (a second apply is refused here) and open its event log and progress view."""
    store = Store(store_path)
    store.lock()
    return store, EventLog(store.state_dir / "events.jsonl"), ProgressView(quiet=quiet)


def close_run(store: Store, events: EventLog, view: ProgressView) -> None:
    """End an apply whatever happened: stop the bars, refresh the store's metadata, release the lock.

    Every step runs even when an earlier one fails. When the run is already ending with an error
    (a full disk), a failed refresh says nothing more: that error is the one message, and the next
    apply refreshes the metadata. Otherwise the refresh's own error is raised."""
    view.stop()
    failed: StoreWriteError | None = None
    try:
        if store.group is not None:
            store.set_attrs(runner_updated_utc=now())
            store.consolidate()
    except StoreWriteError as err:
        failed = err
    finally:
        events.close()
        store.unlock()
    if failed is not None and sys.exc_info()[1] is None:
        raise failed


def _passes_total(todo: list[Task], networks: list[Network]) -> list[Task]:
    """One iterate task per network stands for its pass (for the overall progress bar)."""
    seen, out = set(), []
    for t in todo:
        if t.kind == "iterate" and t.network not in seen:
            seen.add(t.network)
            out.append(t)
    return out


def _record(t: Task, net: Network, seconds: float, start: int, dev) -> dict:
    return {"measure": t.measure, "network": net.index, "network_label": net.label, "kind": t.kind,
            "seconds": round(seconds, 3), "resumed_from": start, "device": str(dev), "finished_utc": now()}


def _task_info(t: Task, networks: list[Network], done: bool) -> dict:
    return {"id": t.id, "network": t.network, "network_label": networks[t.network].label, "measure": t.measure,
            "kind": t.kind, "steps": t.steps, "state": "done" if done else "pending"}


def open_snippet(store_path: Path) -> str:
    return (
        "import xarray as xr\n"
        f"ds = xr.open_zarr({str(store_path)!r})\n"
        "print(ds)"
    )


def describe_store(path: Path) -> str:
    """Where the store goes, said plainly when that is outside the working directory."""
    absolute = path.absolute()
    if absolute.is_relative_to(Path.cwd()):
        return str(path)
    return f"{absolute} (outside the working directory {Path.cwd()})"
