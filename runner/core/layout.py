"""The shape of a store: dimensions, coordinates and variables with their conventions.

Every study builds its :class:`Layout` with a :class:`LayoutBuilder` from the variables its
measures declare (:class:`runner.plugin.measures.Variable`); the engine's :mod:`runner.storage.store` creates
the arrays from it. Conventions, for every study:

- ``network`` is an index of string labels (``ds.sel(network="pretrained")``), with the ``model``
  and ``replicate`` coordinates;
- every variable and coordinate has a ``long_name``; every numeric variable ``units`` that UDUNITS
  parses, none on strings, booleans and flags: a count (of steps, epochs, tokens) and a quantity in
  nats are dimensionless, ``"1"``, and ``long_name`` says what is counted or per what ("(steps)",
  "per step", "(nats per token)"); the runner attribute of a coordinate that counts steps or epochs
  says so (:func:`counts`, read by :func:`counted`) for readers that look for time axes; a variable
  has ``description`` (its formula), ``reference`` (its own citation, if any) and ACDD's
  ``coverage_content_type`` (``modelResult``; ``coordinate`` on coordinates). CF has no
  ``standard_name`` for these quantities: none is given;
- "never" and "not computed" are NaN, never a sentinel number; a categorical outcome is an int8
  variable with CF ``flag_values``/``flag_meanings`` (:func:`flags`);
- a chunk has exactly one writing task: one network per chunk, and along a time axis one
  *segment* of the run;
- coordinates are lazy: their sizes are known without allocating them, so a run that would not
  fit is refused before anything is allocated (:meth:`Layout.nbytes`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np



#: The one attribute, on the root and on each variable, where the runner keeps what it needs (JSON
#: text: the root's store id and provenance; a variable's layout signature, measure and the hints
#: ``show`` and the monitor follow), out of the way of the attributes a user reads.
INTERNAL = "runner"


def internal(attrs: Mapping[str, Any] | None) -> dict[str, Any]:
    """The runner's own entries of a root's or a variable's attributes (``{}`` when there are none)."""
    raw = (attrs or {}).get(INTERNAL)
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def with_internal(attrs: Mapping[str, Any], **entries: Any) -> dict[str, Any]:
    """``attrs`` with ``entries`` added to its runner attribute (stored as JSON text)."""
    merged = {**internal(attrs), **entries}
    return {**attrs, INTERNAL: json.dumps(merged)}


def flags(*meanings: str) -> dict[str, Any]:
    """CF attributes of a categorical outcome stored as int8 codes 0, 1, ... named by ``meanings``
    (``flag_values``/``flag_meanings``); the fill, -1, means not written yet (xarray reads it as NaN).
    zarr keeps attributes as JSON, so ``flag_values`` is a list of ints there; a netCDF copy gives it
    the variable's own type (:func:`runner.read.netcdf.for_netcdf`)."""
    return {"flag_values": list(range(len(meanings))), "flag_meanings": " ".join(meanings), "_FillValue": -1}


#: What a coordinate counts, by the ``units`` that stores written before their units were UDUNITS
#: units gave it (:func:`counted` reads those stores too).
_COUNTED_UNITS = {"steps": "steps", "epochs": "epochs"}


def counts(what: str) -> dict[str, Any]:
    """The attributes of a coordinate that counts ``what`` (``"steps"``, ``"epochs"``): units ``"1"``
    (a count is dimensionless in UDUNITS) and, in its runner attribute, what it counts, so that
    readers find the time axes (:func:`counted`). Its ``long_name`` says it too, for people."""
    return {"units": "1", INTERNAL + ".counts": what}


def counted(attrs: Mapping[str, Any] | None) -> str | None:
    """What a coordinate with attributes ``attrs`` counts (``"steps"``, ``"epochs"``), or None: its
    runner attribute's ``counts`` (:func:`counts`), or the units of a store written before."""
    found = internal(attrs).get("counts")
    return found if isinstance(found, str) else _COUNTED_UNITS.get(str((attrs or {}).get("units")))


def _with_runner_entries(attrs: dict[str, Any]) -> dict[str, Any]:
    """``attrs`` with its ``runner.*`` keys moved into the runner attribute."""
    prefix = INTERNAL + "."
    runner = {k.removeprefix(prefix): attrs.pop(k) for k in [k for k in attrs if k.startswith(prefix)]}
    return with_internal(attrs, **runner) if runner else attrs


def _coordinate_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    """A coordinate's attributes: ACDD's ``coverage_content_type`` is ``coordinate`` unless given."""
    return _with_runner_entries({**attrs, "coverage_content_type": attrs.get("coverage_content_type", "coordinate")})


def never_as_nan(steps) -> np.ndarray:
    """Step counts as stores keep them: float64, with "never" (a negative count) as NaN."""
    steps = np.asarray(steps.cpu() if hasattr(steps, "cpu") else steps)
    return np.where(steps < 0, np.nan, steps.astype(np.float64))


class Coord:
    """A coordinate: its values are made when first needed (``size`` is known before)."""

    def __init__(self, name: str, dims: tuple[str, ...], values: np.ndarray | Callable[[], np.ndarray], size: int,
                 attrs: dict[str, Any] | None = None):
        self.name, self.dims, self.size, self.attrs = name, dims, size, attrs or {}
        self._values = values

    @property
    def values(self) -> np.ndarray:
        if callable(self._values):
            self._values = np.asarray(self._values())
        return self._values

    @property
    def nbytes(self) -> int:
        return self.size * 8 if callable(self._values) else max(self.values.nbytes, self.size * 8)

    def digest(self) -> bytes:
        """The values as bytes (strings by value: object arrays' own bytes are pointers)."""
        v = self.values
        return "\x00".join(map(str, v.ravel())).encode() if v.dtype == object else np.ascontiguousarray(v).tobytes()


@dataclass(frozen=True)
class Var:
    name: str
    measure: str
    """The measure (task kind) whose tasks write it; ``"*"`` for a variable every task writes."""
    dims: tuple[str, ...]
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype: Any
    fill: Any
    attrs: dict[str, Any]

    @property
    def itemsize(self) -> int:
        return 8 if self.dtype is str else np.dtype(self.dtype).itemsize

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=object)) * self.itemsize

    @property
    def chunk_nbytes(self) -> int:
        return int(np.prod(self.chunks, dtype=object)) * self.itemsize

    def signature(self, coords: dict[str, Coord]) -> str:
        """Changes whenever an existing array could not hold this variable's new results."""
        h = hashlib.sha256(json.dumps([self.dims, self.shape, self.chunks, str(self.dtype)]).encode())
        for d in self.dims:
            if d in coords:
                h.update(coords[d].digest())
        return h.hexdigest()[:16]


@dataclass(frozen=True)
class Layout:
    coords: dict[str, Coord]
    vars: dict[str, Var]
    segment: int
    """Steps (or checkpoints) per durable point; every kept stride divides it."""
    timed: frozenset[str] = frozenset()
    """Variables with a time axis: one chunk per segment along it."""

    def nbytes(self) -> dict[str, int]:
        """Bytes of each variable, uncompressed (computed from sizes: nothing is allocated)."""
        return {name: v.nbytes for name, v in self.vars.items()}

    def host_nbytes(self) -> int:
        """Host memory a run holds at once: the coordinates, and one segment's results of one
        network (twice: device buffers and their host copy)."""
        return sum(c.nbytes for c in self.coords.values()) + 2 * sum(
            self.vars[n].chunk_nbytes for n in self.timed)


@dataclass
class LayoutBuilder:
    """Collects coordinates and variables; studies and measures call :meth:`coord`, :meth:`axis`
    and :meth:`var`."""

    segment: int = 1
    reference: str = ""
    unit: frozenset[str] = frozenset({"network"})
    """Dimensions chunked one entry at a time (each entry has its own writing task)."""
    coords: dict[str, Coord] = field(default_factory=dict)
    vars: dict[str, Var] = field(default_factory=dict)
    strides: dict[str, int] = field(default_factory=dict)
    timed: set[str] = field(default_factory=set)

    @contextlib.contextmanager
    def citing(self, reference: str):
        """Variables declared inside cite ``reference`` by default (a measure's own citation)."""
        before, self.reference = self.reference, reference
        try:
            yield self
        finally:
            self.reference = before

    def coord(self, name: str, values, dims: tuple[str, ...] | None = None, **attrs) -> str:
        if isinstance(values, np.ndarray):
            array = values
        else:
            values = list(values)
            array = np.asarray(values, dtype=object if values and isinstance(values[0], str) else None)
        self.coords[name] = Coord(name, dims or (name,), array, len(array), _coordinate_attrs(attrs))
        return name

    def index(self, name: str, size: int, dims: tuple[str, ...] | None = None, value=None, **attrs) -> str:
        """A coordinate 0..size-1 (or ``size`` copies of ``value``), made only when first needed."""
        make = (lambda: np.arange(size)) if value is None else (lambda: np.full(size, value, dtype=object))
        self.coords[name] = Coord(name, dims or (name,), make, size, _coordinate_attrs(attrs))
        return name

    def axis(self, name: str, start: int, stop: int, every: int, *, chunked: bool = True, **attrs) -> str:
        """A time axis holding the step t of each kept value, start, start + every, ... <= stop.
        ``chunked``: one chunk per segment along it (else one chunk: written once, at the end)."""
        size = max(0, (stop - start) // every + 1)
        attrs = _coordinate_attrs({"long_name": "step t", **counts("steps"), **attrs})
        self.coords[name] = Coord(name, (name,), lambda: np.arange(start, stop + 1, every, dtype=np.int64), size,
                                  attrs)
        self.strides[name] = every if chunked else -1
        return name

    def var(self, name: str, measure: str, dims: tuple[str, ...], dtype, fill, long_name: str, units: str | None,
            description: str, reference: str | None = None, **extra) -> None:
        """Declare a variable. ``units`` follows the store's conventions (module docstring: a UDUNITS
        unit, ``"1"`` for counts and nats) and is left out for strings and booleans; ``reference``
        defaults to the builder's; ``coverage_content_type`` (ACDD) to ``modelResult``; the hints of
        :func:`runner.plugin.measures.hints` (``runner.*`` entries) become the variable's runner attribute."""
        shape = tuple(self.coords[d].size for d in dims)
        chunks = tuple(self._chunk(d, n) for d, n in zip(dims, shape))
        reference = self.reference if reference is None else reference
        textual = dtype is str or np.dtype(dtype).kind in "bOUS"
        attrs = {"long_name": long_name, **({} if textual or units is None else {"units": units}),
                 "description": description, **({"reference": reference} if reference else {}),
                 "coverage_content_type": "modelResult"}
        attrs = _with_runner_entries({**attrs, **extra})
        self.vars[name] = Var(name, measure, dims, shape, chunks, dtype, fill, attrs)
        if any(self.strides.get(d, -1) > 0 for d in dims):
            self.timed.add(name)

    def _chunk(self, dim: str, size: int) -> int:
        if dim in self.unit:
            return 1
        stride = self.strides.get(dim)
        if stride is None or stride < 0:
            return max(size, 1)
        return max(1, min(size, self.segment // stride))

    def build(self) -> Layout:
        return Layout(dict(self.coords), dict(self.vars), self.segment, frozenset(self.timed))


def network_coords(b: LayoutBuilder, labels: list[str], models: list[str], replicates: list[int]) -> None:
    """The ``network`` index of string labels, with ``model`` and ``replicate`` (every study)."""
    b.coord("network", labels, long_name="network")
    b.coord("model", models, ("network",), long_name="model name")
    b.coord("replicate", np.asarray(replicates, dtype=np.int64), ("network",), long_name="replicate")


def available_memory() -> int:
    """Bytes of memory available to new allocations on this host (Linux's MemAvailable; the
    physical memory elsewhere)."""
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
