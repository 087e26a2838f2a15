"""``runner plan`` and ``runner apply``: validate, resolve, plan, then run what is missing.

Everything that can be wrong with the input (spec keys, paths, model ids, data sets, the store's
lock) is checked before the first step is computed.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from runner.events import EventLog
from runner.layout import build_layout
from runner.plan import Plan, Task, make_plan
from runner.progress import ProgressView
from runner.provenance import now, provenance_attrs
from runner.resolve import Network, resolve, tokenizer_location
from runner.spec import Spec, load_spec
from runner.store import Store


class InputsError(Exception):
    """Inputs (data set or tokenizer) that cannot be loaded; the message says which and why."""


@dataclass
class Prepared:
    spec_path: Path
    spec_text: str
    spec: Spec
    networks: list[Network]
    plan: Plan

    @property
    def store_path(self) -> Path:
        return self.spec.store_path()


def prepare(spec_path: str | Path) -> Prepared:
    """Validate the spec and resolve its models (reads configs only); raises SpecError/ResolveError."""
    spec_path = Path(spec_path)
    spec = load_spec(spec_path)
    networks = resolve(spec)
    return Prepared(spec_path, spec_path.read_text(), spec, networks, make_plan(spec, networks))


def draw_inputs(p: Prepared):
    """The input sentences, tokenized (None for specs with reference maps only)."""
    if not p.spec.text_models:
        return None
    from models.albert import ModelLoadError, load_tokenizer
    from runner.inputs import InputError, draw_samples

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
    from runner.tasks.derive import DERIVERS
    from runner.tasks.device import describe, pick_device
    from runner.tasks.iterate import PassInputs, run_pass

    spec = p.spec
    dev = pick_device(device or spec.dynamics.device)
    samples = draw_inputs(p)
    layout = build_layout(spec, p.networks, samples.texts if samples else None, samples.origins if samples else None)
    store, events, view = open_run(p.store_path, quiet)
    outcome = Outcome([], {}, 0)
    t_run = time.monotonic()
    try:
        store.open(layout, provenance_attrs(p.spec_text, spec.sha256(), describe(dev)))
        if samples is not None and not np.array_equal(store.read("input_ids"), samples.input_ids.numpy()):
            store.write("input_ids", (slice(None), slice(None)), samples.input_ids.numpy())  # only when new
        done = store.tasks()
        todo = [t for t in p.plan.tasks if t.id not in done]
        outcome.skipped = len(p.plan.tasks) - len(todo)
        events.emit("run_started", spec=str(p.spec_path), spec_sha256=spec.sha256(), device=describe(dev),
                    store=str(p.store_path), tasks=[_task_info(t, p.networks, t.id in done) for t in p.plan.tasks])
        if not todo:
            events.emit("run_finished", status="done", seconds=0.0)
            return outcome
        inputs = PassInputs(samples.input_ids if samples else None, samples.attention_mask if samples else None)
        view.start(total=sum(t.steps for t in _passes_total(todo, p.networks)), tasks=len(todo))
        for net in p.networks:
            group = [t for t in todo if t.network == net.index and t.kind == "iterate"]
            if not group:
                continue
            ids = [t.id for t in group]
            key = hashlib.sha256("/".join(sorted(ids)).encode()).hexdigest()[:16]
            checkpoint = store.state_dir / "checkpoints" / f"{key}.pt"
            label = f"{net.label} ({len(group)} measure{'s' * (len(group) > 1)})"
            bar = view.add(label, spec.dynamics.steps)
            last_emit = [0.0]

            def progress(step: int, _bar=bar, _ids=ids) -> None:
                view.update(_bar, step)
                now_ = time.monotonic()
                if now_ - last_emit[0] > 1.0:
                    last_emit[0] = now_
                    events.emit("progress", task=_ids, network=net.index, step=step, total_steps=spec.dynamics.steps,
                                steps_per_s=view.rate(_bar))

            events.emit("task_started", task=ids, network=net.index, total_steps=spec.dynamics.steps)
            try:
                start, seconds, loop_seconds = run_pass(spec, layout, net, group, store, inputs, dev, checkpoint, progress)
            except KeyboardInterrupt:
                raise
            except Exception as err:  # one network failing must not stop the others
                msg = f"{type(err).__name__}: {err}"
                outcome.failed.update({i: msg for i in ids})
                events.emit("task_failed", task=ids, network=net.index, error=msg)
                view.fail(bar, msg)
                continue
            view.done(bar)
            for t in group:
                store.record(t.id, _record(t, net, seconds, start, dev))
            outcome.ran += ids
            events.emit("task_done", task=ids, network=net.index, seconds=round(seconds, 3), resumed_from=start,
                        steps_per_s=round((spec.dynamics.steps - start) / max(loop_seconds, 1e-9), 3))
            checkpoint.unlink(missing_ok=True)
        done = store.tasks()
        for t in todo:
            if t.kind == "derive" and all(d in done for d in t.deps):
                t0 = time.monotonic()
                DERIVERS[t.measure](store, t, spec)
                store.record(t.id, _record(t, p.networks[t.network], time.monotonic() - t0, 0, dev))
                outcome.ran.append(t.id)
                events.emit("task_done", task=[t.id], network=t.network, seconds=round(time.monotonic() - t0, 3))
            elif t.kind == "derive":
                outcome.failed[t.id] = "skipped: the measure it derives from did not finish"
        status = "failed" if outcome.failed else "done"
        events.emit("run_finished", status=status, seconds=round(time.monotonic() - t_run, 3))
    except KeyboardInterrupt:
        outcome.interrupted = True
        events.emit("run_finished", status="interrupted", seconds=round(time.monotonic() - t_run, 3))
    finally:
        close_run(store, events, view)
    return outcome


def open_run(store_path: Path, quiet: bool) -> tuple[Store, EventLog, ProgressView]:
    """Lock the store (a second apply is refused here) and open its event log and progress view."""
    store = Store(store_path)
    store.lock()
    return store, EventLog(store.state_dir / "events.jsonl"), ProgressView(quiet=quiet)


def close_run(store: Store, events: EventLog, view: ProgressView) -> None:
    """End an apply whatever happened: stop the bars, refresh the store's metadata, release the lock."""
    view.stop()
    if store.group is not None:
        store.set_attrs(runner_updated_utc=now())
        store.consolidate()
    events.close()
    store.unlock()


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
