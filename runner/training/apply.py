"""``runner plan`` / ``runner apply`` for training studies: validate, load the corpus, plan, run.

Mirrors :mod:`runner.apply`: everything is checked (spec, corpus, store lock) before the first
step; finished tasks are recorded in the store and skipped; a killed run resumes training from
its last durable point (``resume.safetensors``) and redoes only the measure in flight. Measure
tasks run as soon as the checkpoints they need exist, between training steps, with the RNG
state forked so they cannot change the training run.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from runner.apply import Outcome, Unmet, close_run, describe_store, open_run
from runner.data.sources import offline_hub
from runner.provenance import now, provenance_attrs
from runner import interrupt
from runner.store import Store, StoreWriteError
from runner.specfile import SpecError, read_toml
from runner.tasks.device import device_unavailable
from runner.data.corpus import Corpus, CorpusError, load_corpus
from runner.training.layout import build_layout
from runner.training.plan import Task, TrainingPlan, make_plan, task_label
from runner.training.spec import TrainingStudy, load_training_spec, missing_extras
from runner.training.train import Finished, Saved, checkpoint_dir, checkpoint_exists, steps_per_epoch, train


@dataclass
class Prepared:
    spec_path: Path
    spec_text: str
    study: TrainingStudy
    corpus: Corpus | None
    """None when a requirement is unmet (the corpus cannot be read here)."""
    plan: TrainingPlan | None
    """None until the corpus is read: steps per epoch and task ids depend on it."""
    unmet: list[str] = field(default_factory=list)

    @property
    def store_path(self) -> Path:
        return self.study.store_path()

    @property
    def spec(self) -> TrainingStudy:
        return self.study


def corpus_key(corpus: Corpus) -> str:
    h = hashlib.sha256()
    for t in (corpus.train, corpus.valid, corpus.test):
        h.update(t.numpy().tobytes())
    h.update("\n".join(corpus.vocab.itos).encode())
    for name in sorted(corpus.tags):
        s = corpus.tags[name]
        h.update(name.encode() + s.train.numpy().tobytes() + s.valid.numpy().tobytes())
    return h.hexdigest()[:16]


def prepare(spec_path: str | Path) -> Prepared:
    """Validate the spec and load the corpus; raises SpecError or CorpusError (a local corpus that
    cannot be read). A hub corpus that cannot be reached, a missing extra or an absent device are
    collected in ``unmet`` (``plan`` lists them, ``apply`` refuses)."""
    sf = read_toml(spec_path)
    study = load_training_spec(sf.path)
    unmet = missing_extras(study)
    device = device_unavailable(study.training.device)
    if device:
        unmet.append(f"[training] device: {device}")
    tagsets = [t for t in study.tagsets() if not (unmet and t.startswith("spacy_"))]  # spaCy may be missing
    try:
        with offline_hub():  # a hub corpus from the local cache when the hub is off
            corpus = load_corpus(study.corpus, tagsets, seed=study.experiment.seed, base=sf.path.parent)
    except CorpusError as err:
        if not study.corpus.source.startswith("hf:"):
            raise
        unmet.append(str(err))
    if unmet:
        return Prepared(sf.path, sf.text, study, None, None, unmet)
    spe = steps_per_epoch(corpus.train.numel(), study.training)
    if spe < 1:
        raise SpecError(sf.path, [sf.problem(("training", "batch_size"), f"batch_size x bptt ({study.training.batch_size}"
                                             f" x {study.training.bptt}) is larger than the training split "
                                             f"({corpus.train.numel()} tokens)")])
    plan = make_plan(study, spe, corpus_key(corpus))
    return Prepared(sf.path, sf.text, study, corpus, plan)


def plan_rows(p: Prepared, done: dict[str, dict]) -> list[dict]:
    """One row per task: id, network, kind, checkpoint (index, step), state. Before the corpus is
    read, one row per (network, kind) with no id: the schedule and the ids depend on the corpus."""
    if p.plan is None:
        return unresolved_rows(p.study)
    rows = []
    for t in p.plan.tasks:
        rows.append({"id": t.id, "network": p.study.network[t.network].name, "kind": t.kind, "deps": list(t.deps),
                     "measure": task_label(t.kind, t.params), "checkpoint": t.checkpoint,
                     "step": p.plan.steps[t.checkpoint] if t.checkpoint >= 0 else None,
                     "state": "done" if t.id in done else "pending"})
    return rows


def unresolved_rows(study: TrainingStudy) -> list[dict]:
    rows = [{"id": None, "network": n.name, "kind": "train", "measure": "train", "checkpoint": None, "step": None,
             "state": "unresolved"} for n in study.network]
    for m in study.measure:
        label = task_label(m.kind, m.params())
        rows += [{"id": None, "network": n, "kind": m.kind, "measure": label, "checkpoint": None, "step": None,
                  "state": "unresolved"} for n in study.measured(m)]
    return rows


def render_plan(p: Prepared, done: dict[str, dict]) -> str:
    s, tr = p.study, p.study.training
    lines = [f"experiment {s.experiment.name}: {s.experiment.description}", f"store      {describe_store(p.store_path)}"]
    if p.corpus is None:
        lines.append(f"corpus     {s.corpus.source}: not read (see the requirements below); the schedule and the "
                     "task ids follow once it is")
    else:
        lines.append(f"corpus     {s.corpus.source}: {p.corpus.train.numel()} / {p.corpus.valid.numel()} / "
                     f"{p.corpus.test.numel()} tokens (train/valid/test), vocabulary {len(p.corpus.vocab)}")
    lines.append("training   " + " ".join(f"{k}={v}" for k, v in tr.model_dump().items()))
    if p.plan is not None:
        lines.append(f"schedule   {p.plan.steps_per_epoch} steps/epoch; {len(p.plan.steps)} checkpoints at steps "
                     + _short(p.plan.steps))
    lines.append("networks")
    for i, n in enumerate(s.network):
        extra = f" tagset={n.tagset} mode={n.mode}{' shuffled' if n.shuffled else ''}" if n.kind == "tagger" else ""
        lines.append(f"  {n.name:<16} {n.kind} seed={s.network_seed(i)}{extra}")
    lines.append("measures   (every parameter shown, defaults included)")
    for m in s.measure:
        lines.append(f"  {m.kind:<12} " + " ".join(f"{k}={v}" for k, v in m.params().items()))
    rows = plan_rows(p, done)
    lines.append("tasks")
    by_kind: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        by_kind.setdefault((r["network"], r["kind"]), []).append(r)
    for (net, kind), rs in by_kind.items():
        n_done = sum(r["state"] == "done" for r in rs)
        if p.plan is None:
            what = "1 task" if kind == "train" else "one task per checkpoint"
            lines.append(f"  {'?':<17} {net:<16} {rs[0]['measure']:<18} {what}")
            continue
        ident = rs[0]["id"] if len(rs) == 1 else f"{len(rs)} tasks"
        lines.append(f"  {ident:<17} {net:<16} {rs[0]['measure']:<18} {n_done}/{len(rs)} done")
    if p.plan is None:
        lines.append("Plan: not resolved until the requirements below are met")
    else:
        n_done = sum(r["state"] == "done" for r in rows)
        lines.append(f"Plan: {len(rows) - n_done} to run, {n_done} done")
    return "\n".join(lines)


def _short(steps: list[int]) -> str:
    return str(steps) if len(steps) <= 12 else f"[{', '.join(map(str, steps[:6]))}, ..., {', '.join(map(str, steps[-3:]))}]"


def apply(p: Prepared, device: str | None = None, quiet: bool = False) -> Outcome:
    from runner.tasks.device import make_deterministic, pick_device, set_precision

    if p.unmet:
        raise Unmet(p.unmet)
    study, plan = p.study, p.plan
    dev = pick_device(device or study.training.device)
    set_precision("fp32")  # the thesis' LSTMs in IEEE fp32 (cuDNN would otherwise use TF32 on CUDA)
    make_deterministic(dev)
    layout = build_layout(plan, p.corpus)
    store, events, view = open_run(p.store_path, quiet)
    outcome = Outcome([], {}, 0)
    t_run = time.monotonic()
    status = "failed"
    try:
        with interrupt.graceful_stop():
            _apply(p, dev, layout, store, events, view, outcome)
        status = "failed" if outcome.failed else "done"
    except KeyboardInterrupt:
        outcome.interrupted = True
        status = "interrupted"
    finally:
        events.emit("run_finished", status=status, seconds=round(time.monotonic() - t_run, 3))
        close_run(store, events, view)
    return outcome


def _apply(p: Prepared, dev, layout, store: Store, events, view, outcome: Outcome) -> None:
    from runner.tasks.device import describe
    from runner.training.measures import Context, run_measure

    study, plan = p.study, p.plan
    store.open(layout, provenance_attrs(p.spec_text, study.sha256(), describe(dev)))
    store.write("word_frequency", (slice(None),), np.asarray(p.corpus.frequencies(), dtype=np.int64))
    if p.corpus.word_class:
        store.write("word_class", (slice(None),), np.asarray(p.corpus.word_class, dtype=object))
    done = store.tasks()
    todo = [t for t in plan.tasks if t.id not in done]
    outcome.skipped = len(plan.tasks) - len(todo)
    total = plan.steps_per_epoch * study.training.epochs
    events.emit("run_started", spec=str(p.spec_path), spec_sha256=study.sha256(), device=describe(dev),
                store=str(p.store_path),
                tasks=[{"id": t.id, "network": t.network, "network_label": study.network[t.network].name,
                        "measure": t.label, "kind": t.kind, "steps": total if t.kind == "train" else 0,
                        "state": "done" if t.id in done else "pending"} for t in plan.tasks])
    if not todo:
        return
    names = [n.name for n in study.network]
    dirs = {n: checkpoint_dir(store.state_dir, names[n], plan.train_task(n).id) for n in range(len(names))}
    paths: dict[tuple[int, int], Path] = {}
    for n in range(len(names)):
        for c, s in enumerate(plan.steps):
            f = dirs[n] / f"step_{s:08d}.safetensors"
            if checkpoint_exists(f, plan.train_task(n).id):
                paths[(n, c)] = f
    ctx = Context(plan, p.corpus, layout, store, dev, paths)
    pending = [t for t in todo if t.kind != "train"]
    view.start(total=total * sum(t.kind == "train" for t in todo), tasks=len(todo))

    def run_ready() -> None:
        for t in list(pending):
            if not all(k in paths for k in t.needs):
                continue
            interrupt.check()
            pending.remove(t)
            t0 = time.monotonic()
            events.emit("task_started", task=[t.id], network=t.network, total_steps=0)
            try:
                with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []):
                    run_measure(ctx, t)
            except (KeyboardInterrupt, StoreWriteError):
                raise
            except Exception as err:  # one measure failing must not stop the run
                msg = f"{type(err).__name__}: {err}"
                outcome.failed[t.id] = msg
                events.emit("task_failed", task=[t.id], network=t.network, error=msg)
                continue
            seconds = time.monotonic() - t0
            store.record(t.id, _record(t, names, seconds, 0, dev))
            outcome.ran.append(t.id)
            events.emit("task_done", task=[t.id], network=t.network, seconds=round(seconds, 3))

    run_ready()
    for t in [t for t in todo if t.kind == "train"]:
        net = study.network[t.network]
        bar = view.add(f"train {net.name}", total)
        last_emit = [0.0]

        def progress(step: int, total_steps: int, _bar=bar, _t=t) -> None:
            view.update(_bar, step)
            if time.monotonic() - last_emit[0] > 1.0:
                last_emit[0] = time.monotonic()
                events.emit("progress", task=[_t.id], network=_t.network, step=step, total_steps=total_steps,
                            steps_per_s=view.rate(_bar))

        events.emit("task_started", task=[t.id], network=t.network, total_steps=total)
        t0 = time.monotonic()
        try:
            for item in train(net, t.params["seed"], study.training, p.corpus, plan.steps, t.id,
                              dirs[t.network], dev, progress):
                _write_curves(store, t.network, item.curves)
                if isinstance(item, Saved):
                    paths[(t.network, item.index)] = item.path
                    store.write("checkpoint_path", (t.network, item.index),
                                np.asarray(str(item.path.relative_to(p.store_path.parent)), dtype=object))
                    events.emit("checkpoint", task=[t.id], network=t.network, checkpoint=item.index,
                                step=item.step, path=str(item.path))
                    run_ready()
                elif isinstance(item, Finished):
                    seconds = time.monotonic() - t0
                    for c in range(len(plan.steps)):
                        if (t.network, c) in paths:
                            store.write("checkpoint_path", (t.network, c), np.asarray(
                                str(paths[(t.network, c)].relative_to(p.store_path.parent)), dtype=object))
                    store.record(t.id, _record(t, names, seconds, item.resumed_from, dev))
                    outcome.ran.append(t.id)
                    view.done(bar)
                    events.emit("task_done", task=[t.id], network=t.network, seconds=round(seconds, 3),
                                resumed_from=item.resumed_from)
        except (KeyboardInterrupt, StoreWriteError):
            raise
        except Exception as err:
            msg = f"{type(err).__name__}: {err}"
            outcome.failed[t.id] = msg
            events.emit("task_failed", task=[t.id], network=t.network, error=msg)
            view.fail(bar, msg)
    run_ready()
    for t in pending:
        outcome.failed[t.id] = "skipped: the checkpoints it needs do not exist (their training failed)"


def _write_curves(store: Store, n: int, curves) -> None:
    if curves.train_loss:
        k = len(curves.train_loss)
        store.write("train_loss", (n, slice(0, k)), np.asarray(curves.train_loss, dtype=np.float32))
        store.write("learning_rate", (n, slice(0, k)), np.asarray(curves.lr, dtype=np.float32))
    if curves.val_loss:
        e = len(curves.val_loss)
        val = np.asarray(curves.val_loss)
        store.write("val_loss", (n, slice(0, e)), val.astype(np.float32))
        store.write("val_perplexity", (n, slice(0, e)), np.exp(np.minimum(val, 700)).astype(np.float32))
        store.write("epoch_train_loss", (n, slice(0, e)), np.asarray(curves.epoch_train_loss, dtype=np.float32))
        store.write("epoch_learning_rate", (n, slice(0, e)), np.asarray(curves.epoch_lr, dtype=np.float32))


def _record(t: Task, names: list[str], seconds: float, start: int, dev) -> dict:
    return {"measure": t.kind, "label": t.label, "network": t.network, "network_label": names[t.network], "kind": t.kind,
            "checkpoint": t.checkpoint, "seconds": round(seconds, 3), "resumed_from": start, "device": str(dev),
            "finished_utc": now()}


def perplexity(loss: float) -> float:
    return math.exp(min(loss, 700))
