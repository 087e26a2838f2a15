"""The store's shape for a spec: dimensions, coordinates and variables, with their conventions.

One place decides names, dims, dtypes, chunks and CF-style attributes (``long_name``, ``units``,
``description`` with the formula, ``reference``). Each measure's time axis is its own dimension
named after it (``deviation_step``, ``lyapunov_step``, ...), holding the step t of each kept value,
so a measure kept every 100 steps never shares an axis with one kept every step.

Chunking: one network per chunk (each task owns its network's chunks: never two writers in one
chunk), all samples in a chunk, and along time one *segment* (``checkpoint_every`` steps) per
chunk, so a segment's results are one region write aligned to chunk boundaries.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from runner.resolve import Network
from runner.spec import PCA, Attention, EffectiveDimension, Lyapunov, Spec, TokenDeviation, Trajectory, TransientChaos

PAPER = "Inoue et al. 2021, Transient chaos in BERT (arXiv:2106.03181)"


@dataclass(frozen=True)
class Coord:
    name: str
    dims: tuple[str, ...]
    values: np.ndarray
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Var:
    name: str
    measure: str
    dims: tuple[str, ...]
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype: str
    fill: Any
    attrs: dict[str, Any]

    def signature(self, coords: dict[str, Coord]) -> str:
        """Changes whenever an existing array could not hold this variable's new results."""
        h = hashlib.sha256(json.dumps([self.dims, self.shape, self.chunks, self.dtype], default=str).encode())
        for d in self.dims:
            if d in coords:
                h.update(np.ascontiguousarray(coords[d].values).tobytes())
        return h.hexdigest()[:16]


@dataclass(frozen=True)
class Layout:
    coords: dict[str, Coord]
    vars: dict[str, Var]
    segment: int
    """Steps per durable point; every kept stride divides it."""

    def measure_vars(self, measure: str) -> list[Var]:
        return [v for v in self.vars.values() if v.measure == measure]


def segment_length(spec: Spec) -> int:
    """Steps between durable points: ``checkpoint_every`` or about 1% of the run (>= 1000 steps)."""
    base = spec.stride_lcm()
    if spec.dynamics.checkpoint_every:  # a multiple of base (checked by the spec)
        return spec.dynamics.checkpoint_every
    target = min(spec.dynamics.steps, max(1000, spec.dynamics.steps // 100))
    return base * max(1, round(target / base))


def kept_steps(steps: int, every: int) -> np.ndarray:
    """t = 0, every, 2 every, ... <= steps."""
    return np.arange(0, steps + 1, every, dtype=np.int64)


def build_layout(spec: Spec, networks: list[Network], texts: list[str] | None = None,
                 origins: list[str] | None = None) -> Layout:
    S, T = spec.input.samples, spec.dynamics.steps
    L = segment_length(spec)
    coords: dict[str, Coord] = {}
    vars: dict[str, Var] = {}
    N = len(networks)

    def coord(name, values, dims=None, **attrs):
        coords[name] = Coord(name, dims or (name,), np.asarray(values), attrs)

    def var(name, measure, dims, dtype, fill, long_name, units, description, **extra):
        shape = tuple(_size(coords, d) for d in dims)
        chunks = tuple(_chunk(d, shape[i], L, measure_stride.get(d)) for i, d in enumerate(dims))
        attrs = {"long_name": long_name, "units": units, "description": description, "reference": PAPER, **extra}
        vars[name] = Var(name, measure, dims, shape, chunks, dtype, fill, attrs)

    measure_stride: dict[str, int] = {}
    coord("network", np.arange(N), long_name="network index")
    coord("model", np.array([n.model.name for n in networks], dtype=object), ("network",), long_name="model name")
    coord("replicate", np.array([n.replicate for n in networks]), ("network",), long_name="replicate")
    coord("network_label", np.array([n.label for n in networks], dtype=object), ("network",))
    coord("precision", np.array([n.precision for n in networks], dtype=object), ("network",),
          long_name="floating-point precision of the iteration")
    coord("sample", np.arange(S), long_name="input sample")
    if spec.text_models:
        coord("token", np.arange(spec.input.tokens), long_name="token position")
        coord("text", np.array(texts if texts is not None else [""] * S, dtype=object), ("sample",), long_name="input text")
        coord("origin", np.array(origins if origins is not None else [""] * S, dtype=object), ("sample",),
              long_name="where the text was drawn from")
        var("input_ids", "inputs", ("sample", "token"), "int64", -1, "token id", "1",
            "ids of the exactly-N_w-token input given to every text model (one tokenizer per experiment)")
    var("diverged_step", "*", ("network", "sample"), "int64", -1, "first non-finite step", "1",
        "first step t at which the state held NaN or Inf, or its D(t) overflowed (-1: never); later values of that sample are NaN")

    for m in spec.measure:
        if m.kind == "token_deviation":
            dim = _time(coord, measure_stride, "deviation_step", T, m.every)
            var("deviation", m.kind, ("network", "sample", dim), "float32", np.nan, "token deviation D(t)", "1",
                "D(t) = (1/N_w) sum_i ||x_t^i - mean_j x_t^j||^2 (Eq. 5)", threshold=m.threshold)
            var("sync_offset", m.kind, ("network", "sample"), "int64", -1, "synchronization offset", "1",
                "first step t with D(t) < threshold, exact at every step (Fig. 2B); -1: never", threshold=m.threshold)
        elif m.kind == "lyapunov":
            n_int = T // m.tau
            coord("lyapunov_step", np.arange(n_int, dtype=np.int64) * m.tau, long_name="interval start t", units="1")
            measure_stride["lyapunov_step"] = m.tau
            desc = "lambda(t) = ln(||y_{t+tau} - x_{t+tau}|| / k), y_t = x_t + k eps/||eps|| (Algorithm A1)"
            var("lyapunov", m.kind, ("network", "sample", "lyapunov_step"), "float32", np.nan,
                "local Lyapunov exponent lambda(t)", f"1/({m.tau} steps)", desc, k=m.k, tau=m.tau)
            var("lyapunov_per_step", m.kind, ("network", "sample", "lyapunov_step"), "float32", np.nan,
                "local Lyapunov exponent per step", "1/step", "lambda(t) / tau", k=m.k, tau=m.tau)
        elif m.kind == "effective_dimension":
            dim = _time(coord, measure_stride, "neff_step", T, m.every)
            var("effective_dimension", m.kind, ("network", dim), "float64", np.nan, "effective dimension N_eff(t)", "1",
                "N_eff = (sum_i s_i)^2 / sum_i s_i^2, s_i eigenvalues of the state covariance across samples (Eq. 6)")
        elif m.kind == "transient_chaos":
            var("chaos_length", m.kind, ("network", "sample"), "float64", np.nan, "transient chaos length", "step",
                "time after which lambda(t) stays negative to the end of the run; 0: never chaotic (Fig. 4D); "
                "NaN: the sample diverged (see diverged_step); a censored length (chaos_censored) is a lower bound")
            var("chaos_censored", m.kind, ("network", "sample"), "bool", False, "chaos length censored", "1",
                "true where lambda(t) was still positive in the last interval: the run ended before the transient "
                "did, so chaos_length is only a lower bound")
            var("chaos_mean_exponent", m.kind, ("network", "sample"), "float64", np.nan,
                "mean lambda(t) over the chaotic transient", "1/interval", "mean of lambda over intervals before chaos_length")
            var("fraction_never_chaotic", m.kind, ("network",), "float64", np.nan, "fraction of samples never chaotic",
                "1", "over the samples that did not diverge; paper: 38.5% for initial networks, 0% pre-trained")
            var("mean_chaotic_exponent", m.kind, ("network",), "float64", np.nan, "mean exponent of chaotic samples",
                "1/interval", "mean of chaos_mean_exponent over chaotic samples (paper: 9.54e-2 pre-trained, 6.41e-3 initial)")
        elif isinstance(m, Trajectory):
            dim = _time(coord, measure_stride, "trace_step", T, m.every)
            coord("trace_sample", np.array(m.samples))
            coord("trace_token", np.array(m.tokens))
            coord("trace_element", np.array(m.elements))
            var("trace", m.kind, ("network", "trace_sample", dim, "trace_token", "trace_element"), "float32", np.nan,
                "state element x_t^i[e]", "1", "selected elements of selected token vectors (Fig. 2A top)")
        elif isinstance(m, Attention):
            heads = max([n.n_heads for n in networks] + [1])
            dim = _time(coord, measure_stride, "attention_step", T, m.every)
            coord("attention_sample", np.array(m.samples))
            coord("head", np.arange(heads))
            coord("query", np.arange(spec.input.tokens))
            coord("key", np.arange(spec.input.tokens))
            var("attention", m.kind, ("network", "attention_sample", dim, "head", "query", "key"), "float32", np.nan,
                "attention probability", "1", "softmax(Q K^T / sqrt(d) + mask) of the shared layer at x_t (Fig. 2A bottom)")
        elif isinstance(m, PCA):
            stop = m.stop or T
            coord("pca_step", np.arange(m.start, stop + 1, m.every, dtype=np.int64), long_name="step t", units="1")
            measure_stride["pca_step"] = -1  # one chunk: written once at the end of the window
            coord("pca_sample", np.array(m.samples))
            coord("component", np.arange(m.components))
            var("pca_projection", m.kind, ("network", "pca_sample", "pca_step", "component"), "float32", np.nan,
                "principal component score", "1", "x_t projected on the top principal axes of the window (Fig. 4C)")
            var("pca_explained_variance", m.kind, ("network", "pca_sample", "component"), "float64", np.nan,
                "explained variance ratio", "1", "share of the window's variance along each principal axis")
    return Layout(coords, vars, L)


def _time(coord, strides: dict, name: str, steps: int, every: int) -> str:
    coord(name, kept_steps(steps, every), long_name="step t", units="1")
    strides[name] = every
    return name


def _size(coords: dict[str, Coord], dim: str) -> int:
    return len(coords[dim].values)


def _chunk(dim: str, size: int, segment: int, stride: int | None) -> int:
    if dim == "network":
        return 1
    if stride is None or stride < 0:
        return max(size, 1)
    return max(1, min(size, segment // stride))


# --------------------------------------------------------------------------- sizes, before anything exists


def available_memory() -> int:
    """Bytes of memory available to new allocations on this host (Linux's MemAvailable; the
    physical memory elsewhere)."""
    import os

    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Footprint:
    """Bytes a run needs, estimated from the spec and the networks' sizes without allocating anything."""

    store: dict[str, int]
    """Each variable of the store, uncompressed."""
    host: int
    """Host memory held at once: the coordinates plus one segment's results of one network (twice:
    device buffers and their host copy)."""
    state: int
    """Memory of the iterated batch (x and its perturbed twin), the PCA window and a reservoir's
    weights, on the device."""
    timed: frozenset[str] = frozenset()
    """The variables with a time axis (their size grows with the steps)."""

    @property
    def store_total(self) -> int:
        return sum(self.store.values())


def footprint(spec: Spec, networks: list[Network]) -> Footprint:
    """What :func:`build_layout` would allocate and a pass would hold, computed from sizes alone."""
    N, S, T = len(networks), spec.input.samples, spec.dynamics.steps
    L = segment_length(spec)
    tokens = spec.input.tokens
    heads = max([n.n_heads for n in networks] + [1])
    store: dict[str, int] = {}
    timed: set[str] = set()
    coords = 8 * (N + S)
    segment = 0

    def kept(every: int) -> int:
        return T // every + 1

    def add(name: str, per_network: int, time: int | None = None, seg: int | None = None) -> None:
        nonlocal segment
        store[name] = N * per_network * (time or 1)
        if time:
            timed.add(name)
            segment += per_network * (seg or 1)

    if spec.text_models:
        store["input_ids"] = S * tokens * 8
    add("diverged_step", S * 8)
    for m in spec.measure:
        if isinstance(m, TokenDeviation):
            coords += 8 * kept(m.every)
            add("deviation", S * 4, kept(m.every), L // m.every + 1)
            add("sync_offset", S * 8)
        elif isinstance(m, Lyapunov):
            coords += 8 * (T // m.tau)
            add("lyapunov", S * 4, T // m.tau, L // m.tau)
            add("lyapunov_per_step", S * 4, T // m.tau, L // m.tau)
        elif isinstance(m, EffectiveDimension):
            coords += 8 * kept(m.every)
            add("effective_dimension", 8, kept(m.every), L // m.every + 1)
        elif isinstance(m, TransientChaos):
            for name in ("chaos_length", "chaos_mean_exponent"):
                add(name, S * 8)
            add("chaos_censored", S)
            for name in ("fraction_never_chaotic", "mean_chaotic_exponent"):
                add(name, 8)
        elif isinstance(m, Trajectory):
            coords += 8 * kept(m.every)
            add("trace", len(m.samples) * len(m.tokens) * len(m.elements) * 4, kept(m.every), L // m.every + 1)
        elif isinstance(m, Attention):
            coords += 8 * kept(m.every)
            add("attention", len(m.samples) * heads * tokens * tokens * 4, kept(m.every), L // m.every + 1)
        elif isinstance(m, PCA):
            points = ((m.stop or T) - m.start) // m.every + 1
            coords += 8 * points
            timed.add("pca_projection")
            add("pca_projection", len(m.samples) * points * m.components * 4)
            add("pca_explained_variance", len(m.samples) * m.components * 8)
    twin = 2 if "lyapunov" in spec.measures() else 1
    state = 0
    for net in networks:
        itemsize = 8 if net.precision == "fp64" else 4
        per_sample = net.n_tokens * net.n_hidden * itemsize
        pca = next((m for m in spec.measure if isinstance(m, PCA)), None)
        window = 0 if pca is None else (((pca.stop or T) - pca.start) // pca.every + 1) * len(pca.samples) * per_sample
        weights = net.n_hidden ** 2 * (8 + 2 * itemsize) if net.model.source == "map:tanh" else 0  # W, drawn in fp64
        state = max(state, S * twin * per_sample + window + weights)
    return Footprint(store, coords + 2 * segment, state, frozenset(timed))
