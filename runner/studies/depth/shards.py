"""Sample shards of a depth pass: each runs the pass over a range of samples, anywhere.

A shard cannot write the store itself: along ``sample`` a variable is one chunk, so two shards
would write the same chunk. A shard's pass writes into a :class:`ShardSink` instead: one file per
region write, beside the store (``<store>.runner/shards/<pass>/<k>of<n>/``), written atomically
before the shard's durable point, so a killed shard resumes like a pass. When every shard is
done, :func:`merge` (in the process that holds the store's lock) writes each region once:
per-sample values joined along ``sample``, and the values of a measure over all samples
(N_eff) combined from the shards' sufficient statistics by the measure's ``combine``.

Which measures can be split is declared by each measure (its tags' ``shard``): per-sample
measures (``"samples"``, the Lyapunov exponent included: a shard's twins are the whole batch's,
sliced) and measures with exact per-shard statistics (``"combine"``). A spec with twins of chosen
samples (``twin_distance``: iterated in every pass), or a measure that reads all samples at once
(the MLM readout's refit, PCA, the selected samples of ``trajectory``), is refused.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from safetensors.numpy import load, save

from runner.storage.location import Location, location, remove_tree
from runner.plugin.measures import measures
from runner.studies.depth.measure import DepthView, NetworkSize
from runner.storage.store import atomic_write_bytes
from runner.plugin.study import ShardError

SAMPLE = "sample"


@dataclass(frozen=True)
class Shard:
    index: int
    count: int
    lo: int
    hi: int

    @property
    def rows(self) -> slice:
        return slice(self.lo, self.hi)

    @property
    def name(self) -> str:
        return f"{self.index}of{self.count}"


def split(spec, networks, group, n: int) -> list[Shard] | None:
    """``n`` shards of contiguous samples for a pass (None for a derived task); refuses what cannot split."""
    if group[0].kind != "iterate":
        return None
    registry = measures("depth")
    twins = [m.kind for m in spec.measure if (s := registry[m.kind].tags.step) and s.twin and s.shard is None]
    if twins:
        raise ShardError(f"--shards: [[measure]] {twins[0]} iterates perturbed twins of chosen samples beside every "
                         "pass; a spec with it cannot be split into sample shards (run it with --shards 1)")
    if spec.dynamics.reduction():
        raise ShardError("--shards: [dynamics] reduce draws each guard's perturbation over the samples checked "
                         "together, so a shard's decisions could differ from the whole pass's; run it with --shards 1")
    net = networks[group[0].network]
    params = {m.kind: m for m in spec.measure}
    view = DepthView(spec, (NetworkSize(net.label, net.precision, net.n_tokens, net.n_hidden),), shards=n)
    for t in group:
        if registry[t.measure].tags.step.shard is None:
            ok = sorted(k for k, r in registry.items() if r.tags.step and r.tags.step.shard)
            raise ShardError(f"--shards: [[measure]] {t.measure} reads all samples at once and cannot be split into "
                             f"sample shards (measures that can: {', '.join(ok)})")
        # its problems on a view that knows the shards (its spec-only and sized ones passed at plan)
        problem = next(iter(registry[t.measure](params[t.measure]).problems(view)), None)
        if problem:
            raise ShardError(f"--shards: [[measure]] {t.measure} on {problem[1]}")
    S = spec.input.samples
    n = min(n, S)
    bounds = [S * k // n for k in range(n + 1)]
    return [Shard(k, n, bounds[k], bounds[k + 1]) for k in range(n)]


def pass_key(ids: list[str]) -> str:
    return hashlib.sha256("/".join(sorted(ids)).encode()).hexdigest()[:16]


def shard_dir(state_dir: Location, ids: list[str], shard: Shard) -> Location:
    return location(state_dir) / "shards" / pass_key(ids) / shard.name


def _region_json(region: tuple) -> list:
    return [r if isinstance(r, int) else [r.start, r.stop] for r in region]


def _region(value: list) -> tuple:
    return tuple(r if isinstance(r, int) else slice(*r) for r in value)


class ShardSink:
    """What a shard's pass writes to instead of the store (same ``write``, ``state_dir``, ``store_id``)."""

    def __init__(self, folder: Path, state_dir: Path, store_id: str):
        self.folder, self.state_dir, self.store_id = folder, state_dir, store_id

    def write(self, name: str, region: tuple, values) -> None:
        meta = {"name": name, "region": json.dumps(_region_json(region))}
        key = hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()[:16]
        data = save({"values": np.ascontiguousarray(np.asarray(values))}, metadata=meta)
        atomic_write_bytes(self.folder / f"{key}.safetensors", data)

    def finish(self) -> None:
        atomic_write_bytes(self.folder / "done", b"")

    @property
    def done(self) -> bool:
        return (self.folder / "done").is_file()


def _written(folder: Location) -> dict[tuple[str, str], np.ndarray]:
    from runner.storage.checkpoint import read_metadata  # lazy: torch

    out = {}
    for f in sorted(folder.glob("*.safetensors"), key=str):
        meta = read_metadata(f)
        out[(meta["name"], meta["region"])] = load(f.read_bytes())["values"]
    return out


def merge(store, layout, ids: list[str], shards: list[Shard]) -> None:
    """Write what every shard of a pass wrote, each region once, and remove the shards' files."""
    registry = measures("depth")
    parts = [_written(shard_dir(store.state_dir, ids, s)) for s in shards]
    missing = [s.name for s, p, in zip(shards, parts) if not (shard_dir(store.state_dir, ids, s) / "done").is_file()]
    if missing or any(p.keys() != parts[0].keys() for p in parts):
        raise RuntimeError(f"shards {', '.join(missing) or '(some)'} of the pass did not finish; apply again")
    combined: dict[tuple[str, str], dict[str, list[np.ndarray]]] = {}
    for name, region in parts[0]:
        values = [p[(name, region)] for p in parts]
        if "/" in name:  # statistics of a measure over all samples
            kind, stat = name.split("/")
            combined.setdefault((kind, region), {})[stat] = values
            continue
        reg = _region(json.loads(region))
        dims = layout.vars[name].dims
        if SAMPLE not in dims:  # a value of the network (a Lyapunov k): every shard wrote the same
            if any(not np.array_equal(v, values[0], equal_nan=True) for v in values[1:]):
                raise RuntimeError(f"shards of the pass wrote different values of {name}; apply again")
            store.write(name, reg, values[0])
            continue
        axis = sum(1 for r in reg[: dims.index(SAMPLE)] if not isinstance(r, int))
        store.write(name, reg, np.concatenate(values, axis=axis))
    for (kind, region), stats in combined.items():
        for name, values in registry[kind].combine(stats).items():
            store.write(name, _region(json.loads(region)), values)
    remove_tree(location(store.state_dir) / "shards" / pass_key(ids))
