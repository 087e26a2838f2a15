"""What a depth spec costs: a few steps of each network's real pass, timed and scaled.

The calibration runs :class:`IteratePass` itself (the map, every trajectory measure's ``observe``
and the twins' ``advance``, micro-batches included) on a scratch store, with token ids drawn
arbitrarily (the cost of a step does not depend on which tokens), and stops it after a few timed
steps. It is cached per device, model, precision, batch shape and measures. A batch of more than
``CALIBRATION_SAMPLES`` samples is calibrated on that many and scaled linearly on the CPU, when the
spec's measures allow it (on a GPU, on the whole batch); disk sizes come from the store's layout.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from models.hub import ModelLoadError
from models.registry import cache_dir
from runner.core.device import make_deterministic
from runner.core.estimate import Enough, NoEstimate, StepTimer, Unit, device_key
from runner.plugin.measures import measure_problems, measures
from runner.storage.store import Store
from runner.studies.depth.layout import build_layout, maskings, segment_length
from runner.studies.depth.resolve import Network
from runner.studies.depth.measure import DepthView
from runner.studies.depth.spec import DepthSpec

if TYPE_CHECKING:
    import torch

CALIBRATION_SAMPLES = 128


def estimate(p, device: torch.device, precision: str | None, calibrated) -> tuple[list[Unit], list[str]]:
    from runner.studies.depth.reduce import reduces  # lazy: torch

    spec: DepthSpec = p.spec
    networks: list[Network] = p.state
    cal = calibration_spec(spec, device)
    scale = batch_rows(spec) / batch_rows(cal)
    notes = ["segment writes and checkpoints are not timed; derived measures and network measures (fine-tuning) count as 0 s"]
    if scale != 1:
        notes.append(f"a step timed on {cal.input.samples} samples, scaled linearly to {spec.input.samples}")
    per_measure, shared = layout_bytes(spec, networks)
    step_kinds = [m for m in spec.measure if measures("depth")[m.kind].tags.timing == "step"]
    units = []
    for net in networks:
        net = replace(net, precision=precision or net.precision)
        not_built = _not_built(net)
        if not_built:
            raise NoEstimate(not_built)
        key = {"study": "depth", "device": device_key(device), **model_key(spec, net),
               **({"compile": True} if spec.dynamics.compile else {}),
               "samples": cal.input.samples, "batch_size": spec.dynamics.batch_size, "segment": segment_length(cal),
               "measures": [m.model_dump(mode="json") for m in step_kinds]}
        timed = calibrated(key, lambda: time_pass(cal, net, device))
        tasks = [t for t in p.tasks if t.network == net.index]
        runs = [[t.id for t in tasks if t.kind == "iterate"]] + [[t.id] for t in tasks if t.kind != "iterate"]
        seconds = timed["setup_s"] + spec.dynamics.steps * timed["step_s"] * scale
        if spec.dynamics.reduction() and reduces(net):
            reduced = calibrated({**key, "reduced": True}, lambda: time_pass(cal, net, device, reduced=True))
            seconds = timed["setup_s"] + reduced_seconds(spec, timed["step_s"], reduced["step_s"]) * scale
        units.append(Unit(net.label, [r for r in runs if r], seconds, int(sum(per_measure.get(t.measure, 0)
                                                                              for t in tasks))))
    if shared:
        units.append(Unit("coordinates and inputs", [], 0.0, shared))
    if spec.dynamics.reduction():
        notes.append(f"reduce: every sample assumed to run reduced from step {reduction_onset(spec)} on (fp32 ALBERTs "
                     "synchronise by a median of 65-77 steps, docs/performance.md); a step timed with every sample "
                     "reduced; guards at full width; `runner show` gives a run's own reduced_step")
    return units, notes


#: Steps before the samples are taken to run reduced, in an estimate (then rounded up to a check).
ASSUMED_ONSET = 250


def reduction_onset(spec: DepthSpec) -> int:
    every = spec.dynamics.reduce_every
    return min(spec.dynamics.steps, -(-ASSUMED_ONSET // every) * every)


def reduced_seconds(spec: DepthSpec, full_step_s: float, reduced_step_s: float) -> float:
    """Seconds of a reduced run's steps: full until the onset, reduced after, and the guards (one at
    entry, one every ``reduce_guard_every`` steps, each ``reduce_guard_steps`` steps at full width)."""
    d = spec.dynamics
    onset = reduction_onset(spec)
    guards = 1 + (d.steps - onset) // d.reduce_guard_every if onset < d.steps else 0
    return onset * full_step_s + (d.steps - onset) * reduced_step_s + guards * d.reduce_guard_steps * full_step_s


def batch_rows(spec: DepthSpec) -> int:
    """Rows of the iterated batch: the samples and every measure's twins."""
    registry = measures("depth")
    return spec.input.samples + sum(registry[m.kind](m).n_twins(spec.input.samples) for m in spec.measure
                                    if registry[m.kind].tags.step and registry[m.kind].tags.step.twin)


def calibration_spec(spec: DepthSpec, device: torch.device | None = None) -> DepthSpec:
    """The spec with at most ``CALIBRATION_SAMPLES`` samples, if its measures allow it; on a GPU the
    spec itself: a GPU's step time is far from linear in the batch until the batch fills it."""
    if spec.input.samples <= CALIBRATION_SAMPLES or (device is not None and device.type == "cuda"):
        return spec
    small = spec.model_copy(update={"input": spec.input.model_copy(update={"samples": CALIBRATION_SAMPLES})})
    return spec if small.problems() or measure_problems("depth", small, DepthView(small)) else small


def layout_bytes(spec: DepthSpec, networks: list[Network]) -> tuple[dict[str, float], int]:
    """Bytes each measure writes per network, and those of no network (coordinates, inputs)."""
    layout = build_layout(spec, networks)  # lazy: nothing is allocated
    per_measure: dict[str, float] = {}
    shared = sum(c.nbytes for c in layout.coords.values())
    for v in layout.vars.values():
        if "network" in v.dims and v.measure != "*":
            per_measure[v.measure] = per_measure.get(v.measure, 0) + v.nbytes / len(networks)
        else:
            shared += v.nbytes
    return per_measure, int(shared)


def _not_built(net: Network) -> str | None:
    """Why the network's model cannot be calibrated without building or downloading something."""
    source = net.model.source
    where = net.model.family.location(source)
    if Path(where).is_relative_to(cache_dir()) and not Path(where).exists():
        return f"{source} is built by the first `runner apply`"
    if not source.on_hub:
        return None
    from huggingface_hub import try_to_load_from_cache  # lazy: huggingface_hub

    if not any(
            isinstance(try_to_load_from_cache(where, name, revision=net.model.revision), str)
            for name in ("model.safetensors", "model.safetensors.index.json")):
        return f"{source}: its weights are not in the local cache (the first `runner apply` downloads them)"
    return None


def time_pass(spec: DepthSpec, net: Network, device: torch.device, reduced: bool = False) -> dict:
    """Run the network's pass on a scratch store until a few steps are timed (``reduced``: with every
    sample the reduction may take reduced from the start)."""
    import torch  # lazy: torch
    from runner.studies.depth.iterate import IteratePass, PassInputs, build_map  # lazy: torch

    net = replace(net, index=0)
    S, N = spec.input.samples, net.n_tokens
    gen = torch.Generator().manual_seed(0)
    inputs = PassInputs(None, None)
    if not net.model.is_map:
        masked = (torch.rand(S, N, generator=gen) < 0.15) if maskings(spec) else None
        inputs = PassInputs(torch.randint(5, 100, (S, N), generator=gen), torch.ones(S, N, dtype=torch.int64),
                            masked, 4 if masked is not None else None)
    kinds = [m.kind for m in spec.measure if measures("depth")[m.kind].tags.timing == "step"]
    make_deterministic(device)
    build_map(spec, net, device)  # once untimed: imports and the file cache are then warm, as in a run
    with tempfile.TemporaryDirectory(prefix="calibration-") as tmp:
        layout = build_layout(spec, [net])
        store = Store(Path(tmp) / "calibration.zarr")
        store.open(layout, {})
        timer = StepTimer(device)
        run = IteratePass(spec, layout, net, kinds, kinds, store, inputs, device, Path(tmp) / "pass.safetensors", timer)
        run.reduced_from_start = reduced
        try:
            run.run()
        except Enough:
            pass
        except (ModelLoadError, OSError, RuntimeError) as err:
            raise NoEstimate(f"{net.label}: calibration failed: {type(err).__name__}: {err}") from None
    return timer.result()


def heaviest(networks: list[Network]) -> Network:
    """The network whose step costs most (most tokens x hidden units; text models before maps)."""
    return max(networks, key=lambda n: (not n.model.is_map, n.n_tokens * (n.n_hidden or 0)))


def model_key(spec: DepthSpec, net: Network) -> dict:
    """What a step's time depends on in the network itself (for the calibration caches)."""
    import torch  # lazy: torch

    return {"torch": torch.__version__,
            "model": net.model.model_dump(mode="json", exclude={"name", "replicates", "init", "precision"}),
            "precision": net.precision, "implementation": spec.dynamics.implementation,
            "tokens": net.n_tokens, "hidden": net.n_hidden}


def thread_key(spec: DepthSpec, networks: list[Network]) -> dict:
    return {"study": "depth", **model_key(spec, heaviest(networks)), "batch": probe_batch(spec)}


def probe_batch(spec: DepthSpec) -> int:
    """The rows a pass applies the map to at once: the samples and the twins of the measures that
    iterate perturbed twins (the Lyapunov exponent's), or the micro-batch."""
    registry = measures("depth")
    twins = sum(registry[m.kind](m).n_twins(spec.input.samples) for m in spec.measure
                if registry[m.kind].tags.step and registry[m.kind].tags.step.twin)
    return spec.dynamics.batch_size or spec.input.samples + twins


def thread_probe(spec: DepthSpec, networks: list[Network], device: torch.device):
    """One application of the heaviest network's map to a batch the size the run uses, twins of
    the Lyapunov exponent included (random token ids: the cost does not depend on them), for
    :mod:`runner.run.threads`; None when its model is not built or cached yet."""
    import torch  # lazy: torch
    from models.base import MapInputs  # lazy: torch
    from runner.studies.depth.iterate import build_map  # lazy: torch

    net = replace(heaviest(networks), index=0)
    if _not_built(net):
        return None
    model = build_map(spec, net, device)
    S, N = probe_batch(spec), net.n_tokens
    gen = torch.Generator().manual_seed(0)
    if net.model.is_map:
        inputs = MapInputs(S, generator=gen)
    else:
        inputs = MapInputs(S, torch.randint(5, 100, (S, N), generator=gen).to(device),
                           torch.ones(S, N, dtype=torch.int64, device=device))
    with torch.inference_mode():
        x = model.initial_state(inputs)

    def step():
        with torch.inference_mode():
            model.step(x, inputs.attention_mask)

    return step
