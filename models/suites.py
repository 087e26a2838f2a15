"""Published checkpoint series as training time: Pythia, MultiBERTs, or any local series.

A *series* is one model saved at several training steps: revisions of a hub repository (Pythia's
``step0`` ... ``step143000``) or subfolders of a local directory laid out the same way
(``<dir>/step1000/config.json``). :func:`parse_revisions` reads the spec's revision pattern
(``"step{0..143000:1000}"`` or an explicit list), :func:`local_series` lists a directory's
checkpoints, and :func:`load_checkpoint` loads one through transformers' Auto classes (the hub's
cache, safetensors only, remote code only when asked for).

An :class:`Adapter` names the layers of a transformers family (GPT-NeoX, BERT, GPT-2, Llama, ...):
adding a family is one entry in :data:`ADAPTERS`. :func:`capture_layers` records every layer's
output with forward hooks in one batched forward pass.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from models.hub import ModelLoadError, hf_load

#: ``step{0..143000:1000}``: a prefix, first..last (inclusive) and the stride, and a suffix.
_RANGE = re.compile(r"^(?P<pre>[^{}]*)\{(?P<lo>\d+)\.\.(?P<hi>\d+)(?::(?P<by>\d+))?\}(?P<post>[^{}]*)$")
_STEP = re.compile(r"(\d+)(?!.*\d)")


def parse_revisions(revisions: str | list[str]) -> list[str]:
    """The revisions a spec names: an explicit list, one revision, or a range pattern
    ``"step{0..143000:1000}"`` (first and last included, stride 1 when omitted)."""
    if isinstance(revisions, list):
        if not revisions or len(set(revisions)) != len(revisions):
            raise ValueError("revisions: give a non-empty list without repeats")
        return list(revisions)
    m = _RANGE.match(revisions)
    if m is None:
        if "{" in revisions or "}" in revisions:
            raise ValueError(f"revisions {revisions!r}: write a range as 'step{{FIRST..LAST:STRIDE}}'")
        return [revisions]
    lo, hi, by = int(m["lo"]), int(m["hi"]), int(m["by"] or 1)
    if hi < lo or by < 1:
        raise ValueError(f"revisions {revisions!r}: the range must run upwards with a positive stride")
    return [f"{m['pre']}{n}{m['post']}" for n in range(lo, hi + 1, by)]


def step_of(revision: str) -> int:
    """The training step a revision names (its last number: ``step1000`` -> 1000)."""
    m = _STEP.search(revision)
    if m is None:
        raise ValueError(f"revision {revision!r} names no step (expected e.g. 'step1000')")
    return int(m.group(1))


@dataclass(frozen=True)
class Checkpoint:
    source: str
    """Hub id or local directory of the series."""
    revision: str
    step: int
    local: bool

    @property
    def location(self) -> str:
        """What transformers loads: a subfolder of a local series, else the hub id (with ``revision``)."""
        return str(Path(self.source) / self.revision) if self.local else self.source


def local_series(directory: str | Path, revisions: str | list[str] | None = None) -> list[Checkpoint]:
    """The checkpoints of a local series, by step: every subfolder with a ``config.json`` whose
    name carries a step, or the named ``revisions``; raises :class:`ModelLoadError` naming a
    missing one."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ModelLoadError(f"{directory}: no such checkpoint directory")
    if revisions is None:
        names = [p.name for p in directory.iterdir() if (p / "config.json").is_file() and _STEP.search(p.name)]
        if not names:
            raise ModelLoadError(f"{directory}: no checkpoint folders (e.g. step1000/config.json)")
    else:
        names = parse_revisions(revisions)
        missing = [n for n in names if not (directory / n / "config.json").is_file()]
        if missing:
            raise ModelLoadError(f"{directory}: no checkpoint for revision(s) {', '.join(missing[:5])}"
                                 + (f" (+{len(missing) - 5} more)" if len(missing) > 5 else ""))
    return sorted((Checkpoint(str(directory), n, step_of(n), True) for n in names), key=lambda c: c.step)


def hub_series(repo: str, revisions: str | list[str]) -> list[Checkpoint]:
    """The checkpoints of a hub repository at the named revisions (nothing is fetched here)."""
    return sorted((Checkpoint(repo, n, step_of(n), False) for n in parse_revisions(revisions)), key=lambda c: c.step)


def load_checkpoint(ckpt: Checkpoint, *, trust_remote_code: bool = False, dtype: torch.dtype | None = None,
                    device: str | torch.device = "cpu") -> nn.Module:
    """The model at one checkpoint, in eval mode (``AutoModel``: the encoder or decoder without a head)."""
    from transformers import AutoModel

    model = hf_load(AutoModel.from_pretrained, ckpt.location, f"checkpoint {ckpt.revision}",
                    revision=None if ckpt.local else ckpt.revision, trust_remote_code=trust_remote_code,
                    use_safetensors=True, **({"dtype": dtype} if dtype is not None else {}))
    return model.to(device).eval()


# --------------------------------------------------------------------------- layers


@dataclass(frozen=True)
class Adapter:
    """Where a family keeps its layers: the embedding module and the list of blocks (attribute paths)."""

    model_types: tuple[str, ...]
    embeddings: str
    blocks: str

    def layers(self, model: nn.Module) -> dict[str, nn.Module]:
        """``{"embedding": ..., "layer1": ..., ...}``: modules whose outputs are the layer activations."""
        blocks = _attr(model, self.blocks)
        return {"embedding": _attr(model, self.embeddings), **{f"layer{i + 1}": b for i, b in enumerate(blocks)}}


#: One entry per family (``config.model_type``); the paths are those of ``AutoModel`` (no head).
ADAPTERS: list[Adapter] = [
    Adapter(("gpt_neox",), "embed_in", "layers"),                # Pythia
    Adapter(("bert",), "embeddings", "encoder.layer"),           # BERT, MultiBERTs
    Adapter(("gpt2",), "wte", "h"),                              # GPT-2 (token embeddings; positions are added after)
    Adapter(("llama", "mistral", "qwen2"), "embed_tokens", "layers"),
]


def adapter_for(model: nn.Module) -> Adapter:
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    found = next((a for a in ADAPTERS if model_type in a.model_types), None)
    if found is None:
        known = sorted(t for a in ADAPTERS for t in a.model_types)
        raise ModelLoadError(f"no layer adapter for model type {model_type!r}; known: {', '.join(known)} "
                             "(add one to models.suites.ADAPTERS)")
    return found


def _attr(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


@contextmanager
def _hooks(modules: dict[str, nn.Module], out: dict[str, Tensor]) -> Iterator[None]:
    def keep(name: str):
        def hook(module, args, output):
            out[name] = output[0] if isinstance(output, tuple) else output
        return hook

    handles = [m.register_forward_hook(keep(name)) for name, m in modules.items()]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def capture_layers(model: nn.Module, input_ids: Tensor, attention_mask: Tensor | None = None,
                   layers: list[str] | None = None) -> dict[str, Tensor]:
    """Each named layer's output ``(batch, seq, hidden)`` for one batch, from forward hooks (one
    forward pass, no gradients); ``layers`` picks some (default: all, ``embedding`` first)."""
    modules = adapter_for(model).layers(model)
    if layers is not None:
        unknown = sorted(set(layers) - set(modules))
        if unknown:
            raise ValueError(f"no layer {', '.join(unknown)}; this model has {', '.join(modules)}")
        modules = {k: modules[k] for k in layers}
    out: dict[str, Tensor] = {}
    with torch.no_grad(), _hooks(modules, out):
        model(input_ids=input_ids, attention_mask=attention_mask)
    return {k: out[k] for k in modules}
