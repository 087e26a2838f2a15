"""What the TransJect study checks at ``plan``, before anything is computed.

- Local files are opened and validated: a saved checkpoint's ``config.json``, ``model.safetensors``
  (its header: a truncated or foreign file fails here) and ``vocab.json``; local parquet, csv and
  jsonl data (readable, rows, the ``text`` and ``label`` columns, labels against ``n_classes``).
  A file that cannot be read is an unmet requirement (``apply`` exits 66); a column or a class
  count that does not fit the spec is a spec problem (65).
- Sizes, declared for the engine's footprint check (:mod:`runner.spec.footprint`): the memory of
  training a network (weights, gradients and Adam's two moments, and the layer outputs of one batch
  kept for the backward pass) and the disk of its epoch checkpoints, both lower bounds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rich.filesize import decimal
from safetensors import safe_open

from models.hub import ModelLoadError, load_tokenizer
from runner.data.files import LABELLED_BUILDERS, split_files
from runner.spec.footprint import Need
from runner.studies.transject.spec import BASELINES, TransJectSpec
from runner.studies.transject.models import params_of

FP32 = 4


def tokenizer_problem(source: str) -> ModelLoadError | None:
    """None when the hub tokenizer loads now (online, cached or a local directory); else why not."""
    try:
        load_tokenizer(source)
    except ModelLoadError as err:
        return err
    return None


# --------------------------------------------------------------------------- saved checkpoints


def checkpoint_problem(folder: Path) -> str | None:
    """Why the saved checkpoint in ``folder`` cannot be loaded (one line naming the file), or None.
    Reads the JSON files and the safetensors header only, never the weights."""
    from models.transject import TransJectConfig, TransformerConfig  # lazy: torch

    config = folder / "config.json"
    try:
        meta = json.loads(config.read_bytes())
    except OSError as err:
        return f"{config} cannot be read ({err.strerror or err})"
    except ValueError as err:  # UnicodeDecodeError included
        return f"{config} is not JSON ({type(err).__name__})"
    variant = meta.get("variant") if isinstance(meta, dict) else None
    params = meta.get("params") if isinstance(meta, dict) else None
    known = ("transject", "random-transject", "entropic-transject", "random-entropic-transject", *BASELINES)
    if variant not in known or not isinstance(params, dict):
        return (f"{config} is not a TransJect export: it needs {{\"variant\": one of {', '.join(known)}, "
                "\"params\": {...}}")
    try:
        if variant in BASELINES:
            TransformerConfig(**params, rezero=variant == "transformer-rezero")
        else:
            TransJectConfig(**params)
    except (TypeError, ValueError) as err:
        return f"{config}: params do not describe a {variant} ({err})"
    weights = folder / "model.safetensors"
    try:
        with safe_open(str(weights), "pt") as f:
            if not list(f.keys()):
                return f"{weights} holds no tensors"
    except Exception as err:  # noqa: BLE001 -- safetensors raises its own error type
        return f"{weights} is not a readable safetensors file ({str(err).splitlines()[0][:120]})"
    vocab = folder / "vocab.json"
    if vocab.is_file():
        try:
            tokens = json.loads(vocab.read_bytes())
        except ValueError as err:
            return f"{vocab} is not JSON ({type(err).__name__})"
        if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
            return f"{vocab} is not a list of tokens"
    return None


# --------------------------------------------------------------------------- local data


@dataclass
class LocalData:
    """What plan learned from a local source: a problem of the file (unmet) or of the spec, and the
    number of classes its labels hold."""

    unreadable: str | None = None
    problem: tuple[tuple, str] | None = None
    classes: int | None = None


def _columns(p: Path, label: str) -> dict[str, list]:
    """The columns of a local data file (pyarrow: parquet, csv, jsonl; json: an array of records).
    A parquet file's columns other than ``label`` are read as names and a row count only."""
    kind = LABELLED_BUILDERS[p.suffix.lower()]
    if kind == "parquet":
        import pyarrow.parquet as pq  # lazy: pyarrow

        f = pq.ParquetFile(p)
        rows = f.metadata.num_rows
        names = f.schema_arrow.names
        out = {n: [None] * rows for n in names if n != label}
        if label in names:
            out[label] = f.read(columns=[label]).column(label).to_pylist()
        return out
    if kind == "csv":
        import pyarrow.csv as pcsv  # lazy: pyarrow

        return pcsv.read_csv(p).to_pydict()
    if p.suffix.lower() == ".jsonl":
        import pyarrow.json as pjson  # lazy: pyarrow

        return pjson.read_json(p).to_pydict()
    rows = json.loads(p.read_bytes())
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ValueError("not a JSON array of records")
    names = list(dict.fromkeys(k for r in rows for k in r))
    return {k: [r.get(k) for r in rows] for k in names}


def _shown(p: Path, base: Path) -> Path:
    """``p`` as the spec names it: relative to the spec's folder when it lies there."""
    try:
        return p.relative_to(base) if p.is_absolute() and base.is_absolute() else p
    except ValueError:
        return p


def local_data(spec: TransJectSpec, base: Path) -> LocalData:
    """Open every file of a local ``[data] source`` and check it against the spec."""
    d = spec.data
    real = split_files(d.source, base, (d.train_split, d.test_split))
    files = [_shown(p, base) for p in real]
    labels: list = []
    for p, path in zip(files, real, strict=True):
        try:
            table = _columns(path, d.label)
        except Exception as err:  # noqa: BLE001 -- pyarrow, json and OS errors alike: the file is unreadable
            first = (str(err).strip().splitlines() or [type(err).__name__])[0][:160]
            return LocalData(unreadable=f"[data] source: {p} cannot be read as {LABELLED_BUILDERS[p.suffix.lower()]} "
                             f"({first})")
        rows = len(next(iter(table.values()), []))
        need = 1 if len(files) == 2 else 2
        if rows < need:
            return LocalData(unreadable=f"[data] source: {p} holds {rows} row(s); "
                             + ("each split needs one at least" if need == 1 else "a train and a test split need 2 at least"))
        for key, column in (("text", d.text), ("label", d.label)):
            if column not in table:
                return LocalData(problem=(("data", key), f"{p} has no column {column!r}; its columns: "
                                          f"{', '.join(table) or 'none'}"))
        missing = [i for i, v in enumerate(table[d.label]) if v is None]
        if missing:
            return LocalData(problem=(("data", "label"), f"{p}: row {missing[0] + 1} has no label "
                                      f"({len(missing)} row(s) without one)"))
        labels += table[d.label]
    if all(isinstance(v, int) and not isinstance(v, bool) for v in labels):
        if min(labels) < 0:
            return LocalData(problem=(("data", "label"), f"integer labels are classes 0, 1, ...; "
                                      f"{', '.join(map(str, files))} hold{'s' * (len(files) == 1)} {min(labels)}"))
        classes = max(labels) + 1
    else:  # other labels are numbered in sorted order (runner.studies.transject.data.classification)
        classes = len({str(v) for v in labels})
    if d.n_classes is not None and classes > d.n_classes:
        return LocalData(problem=(("data", "n_classes"), f"{d.n_classes} classes, but the labels of "
                                  f"{', '.join(map(str, files))} hold {classes}"), classes=classes)
    return LocalData(classes=classes)


# --------------------------------------------------------------------------- sizes


def n_parameters(variant: str, params: dict) -> int:
    """Trainable parameters of a network of :mod:`models.transject` from its config (nothing is built).

    TransJect: embedding V x d/2, U of the eigen-decomposition d x d (a vector Sigma of d for the
    random variants), per layer E experts' U_e, V_e (d x d each), the gate (E logits, or d + 1 for
    the input gate), W1, W2 with biases and alpha; baselines: embedding V x d, per layer attention
    (4 d^2 + 4 d), feed-forward (2 d d_ff + d_ff + d) and two LayerNorms (4 d; ReZero: one weight);
    both: the classifier d x C + C."""
    d, L, V, C = params["d_model"], params["n_layers"], params["vocab_size"], params["n_classes"]
    head = d * C + C
    if variant in BASELINES:
        ff = params["d_ff"]
        layer = 4 * d * d + 4 * d + 2 * d * ff + ff + d + (1 if variant == "transformer-rezero" else 4 * d)
        return V * d + L * layer + head
    E = params["n_experts"]
    gate = E if params.get("gate", "learned") == "learned" else d + 1
    layer = 2 * E * d * d + gate + 2 * (d * d + d) + 1
    eig = d if params.get("variant", variant).startswith("random") else d * d
    return V * (d // 2) + eig + L * layer + head


def training_nbytes(spec: TransJectSpec, variant: str, params: dict) -> dict[str, int]:
    """A lower bound of the memory training one network holds at once, in fp32: the weights, their
    gradients and Adam's two moments (4 x 4 bytes per parameter), and every layer's output on one
    batch, kept for the backward pass (batch x max_length x d x (L + 1))."""
    n = n_parameters(variant, params)
    tr, d = spec.training, spec.data
    return {"weights": 4 * FP32 * n,
            "activations": FP32 * tr.batch_size * d.max_length * params["d_model"] * (params["n_layers"] + 1),
            "parameters": n}


def needs(spec: TransJectSpec, classes: int | None) -> list[Need]:
    """What training each network holds on its device (lower bounds) and what its epoch checkpoints take
    on the store's disk, declared for the engine's check before anything is built."""
    d = spec.data
    fixed = d.implied("vocab_size")  # a generated source's whole vocabulary (ListOps)
    vocab = min(d.vocab_size, fixed) if fixed else 2  # at least <pad> and <unk>
    n_classes = d.n_classes or d.implied("n_classes") or classes or 2
    out = []
    for i, m in enumerate(spec.model):
        if m.checkpoint:
            continue
        params = params_of(m, vocab, n_classes, spec.pooling(m))
        size = training_nbytes(spec, m.variant, params)
        key = ("training", "batch_size") if size["activations"] > size["weights"] else ("model", i, "d_model")
        out.append(Need(key, size["weights"] + size["activations"], f"training [[model]] {m.name!r} needs",
                        bound="at least", device=spec.training.device,
                        detail=f" ({size['parameters']:,} parameters with their gradients and Adam's moments "
                        f"{decimal(size['weights'])}, one batch's layer outputs {decimal(size['activations'])})"))
        out.append(Need(("training", "epochs"), len(spec.seeds(m)) * (spec.training.epochs + 1) * FP32 * size["parameters"],
                        "the epoch checkpoints need", on="disk", bound="at least",
                        detail=f" ({spec.training.epochs + 1} per network, up to [[model]] {m.name!r})"))
    return out
