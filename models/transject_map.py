"""One TransJect layer iterated as a map: depth as time for a distance-preserving encoder.

Beyond the TransJect paper (Sec. 3, Theorem 2): a layer ``X -> ORF(MOE(IR(X)))`` (Eq. 7) with Sigma
fixed is injective and bi-Lipschitz, with ``(1 - a)^2 <= ||f(x) - f(y)|| / ||x - y|| <= (1 + a)^2``
per layer, ``a = alpha_l / L`` (``tests/models/test_transject.py``). Iterated, its local Lyapunov
exponent per step therefore lies in ``[2 ln(1 - a), 2 ln(1 + a)]``: the depth study's measures
(D(t), lambda(t), N_eff) apply as they do to ALBERT's shared layer.

``transject-layer:builtin`` builds a random-init encoder from ``params``; ``transject-layer:<dir>``
loads a trained one saved by the TransJect study (``config.json`` with ``variant`` and ``params``,
``model.safetensors``). Only the variants with one Sigma for every input (``random-transject``)
are maps of the state alone: the approximated Sigma of ``transject`` depends on each sequence's
X^(0), and the entropic variants draw u anew at every call. Initial states are the encoder's own
embeddings X^(0) of token ids drawn uniformly from its vocabulary (seeded).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict, Field
from safetensors.torch import load_file
from torch import Tensor
from torch.nn.utils import parametrize

from models.base import DynamicalMap, MapInputs
from models.transject import TransJect, TransJectConfig

PREFIX = "transject-layer:"
MAP_VARIANTS = ("random-transject",)


class TransJectMapParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    layer: int = Field(0, ge=0)
    """Which layer is iterated."""
    tokens: int = Field(16, ge=1)
    """Tokens per state (N_w)."""
    d_model: int = Field(64, ge=2)
    """Width of a random-init encoder (a trained one brings its own)."""
    n_layers: int = Field(6, ge=1)
    """L of a random-init encoder: the residual branches are scaled by alpha / L (paper: 6)."""
    n_experts: int = Field(4, ge=1)
    vocab_size: int = Field(1000, ge=1)
    alpha_init: float = Field(0.01, gt=0, lt=1)
    variant: Literal["random-transject"] = "random-transject"


def load_encoder(source: str, params: TransJectMapParams, seed: int) -> TransJect:
    """The encoder of ``source``: random-init (``builtin``) or a trained checkpoint directory."""
    where = source.removeprefix(PREFIX)
    if where == "builtin":
        torch.manual_seed(seed)
        return TransJect(TransJectConfig(vocab_size=params.vocab_size, n_classes=2, d_model=params.d_model,
                                         n_layers=params.n_layers, n_experts=params.n_experts,
                                         variant=params.variant, alpha_init=params.alpha_init))

    config = json.loads((Path(where) / "config.json").read_text())
    if config.get("variant") not in MAP_VARIANTS:
        raise ValueError(f"{where}: variant {config.get('variant')!r} is not a map of the state alone; "
                         f"iterate one of {MAP_VARIANTS}")
    model = TransJect(TransJectConfig(**{**config["params"], "variant": config["variant"]}))
    model.load_state_dict(load_file(str(Path(where) / "model.safetensors")))
    return model


def checkpoint_problem(source: str) -> str | None:
    where = source.removeprefix(PREFIX)
    if where == "builtin":
        return None
    path = Path(where)
    if not (path / "config.json").is_file() or not (path / "model.safetensors").is_file():
        return f"{path} holds no TransJect checkpoint (config.json and model.safetensors)"
    variant = json.loads((path / "config.json").read_text()).get("variant")
    if variant not in MAP_VARIANTS:
        return f"{path}: variant {variant!r} is not a map of the state alone; iterate one of {MAP_VARIANTS}"
    return None


def checkpoint_width(source: str, params: TransJectMapParams) -> int:
    where = source.removeprefix(PREFIX)
    if where == "builtin":
        return params.d_model
    return int(json.loads((Path(where) / "config.json").read_text())["params"].get("d_model", 512))


class TransJectLayerMap(DynamicalMap):
    """``x -> layer_l(x)`` of a TransJect encoder, its orthogonal weights materialised once."""

    params_model = TransJectMapParams

    def __init__(self, encoder: TransJect, params: TransJectMapParams, *, dtype=torch.float32, device="cpu"):
        super().__init__()
        if params.layer >= len(encoder.layers):
            raise ValueError(f"layer {params.layer} of an encoder with {len(encoder.layers)} layers")
        self.params = params
        encoder = encoder.to(device=device, dtype=dtype).reorthogonalize().eval()
        with torch.no_grad():
            sigma, _ = encoder.eigenvalues(None)
            layer = encoder.layers[params.layer]  # the encoder is this map's own: changed in place
            for module in layer.modules():  # the orthogonal matrices, computed once (not at every step)
                if parametrize.is_parametrized(module, "weight"):
                    parametrize.remove_parametrizations(module, "weight", leave_parametrized=True)
        self.layer = layer.requires_grad_(False)
        self.embed = encoder.embed
        self.vocab_size = encoder.config.vocab_size
        self.n_hidden = encoder.config.d_model
        self.register_buffer("sigma", sigma.detach())

    def initial_state(self, inputs: MapInputs) -> Tensor:
        ids = torch.randint(self.vocab_size, (inputs.samples, self.params.tokens), generator=inputs.generator)
        with torch.no_grad():
            return self.embed(ids.to(self.sigma.device))

    def step(self, x: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        return self.layer(x, self.sigma)
