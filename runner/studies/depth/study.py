"""The depth-dynamics study: a layer applied again and again (Inoue et al. 2021, transient chaos in ALBERT).

Tasks: one ``iterate`` task per (network, trajectory measure), grouped so that the pending ones of
a network run as one pass; one ``derive`` task per (network, derived measure), needing the task
it derives from. A task id hashes the trajectory key (model source, revision, init, replicate,
experiment seed, input config and what the input's data are (a local file's digest: an edited
file is a change ``plan`` names), steps, precision, implementation, batch size, whether a twin is
iterated) plus the measure's parameters and version: changing one measure parameter changes
only that measure's task ids.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from rich.filesize import decimal

from runner.core.device import set_precision
from runner.plugin.measures import measure_problems, measures
from runner.plugin.timings import StepMeasure
from runner.core.plan import Task, task_id
from runner.core.requirements import Requirement, device_requirement
from runner.data.files import anchor
from runner.data.registry import DOCUMENTS, ROWS, InputError, check_data, data_identity, data_source_for
from runner.spec.footprint import Need
from runner.spec.specfile import SpecError, SpecFile
from runner.plugin.study import (
    ChecksFiles,
    Describes,
    DrawsFigures,
    Explains,
    Extends,
    HasExamples,
    Prepared,
    Shards,
    SourceUnavailable,
    Study,
    TimesThreads,
    ViewsMeasures,
    WorkerSessions,
    register,
)
from runner.studies.depth import measures as _registrations  # noqa: F401  (registers the measures)
from runner.studies.depth.measure import Derivation, DepthView, NetworkSize, PassNetworkContext, unmet_needs
from runner.studies.depth.estimate import estimate, thread_key, thread_probe
from runner.studies.depth.extend import extensions, final_path, supersede
from runner.studies.depth.layout import build_layout, maskings, segment_length
from runner.studies.depth.resolve import Network, resolve, tokenizer_location
from runner.studies.depth.shards import Shard, ShardSink, merge, pass_key, shard_dir, split
from runner.studies.depth.spec import TABLES, DepthSpec, spec_model
from models.hub import ModelLoadError, load_tokenizer
from runner.core.estimate import Estimates, Footprints, UnknownSize, ValidatesPrecisions, precisions
from runner.studies.depth.precision import validity

if TYPE_CHECKING:
    from runner.studies.depth.iterate import PassInputs

#: A depth spec resolved: its state is the networks.
DepthPrepared = Prepared[list[Network]]


def trajectory_key(spec: DepthSpec, net: Network, identity: str | None = None) -> dict[str, Any]:
    """Everything the reference trajectory x_t of a network depends on; ``identity``: what the input
    source's data are (:func:`input_identity`)."""
    registry = measures("depth")
    model = net.model.model_dump(mode="json", exclude={"name", "replicates", "revisions"})
    twins, masking = _twins(spec, registry), maskings(spec)
    return {
        "model": model,
        "name": net.model.name,
        "replicate": net.replicate,
        "experiment_seed": spec.experiment.seed,
        "input": {**spec.input.key(), **({"identity": identity} if identity else {})} if not net.model.is_map
        else {"samples": spec.input.samples},
        "steps": spec.dynamics.steps,
        "precision": net.precision,
        "implementation": spec.dynamics.implementation if not net.model.is_map else None,
        **({"compile": True} if spec.dynamics.compile else {}),  # in the key only when on: older ids stand
        "batch_size": spec.dynamics.batch_size,
        # x_t is iterated beside the perturbed twins of every measure of the spec that has them, so
        # the batch (and thus every GEMM's shape) is the same in every pass.
        "with_perturbation": bool(twins),
        **({"twins": twins} if not _twins_implied(twins, spec.input.samples, registry) else {}),
        # masked sentences (an MLM readout) change x_0 of text models; in the key only when asked for
        **({"input_masking": masking} if masking and not net.model.is_map else {}),
        # samples leaving f's batch change its shapes; in the key only when on
        **({"early_exit": spec.exit_period()} if spec.dynamics.early_exit else {}),
        # synchronised samples iterated as one token; in the key only when on
        **({"reduce": spec.dynamics.reduction()} if spec.dynamics.reduction() else {}),
    }


def _twins(spec: DepthSpec, registry) -> list[list]:
    """[kind, number of twin rows] of each measure that iterates twins, in the batch's order."""
    return [[m.kind, registry[m.kind](m).n_twins(spec.input.samples)] for m in spec.measure
            if _twinned(registry[m.kind])]


def _twinned(reg) -> bool:
    return reg.tags.step is not None and reg.tags.step.twin is not None


def _twins_implied(twins: list[list], samples: int, registry) -> bool:
    """No twins, or only the twins of every sample of a measure that keeps them out of the key
    (tags' ``twins_in_key = False``): ``with_perturbation`` alone says what the batch holds."""
    return not twins or (len(twins) == 1 and not registry[twins[0][0]].tags.step.twin.in_key and twins[0][1] == samples)


def sized_problems(spec: DepthSpec, networks: list[Network], sf: SpecFile) -> None:
    """Ask every measure again once the networks' sizes are known (:class:`DepthView`): elements beyond every
    state, a precision a measure cannot be trusted in (offline; its spec-only checks passed at validation)."""
    view = DepthView(spec, tuple(NetworkSize(n.label, n.precision, n.n_tokens, n.n_hidden) for n in networks))
    problems = measure_problems("depth", spec, view)
    if problems:
        raise SpecError(sf.path, [sf.problem(loc, message, type(spec)) for loc, message in problems])


def input_identity(spec: DepthSpec, base) -> str | None:
    """What the text input's data are, as its source says (a local file's digest, the Python version of
    the builtin text), so that a changed input changes the task ids; None for a source whose identity is
    its name alone (a hub dataset: its name, subset and split are in the key already) and for specs of
    maps only."""
    if not spec.text_models:
        return None
    inp = spec.input
    identity = data_identity(inp.source, base, DOCUMENTS if inp.pair is None else ROWS, subset=inp.subset,
                             split=inp.split, field=inp.field, fields=None if inp.pair is None else [*inp.pair, inp.score])
    return None if identity == inp.source else identity


def make_tasks(spec: DepthSpec, networks: list[Network], identity: str | None = None) -> list[Task]:
    registry = measures("depth")
    tasks: list[Task] = []
    for net in networks:
        key = trajectory_key(spec, net, identity)
        ids: dict[str, str] = {}
        skipped: dict[str, str] = {}  # measure kind -> why it does not apply to this network
        for m in spec.measure:
            reg = registry[m.kind]
            why = unmet_needs(reg.tags.requires, net) if net.n_hidden else None  # unknown sizes: decided once resolved
            source = reg.tags.derived and reg.tags.derived.source
            if source in skipped:
                why = why or f"its source {source} {skipped[source]}"
            if why:
                skipped[m.kind] = why
        for m in spec.measure:
            reg = registry[m.kind]
            if reg.tags.timing != "step" or m.kind in skipped:
                continue
            params = m.params()
            payload = {"trajectory": key, "measure": m.kind, "params": params, "v": reg.version}
            ids[m.kind] = task_id(payload)
            tasks.append(Task(ids[m.kind], "iterate", m.kind, net.index, m.kind, group=f"pass:{net.index}",
                              steps=spec.dynamics.steps, params=params, key=payload))
        for m in spec.measure:
            reg = registry[m.kind]
            params = m.params()
            if m.kind in skipped:
                payload = {"trajectory": key, "measure": m.kind, "not_applicable": skipped[m.kind], "v": reg.version}
                tasks.append(Task(task_id(payload), "skip", m.kind, net.index, m.kind, params=params, key=payload,
                                  skip=skipped[m.kind]))
            elif reg.tags.timing == "network":
                payload = {"trajectory": key, "measure": m.kind, "params": params, "v": reg.version}
                tasks.append(Task(task_id(payload), "network", m.kind, net.index, m.kind, params=params, key=payload))
            elif reg.tags.timing == "derived":
                source = ids[reg.tags.derived.source]
                payload = {"from": source, "measure": m.kind, "params": params, "v": reg.version}
                tasks.append(Task(task_id(payload), "derive", m.kind, net.index, m.kind, deps=(source,),
                                  params=params, key=payload))
    return tasks


@register
class DepthStudy(Study, ChecksFiles, ViewsMeasures, Describes, HasExamples, Explains, WorkerSessions, Shards,
                 Estimates, Footprints, ValidatesPrecisions, TimesThreads, Extends, DrawsFigures):
    name = "depth"
    description = "a layer applied again and again (depth as time): ALBERT, reference maps"

    spec_factory = staticmethod(spec_model)
    table_models = TABLES
    figure_recipes = "runner.studies.depth.figures"

    def measure_view(self, spec: DepthSpec) -> DepthView:
        return DepthView(spec)

    def check(self, spec: DepthSpec, sf: SpecFile) -> list[str]:
        """Local paths named by the spec must exist (hub ids are checked when resolved)."""
        problems = []
        base = sf.path.parent
        for i, m in enumerate(spec.model):
            local = m.family.local_dir(anchor(m.source, base))
            if local is not None and not local.is_dir():
                problems.append(sf.problem(("model", i, "source"), f"no such directory {m.source.removeprefix('path:')}"))
        if spec.text_models:
            inp = spec.input
            problem = check_data(inp.source, base, DOCUMENTS if inp.pair is None else ROWS, subset=inp.subset,
                                 split=inp.split, field=inp.field,
                                 fields=None if inp.pair is None else [*inp.pair, inp.score])
            if problem:
                problems.append(sf.problem(("input", "source"), problem))
        return problems

    def prepare(self, spec: DepthSpec, sf: SpecFile) -> DepthPrepared:
        base = sf.path.parent  # relative local paths as seen from the spec's folder when they exist there
        spec = spec.model_copy(update={
            "model": [m.model_copy(update={"source": anchor(m.source, base)}) for m in spec.model],
            "input": spec.input.model_copy(update={"source": anchor(spec.input.source, base)})})
        networks, unmet = resolve(spec)
        sized_problems(spec, networks, sf)
        unmet += device_requirement("[dynamics] device", spec.dynamics.device)
        why = self._input_unavailable(spec.input) if spec.text_models else None
        if why:
            unmet.append(Requirement(f"[input] source {spec.input.source!r}", why, kind="data", name=spec.input.source,
                                     fix="give a local .txt/.jsonl/.parquet file instead (sentence pairs: "
                                     ".jsonl/.csv/.tsv/.parquet)"))
        tasks = make_tasks(spec, networks, input_identity(spec, base))
        return Prepared(self, spec, sf, tasks, [n.label for n in networks],
                        spec.dynamics.device, unmet, state=networks, needs=needs(spec, networks))

    @staticmethod
    def _input_unavailable(inp) -> str | None:
        reader = data_source_for(inp.source)
        return reader.unavailable(inp.source, subset=inp.subset, streaming=inp.streaming) if reader else None

    def describe(self, p: DepthPrepared) -> list[str]:
        spec = p.spec
        lines = ["models"]
        for net in p.state:
            m = net.model
            init = f" init={m.init.scheme}(std={m.init.std}, clip={m.init.clip})" if m.init else ""
            dims = f"{net.n_tokens}x{net.n_hidden or '?'}" + (f", {net.n_heads} heads" if net.n_heads else "")
            lines.append(f"  {net.label:<16} {m.source} [{dims}] {net.precision}{init}")
        i = spec.input
        if spec.text_models:
            what = f"field {i.field!r}" if i.pair is None else \
                f"pairs {i.pair[0]!r} [SEP] {i.pair[1]!r}, score {i.score!r}"
            lines.append(f"input      {i.source} ({i.subset}, {i.split}, {what}): {i.samples} samples x "
                         f"{i.tokens} tokens")
        else:
            lines.append(f"input      {i.samples} initial states drawn by each map")
        d = spec.dynamics
        lines.append(f"dynamics   steps={d.steps} precision={d.precision} device={d.device} "
                     f"implementation={d.implementation} durable every {segment_length(spec)} steps")
        if d.reduction():
            from runner.studies.depth.reduce import reduction_lines  # lazy: torch

            lines += reduction_lines(spec, p.state)
        lines.append("measures   (every parameter shown, defaults included)")
        registry = measures("depth")
        for m in spec.measure:
            lines.append(f"  {m.kind:<20} " + " ".join(f"{k}={'(per network)' if v is None else v}"
                                                      for k, v in m.params().items()))
            notes = {}
            for net in p.state or []:
                note = registry[m.kind](m).default_note(net)
                if note:
                    notes.setdefault(note, []).append(net.label)
            lines += [f"  {'':<20}   {', '.join(nets)}: {note}" for note, nets in notes.items()]
        return lines

    def open(self, p: DepthPrepared, device, say) -> DepthSession:
        return DepthSession(p, device)

    def example_spec(self) -> dict:
        """A reference map measured by the first per-step measure every network allows."""
        kind = min(k for k, m in measures("depth").items() if m.tags.timing == "step" and not m.tags.requires)
        return {"experiment": {"name": "example"}, "model": [{"name": "tanh", "source": "map:tanh"}],
                "input": {"samples": 4}, "dynamics": {"steps": 100}, "measure": [{"kind": kind}]}

    def examples(self) -> list[dict]:
        """The reference map of :meth:`example_spec`, then the built-in tiny ALBERT on Python's own English
        docs (offline; built on first use) for a measure that needs text, tokens or attention."""
        text = {"experiment": {"name": "example"}, "model": [{"name": "albert", "source": "builtin:tiny-albert"}],
                "input": {"source": "builtin:pydoc-topics", "samples": 8, "tokens": 8}, "dynamics": {"steps": 100}}
        return [self.example_spec(), text]

    def open_worker(self, p: DepthPrepared, device, store) -> DepthSession:
        return DepthSession(p, device, store)

    def variables_of(self, kind: str) -> list:
        """Laid out for one text model (8 tokens, 2 heads; nothing loaded) and 4 scored samples."""
        spec = self.spec_model().model_validate({
            "experiment": {"name": "explain"}, "model": [{"name": "model", "source": "builtin:tiny-albert"}],
            "input": {"samples": 4, "tokens": 8, "pair": ["a", "b"], "score": "score"},
            "dynamics": {"steps": 100}, "measure": [{"kind": kind}]})
        layout = build_layout(spec, [Network(0, 0, spec.model[0], 0, "fp32", 8, 16, 2)], None, None, [0.0] * 4)
        return [v for v in layout.vars.values() if v.measure == kind]

    def split(self, p: DepthPrepared, group: list[Task], shards: int) -> list[Shard] | None:
        return split(p.spec, p.state, group, shards)

    def estimate(self, p: DepthPrepared, device, precision, calibrated):
        return estimate(p, device, precision, calibrated)

    def thread_probe(self, p: DepthPrepared, device):
        return thread_probe(p.spec, p.state, device)

    def footprint(self, p: DepthPrepared) -> dict[str, int]:
        unknown = list(dict.fromkeys(n.model.source for n in p.state if not n.n_hidden))
        if unknown:  # a network's width is 0 until its model's config is read: any size would be wrong
            which = f"{unknown[0]}'s config is" if len(unknown) == 1 else f"the configs of {', '.join(unknown)} are"
            raise UnknownSize(f"{which} read (not cached here)")
        return footprint(p.spec, p.state)

    def precision_validity(self, p: DepthPrepared, device) -> dict[str, str]:
        registry = measures("depth")
        instances = [registry[m.kind](m) for m in p.spec.measure]
        found = {precision: validity(precision, instances) for precision, why in precisions(device).items()
                 if why is None}
        return {precision: text for precision, text in found.items() if text}

    def thread_key(self, p: DepthPrepared) -> dict:
        return thread_key(p.spec, p.state)

    def extensions(self, p: DepthPrepared, replaced, records):
        return extensions(p, replaced, records)


#: The counts a run's sizes scale with: a size problem is blamed on an override of one of them (not
#: on the file's line of the other), never on an override of a name or label.
SIZED_BY = (("input", "samples"), ("dynamics", "steps"))


def needs(spec: DepthSpec, networks: list[Network]) -> list[Need]:
    """What a run of the spec holds and writes (checked by the engine before anything is allocated): the
    store on its disk, and a pass's state with the coordinates and one segment's results in memory."""
    layout = build_layout(spec, networks)  # coordinates are lazy: nothing is allocated here
    sizes = layout.nbytes()
    name, size = max(sizes.items(), key=lambda kv: kv[1])
    held = footprint(spec, networks, layout)
    state, host = held["device"], held["host"]
    return [Need(("dynamics", "steps") if name in layout.timed else ("input", "samples"), sum(sizes.values()),
                 "the store would need", on="disk", bound="", detail=f" ({name}: {decimal(size)})",
                 fix="; fewer steps, samples or networks, or a larger `every`", also=SIZED_BY),
            Need(("input", "samples") if state > host else ("dynamics", "steps"), host + state, "the run needs",
                 detail=f" at once (state {decimal(state)}, coordinates and results of one segment {decimal(host)})",
                 also=SIZED_BY)]


def footprint(spec: DepthSpec, networks: list[Network], layout=None) -> dict[str, int]:
    """Bytes a network's pass holds at once: ``device`` (:func:`_state_nbytes`) and ``host`` (the
    coordinates and one segment's results of ``layout``, built here when not given)."""
    layout = layout or build_layout(spec, networks)  # lazy: nothing is allocated
    return {"host": layout.host_nbytes(), "device": _state_nbytes(spec, networks)}


def _state_nbytes(spec: DepthSpec, networks: list[Network]) -> int:
    """The iterated batch (x and its twins), what the measures keep beside it (``state_nbytes``: a
    PCA window) and the weights a model family counts (``weights_nbytes``: a reservoir's), per network."""
    registry = measures("depth")
    rows = spec.input.samples + sum(n for _, n in _twins(spec, registry))
    instances = [i for m in spec.measure if isinstance(i := registry[m.kind](m), StepMeasure)]
    out = 0
    for net in networks:
        itemsize = {"fp64": 8, "bf16": 2}.get(net.precision, 4)
        per_sample = net.n_tokens * net.n_hidden * itemsize
        kept = sum(m.state_nbytes(spec.dynamics.steps, per_sample) for m in instances)
        weights = net.model.family.weights_nbytes(net.model.source, net.model.params, net.n_hidden, itemsize)
        out = max(out, rows * per_sample + kept + weights)
    return out


class DepthSession:
    """A depth run: the input sentences drawn, the store's layout, and the passes."""

    def __init__(self, p: DepthPrepared, device, store=None):
        """``store``: a store the driver wrote the inputs into (a worker's session), read instead of
        drawing the sentences from ``[input] source`` again."""
        import torch  # lazy: torch
        from runner.studies.depth.iterate import PassInputs  # lazy: torch

        self.p, self.spec, self.networks, self.device = p, p.spec, p.state, device
        self.samples, tokenizer = self._draw_inputs() if store is None else self._stored_inputs(store)
        s = self.samples
        self.layout = build_layout(self.spec, self.networks, s.texts if s else None, s.origins if s else None,
                                   s.scores if s else None)
        self.inputs = PassInputs(s.input_ids if s else None, s.attention_mask if s else None,
                                 scores=torch.tensor(s.scores, dtype=torch.float64) if s and s.scores else None)
        if s is not None and maskings(self.spec):
            self.inputs = self._masked(s, tokenizer)

    def _masked(self, s, tokenizer) -> PassInputs:
        """The input tokens the spec's masking measures replace by the mask token (their union)."""
        import torch  # lazy: torch
        from runner.studies.depth.iterate import PassInputs  # lazy: torch

        if tokenizer.mask_token_id is None:
            raise SourceUnavailable(f"the tokenizer of {tokenizer_location(self.spec)!r} has no mask token; a measure of "
                              "this spec reads masked sentences")
        registry = measures("depth")
        masked = torch.zeros(s.input_ids.shape, dtype=torch.bool)
        for m in self.spec.measure:
            reg = registry[m.kind](m)
            if reg.tags.timing == "step" and reg.tags.step.masking(m) is not None:
                masked |= reg.masked_positions(s.input_ids, list(tokenizer.all_special_ids), self.spec.experiment.seed)
        return PassInputs(s.input_ids, s.attention_mask, masked, int(tokenizer.mask_token_id), self.inputs.scores)

    def _draw_inputs(self):
        """The input sentences, tokenized, and the tokenizer (None, None for specs with reference maps only)."""
        from runner.studies.depth.samples import draw_pairs, draw_samples  # lazy: torch

        spec = self.spec
        for net in self.networks:  # builtin models are built now, when a task first needs them
            net.model.family.location(net.model.source, build=True)
        if not spec.text_models:
            return None, None

        inp = spec.input
        base = self.p.spec_file.path.parent  # a plugin source's relative paths, as its check saw them
        try:
            tokenizer = load_tokenizer(tokenizer_location(spec))
            if inp.pair is not None:
                return draw_pairs(inp.source, tokenizer=tokenizer, samples=inp.samples, tokens=inp.tokens,
                                  seed=spec.experiment.seed, fields=inp.pair, score=inp.score, subset=inp.subset,
                                  split=inp.split, streaming=inp.streaming, base=base), tokenizer
            return draw_samples(inp.source, tokenizer=tokenizer, samples=inp.samples, tokens=inp.tokens,
                                seed=spec.experiment.seed, subset=inp.subset, split=inp.split, field=inp.field,
                                streaming=inp.streaming, base=base), tokenizer
        except (InputError, ModelLoadError) as err:
            raise SourceUnavailable(f"[input] source {inp.source!r}: {err}") from None

    def _stored_inputs(self, store):
        """The input sentences as the driver wrote them into ``store`` (:meth:`write_inputs`: ids,
        texts, origins, scores), and the tokenizer when a measure masks tokens (None, None for specs
        with reference maps only)."""
        import torch  # lazy: torch
        from runner.studies.depth.samples import Samples  # lazy: torch

        spec = self.spec
        for net in self.networks:
            net.model.family.location(net.model.source, build=True)
        if not spec.text_models:
            return None, None
        ids = torch.from_numpy(np.asarray(store.read("input_ids"), dtype=np.int64))
        if (ids < 0).any():
            raise SourceUnavailable(f"{store.path}: its input_ids are not all written; apply it from the driver again")
        names = set(store.group.array_keys())
        samples = Samples([str(t) for t in store.read("text")], ids, torch.ones_like(ids),
                          [str(o) for o in store.read("origin")],
                          [float(x) for x in store.read("score")] if "score" in names else None)
        tokenizer = None
        if maskings(spec):
            tokenizer = load_tokenizer(tokenizer_location(spec))  # the model's files, not the input source
        return samples, tokenizer

    def write_inputs(self, store) -> None:
        if self.samples is not None:
            ids = self.samples.input_ids.numpy()
            if not np.array_equal(store.read("input_ids"), ids):  # only when new
                store.write("input_ids", (slice(None), slice(None)), ids)
        if self.inputs.masked is not None:
            masked = self.inputs.masked.numpy().astype(np.int8)
            if not np.array_equal(store.read("input_masked"), masked):
                store.write("input_masked", (slice(None), slice(None)), masked)

    def available(self) -> set[str]:
        return set()

    def run(self, group: list[Task], report, shard: Shard | None = None) -> dict:
        from runner.studies.depth.iterate import IteratePass, build_map  # lazy: torch

        net = self.networks[group[0].network]
        if group[0].kind == "skip":
            (t,) = group
            m = next(m for m in self.spec.measure if m.kind == t.measure)
            measures("depth")[t.measure](m).mark_not_applicable(report.store, net.index)
            return {}
        if group[0].kind == "derive":
            (t,) = group
            m = next(m for m in self.spec.measure if m.kind == t.measure)
            measures("depth")[t.measure](m).derive(Derivation(self.spec, net.index, report.store))
            return {}
        if group[0].kind == "network":
            (t,) = group
            m = next(m for m in self.spec.measure if m.kind == t.measure)
            set_precision(net.precision)
            build = lambda: build_map(self.spec, net, self.device)  # noqa: E731
            measures("depth")[t.measure](m).run(PassNetworkContext(self.spec, net, net.index, self.device, self.inputs,
                                                                report.store, build))
            return {}
        ids = [t.id for t in group]
        key = pass_key(ids)
        store = report.store
        if shard is not None:
            key = f"{key}-{shard.name}"
            store = ShardSink(shard_dir(store.state_dir, ids, shard), store.state_dir, store.store_id)
            if store.done:  # finished before the run stopped; its files wait for the merge
                return {"resumed_from": self.spec.dynamics.steps, "device": str(self.device)}
        checkpoint = report.store.state_dir / "checkpoints" / f"{key}.safetensors"
        # a longer run continues the finished pass it extends from the state that pass kept (a shard
        # keeps none and starts from t = 0: the same values, later)
        sources = sorted({i for t in group for i in t.extends})
        source = (final_path(report.store.state_dir, sources), sources) if sources and shard is None else None
        p = IteratePass(self.spec, self.layout, net, [t.measure for t in group], ids, store, self.inputs,
                        self.device, checkpoint, report, rows=shard.rows if shard else None,
                        final=None if shard is not None else final_path(report.store.state_dir, ids), source=source)
        start = p.run()
        if shard is not None:
            store.finish()
        checkpoint.unlink(missing_ok=True)
        if shard is None:
            supersede(report.store.state_dir, net.label, ids)
        return {"resumed_from": start, "loop_seconds": p.loop_seconds, "device": str(self.device),
                **({"event": {"guard_seconds": round(p.reduce.guard_seconds, 3)}} if p.reduce else {})}

    def merge(self, group: list[Task], shards: list[Shard], store, results: list[dict]) -> None:
        """Write the results of a pass run as sample shards (:func:`runner.studies.depth.shards.merge`);
        the shards' own results (``resumed_from``) go into the records, not the arrays."""
        merge(store, self.layout, [t.id for t in group], shards)
