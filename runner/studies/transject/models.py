"""Networks of a spec entry (the TransJect family of :mod:`models.registry`) and saved checkpoints.

A saved checkpoint is a directory (local, or a hub model repository) with ``config.json``
(``{"variant": ..., "params": {...}}``: the architecture and its config fields), ``model.safetensors``
(the state dict) and, optionally, ``vocab.json`` (the token list; ids are positions).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from models.hub import ModelLoadError, hub_off
from models.registry import family_for
from models.source import Source
from runner.studies.transject.spec import BASELINES, ModelSpec

if TYPE_CHECKING:
    import torch

TRANSJECT_FIELDS = ("d_model", "n_layers", "n_experts", "alpha_init")
BASELINE_FIELDS = ("d_model", "n_layers", "n_heads", "d_ff", "dropout")


def params_of(m: ModelSpec, vocab_size: int, n_classes: int, pooling: str) -> dict:
    """The config of :mod:`models.transject` for a spec entry."""
    fields = BASELINE_FIELDS if m.variant in BASELINES else TRANSJECT_FIELDS
    out = {k: getattr(m, k) for k in fields}
    out.update(vocab_size=vocab_size, n_classes=n_classes, pooling=pooling)
    if m.variant not in BASELINES:
        out["variant"] = m.variant
        if m.gate != "learned":  # absent by default, so earlier task ids and exports stay as they were
            out["gate"] = m.gate
    return out


def source_of(variant: str) -> str:
    """The model family's source of a variant (:mod:`models.registry`)."""
    return f"builtin:{variant}" if variant in BASELINES else "builtin:transject"


def build(variant: str, params: dict, seed: int, device="cpu") -> torch.nn.Module:
    return family_for(source_of(variant)).build(source_of(variant), params=params, seed=seed, device=device)


def n_layers(params: dict) -> int:
    return int(params["n_layers"])


def vocab_size(params: dict) -> int:
    return int(params["vocab_size"])


def n_experts(variant: str, params: dict) -> int:
    return int(params["n_heads"] if variant in BASELINES else params["n_experts"])


def resolve_checkpoint(source: str, base: Path) -> Path:
    """The directory of a saved checkpoint: a local directory (beside the spec first), else a hub
    model repository (downloaded, or from the cache when the hub is off); raises
    :class:`models.hub.ModelLoadError` naming it."""
    source = Source(source)
    raw = source.rest
    for p in (base / raw, Path(raw).expanduser()):
        if p.is_dir():
            if not (p / "config.json").is_file() or not (p / "model.safetensors").is_file():
                raise ModelLoadError(f"checkpoint {source!r}: {p} lacks config.json or model.safetensors")
            return p
    if source.explicit_path or raw.startswith((".", "/", "~")) or raw.count("/") > 1:
        raise ModelLoadError(f"checkpoint {source!r}: no such directory")
    from huggingface_hub import snapshot_download  # lazy: huggingface_hub

    try:
        return Path(snapshot_download(raw, allow_patterns=["config.json", "model.safetensors", "vocab.json"],
                                      local_files_only=hub_off()))
    except Exception as exc:  # noqa: BLE001
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        raise ModelLoadError(f"checkpoint {source!r}: the hub model cannot be loaded ({type(exc).__name__}: {first}); "
                             f"run `hf download {raw} --local-dir DIR` on a machine with network and set "
                             "checkpoint = \"DIR\"") from None


def read_checkpoint(dir: Path) -> tuple[str, dict, list[str] | None]:
    config = json.loads((dir / "config.json").read_text())
    vocab = json.loads((dir / "vocab.json").read_text()) if (dir / "vocab.json").is_file() else None
    return config["variant"], config["params"], vocab


def load_checkpoint_model(dir: Path, device) -> torch.nn.Module:
    from safetensors.torch import load_file  # lazy: torch

    variant, params, _ = read_checkpoint(dir)
    model = build(variant, params, 0, device)
    model.load_state_dict(load_file(str(dir / "model.safetensors"), device=str(device)))
    return model.eval()
