"""ALBERT as a dynamical map (Inoue et al. 2021, Sec. I.B, Eqs. 1-4).

ALBERT shares one Transformer layer across depth, so the encoder is the map
``x_{t+1} = f(x_t)`` iterated from ``x_0 = u(s)``:

- ``u(s)``: the token embeddings of the sentence (word + position + token type 0, LayerNorm),
  projected to the hidden size by ``encoder.embedding_hidden_mapping_in``;
- ``f``: the shared layer ``encoder.albert_layer_groups[0].albert_layers[0]``.

Iterating ``f`` L times reproduces ``AlbertModel(...).last_hidden_state`` of an L-layer model.

Two implementations of ``f``:

- ``"transformers"`` calls the Hugging Face ``AlbertLayer`` itself with the mask built by
  transformers' own ``create_bidirectional_mask`` -- bit-for-bit what ``AlbertModel`` does;
- ``"fused"`` (default) copies the same weights into a lean layer: one Q/K/V GEMM,
  ``scaled_dot_product_attention``, and a one-kernel activation (``F.gelu(approximate="tanh")``
  for ``gelu_new``, which agrees with HF's 8-kernel ``NewGELUActivation`` to rounding, not
  bit-for-bit). See ``notes/performance.md`` §1.3 and §5.

transformers is imported lazily (it takes seconds), so ``import models`` stays light.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .base import DynamicalMap, MapInputs
from .hub import ModelLoadError, hf_load
from .init import TruncatedNormalInit, apply_truncated_normal

if TYPE_CHECKING:  # pragma: no cover
    from transformers import AlbertConfig, AlbertModel

Implementation = Literal["transformers", "fused"]
IMPLEMENTATIONS: tuple[str, ...] = ("transformers", "fused")

#: activations that ``F.gelu(x, approximate="tanh")`` computes in one kernel.
_TANH_GELUS = frozenset({"gelu_new", "gelu_pytorch_tanh", "gelu_fast"})




# --------------------------------------------------------------------------------------------
# config checks
# --------------------------------------------------------------------------------------------


def check_shared_layer(config: Any) -> None:
    """Raise ``ValueError`` unless the config shares one layer across depth."""
    groups = getattr(config, "num_hidden_groups", 1)
    inner = getattr(config, "inner_group_num", 1)
    if groups != 1 or inner != 1:
        raise ValueError(
            "ALBERT can be iterated as one map only when all layers share one set of weights; this config "
            f"has num_hidden_groups={groups} and inner_group_num={inner} (both must be 1)"
        )
    if config.hidden_size % config.num_attention_heads != 0:
        raise ValueError(
            f"hidden_size={config.hidden_size} is not a multiple of num_attention_heads={config.num_attention_heads}"
        )


# --------------------------------------------------------------------------------------------
# the lean layer
# --------------------------------------------------------------------------------------------


def _activation(name: str) -> Callable[[Tensor], Tensor]:
    if name in _TANH_GELUS:
        return lambda x: F.gelu(x, approximate="tanh")
    if name == "gelu":
        return F.gelu
    if name == "relu":
        return F.relu
    from transformers.activations import ACT2FN  # lazy: transformers

    return ACT2FN[name]


def _copy_layer_norm(src: nn.LayerNorm) -> nn.LayerNorm:
    dst = nn.LayerNorm(src.normalized_shape, eps=src.eps, elementwise_affine=True,
                       device=src.weight.device, dtype=src.weight.dtype)
    with torch.no_grad():
        dst.weight.copy_(src.weight)
        dst.bias.copy_(src.bias)
    return dst


def _copy_linear(src: nn.Linear) -> nn.Linear:
    # skip_init: no random draw (which would move the global RNG) for weights we overwrite anyway
    dst = nn.utils.skip_init(nn.Linear, src.in_features, src.out_features, bias=src.bias is not None,
                             device=src.weight.device, dtype=src.weight.dtype)
    with torch.no_grad():
        dst.weight.copy_(src.weight)
        if src.bias is not None:
            dst.bias.copy_(src.bias)
    return dst


class FusedAlbertLayer(nn.Module):
    """The ALBERT layer with the weights of an HF ``AlbertLayer``, written lean.

    Same order as the HF layer (post-LayerNorm)::

        a = LN_attn(x + Dense(Attention(x)))
        y = LN_full(a + FFN_out(act(FFN(a))))
    """

    def __init__(self, hf_layer: nn.Module, hidden_act: str):
        super().__init__()
        att = hf_layer.attention
        self.n_heads = int(att.num_attention_heads)
        self.d_head = int(att.attention_head_size)
        self.scale = float(att.scaling)
        hidden = att.query.in_features
        w = torch.cat([att.query.weight, att.key.weight, att.value.weight], dim=0)
        b = torch.cat([att.query.bias, att.key.bias, att.value.bias], dim=0)
        self.qkv = nn.utils.skip_init(nn.Linear, hidden, w.shape[0], device=w.device, dtype=w.dtype)
        with torch.no_grad():
            self.qkv.weight.copy_(w)
            self.qkv.bias.copy_(b)
        self.dense = _copy_linear(att.dense)
        self.attention_norm = _copy_layer_norm(att.LayerNorm)
        self.ffn = _copy_linear(hf_layer.ffn)
        self.ffn_output = _copy_linear(hf_layer.ffn_output)
        self.full_norm = _copy_layer_norm(hf_layer.full_layer_layer_norm)
        self.hidden_act = hidden_act
        self._act = _activation(hidden_act)

    def qkv_heads(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Q, K, V as ``(batch, heads, n_tokens, d_head)``."""
        b, n, _ = x.shape
        qkv = self.qkv(x).view(b, n, 3, self.n_heads, self.d_head).permute(2, 0, 3, 1, 4)
        return qkv[0], qkv[1], qkv[2]

    def forward(self, x: Tensor, additive_mask: Tensor | None = None) -> Tensor:
        b, n, h = x.shape
        if n == 1 and additive_mask is None:
            # one token attends to itself alone: softmax over one key is 1, the context is V (a synchronised
            # sample iterated as one token, runner/studies/depth/reduce.py), so Q and K are not computed
            ctx = F.linear(x, self.qkv.weight[2 * h :], self.qkv.bias[2 * h :])
        else:
            q, k, v = self.qkv_heads(x)
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=additive_mask, scale=self.scale)
            ctx = ctx.transpose(1, 2).reshape(b, n, h)
        a = self.attention_norm(x + self.dense(ctx))
        y = self.ffn_output(self._act(self.ffn(a)))
        return self.full_norm(y + a)


# --------------------------------------------------------------------------------------------
# the map
# --------------------------------------------------------------------------------------------


def _exclude_mask_from_compilation() -> None:
    """Keep ``AlbertMap._layer_mask`` out of ``torch.compile``: a compiled step guarded on its cache would
    recompile once the cache is filled. Done when the first map is built, not as a decorator: the
    decorator imports ``torch._dynamo`` (0.6 s) in every command that imports this module."""
    if not AlbertMap._mask_excluded:
        AlbertMap._layer_mask = torch.compiler.disable(AlbertMap._layer_mask)
        AlbertMap._mask_excluded = True


class AlbertMap(DynamicalMap):
    """ALBERT's shared layer as a dynamical map on ``(batch, n_tokens, hidden_size)`` states."""

    needs_tokens = True
    token_equivariant = True  # no position inside the layer, no mask for a fully attended sample
    _mask_excluded: ClassVar[bool] = False

    def __init__(self, model: AlbertModel, implementation: Implementation = "fused"):
        super().__init__()
        if implementation not in IMPLEMENTATIONS:
            raise ValueError(f"implementation must be one of {IMPLEMENTATIONS}, got {implementation!r}")
        config = model.config
        check_shared_layer(config)
        self.config = config
        self.implementation: Implementation = implementation
        self.n_hidden = int(config.hidden_size)
        self.n_heads = int(config.num_attention_heads)
        self.d_head = self.n_hidden // self.n_heads
        self.embeddings = model.embeddings
        self.embedding_hidden_mapping_in = model.encoder.embedding_hidden_mapping_in
        hf_layer = model.encoder.albert_layer_groups[0].albert_layers[0]
        if implementation == "transformers":
            self.layer: nn.Module = hf_layer
        else:
            self.layer = FusedAlbertLayer(hf_layer, config.hidden_act)
        # one-entry cache: the runner passes the same mask tensor at every step
        self._mask_cache: tuple[Any, ...] | None = None
        _exclude_mask_from_compilation()

    # -- masks ---------------------------------------------------------------------------------

    def _additive_mask(self, attention_mask: Tensor | None, x: Tensor) -> Tensor | None:
        """``(batch, 1, 1, n)``: 0 where a key is attended, ``finfo(dtype).min`` where masked."""
        if attention_mask is None:
            return None
        keep = attention_mask.to(device=x.device).bool()
        add = torch.zeros(keep.shape, dtype=x.dtype, device=x.device).masked_fill_(~keep, torch.finfo(x.dtype).min)
        return add[:, None, None, :]

    def _layer_mask(self, attention_mask: Tensor | None, x: Tensor) -> Tensor | None:
        """The mask the layer of this implementation takes, built once per mask tensor."""
        if attention_mask is None:
            return None
        key = (attention_mask, attention_mask._version, x.dtype, x.device, x.shape[0], x.shape[1])
        c = self._mask_cache
        if c is not None and c[0] is attention_mask and c[1:-1] == key[1:]:
            return c[-1]
        if self.implementation == "transformers":
            from transformers.masking_utils import create_bidirectional_mask  # lazy: transformers

            built = create_bidirectional_mask(config=self.config, inputs_embeds=x, attention_mask=attention_mask)
        else:
            built = self._additive_mask(attention_mask, x)
        self._mask_cache = (*key, built)
        return built

    # -- DynamicalMap --------------------------------------------------------------------------

    def embed(self, input_ids: Tensor) -> Tensor:
        """``u(s)``: embeddings (token type 0, positions 0..n-1) projected to the hidden size."""
        ids = input_ids.to(device=self.embedding_hidden_mapping_in.weight.device, dtype=torch.long)
        return self.embedding_hidden_mapping_in(self.embeddings(ids))

    def initial_state(self, inputs: MapInputs) -> Tensor:
        if inputs.input_ids is None:
            raise ValueError("AlbertMap.initial_state needs MapInputs.input_ids (batch, n_tokens)")
        if inputs.input_ids.ndim != 2:
            raise ValueError(f"input_ids must be (batch, n_tokens), got shape {tuple(inputs.input_ids.shape)}")
        return self.embed(inputs.input_ids)

    def step(self, x: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        mask = self._layer_mask(attention_mask, x)
        return self.layer(x, mask)

    def attention_probs(self, x: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """softmax(Q K^T / sqrt(d_head) + mask), ``(batch, heads, n_tokens, n_tokens)``."""
        b, n, _ = x.shape
        if isinstance(self.layer, FusedAlbertLayer):
            q, k, _ = self.layer.qkv_heads(x)
        else:
            att = self.layer.attention
            q = att.query(x).view(b, n, self.n_heads, self.d_head).transpose(1, 2)
            k = att.key(x).view(b, n, self.n_heads, self.d_head).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-1, -2)) * (self.d_head**-0.5)
        add = self._additive_mask(attention_mask, x)
        if add is not None:
            scores = scores + add
        return torch.softmax(scores, dim=-1)

    def extra_repr(self) -> str:
        return f"implementation={self.implementation!r}, n_hidden={self.n_hidden}, n_heads={self.n_heads}"


# --------------------------------------------------------------------------------------------
# loading
# --------------------------------------------------------------------------------------------

def load_albert_config(source: str, *, revision: str | None = None) -> AlbertConfig:
    """The ``AlbertConfig`` at ``source`` (hub id or local directory)."""
    from transformers import AlbertConfig  # lazy: transformers

    return hf_load(AlbertConfig.from_pretrained, source, "ALBERT config", revision=revision)


def load_albert(
    source: str,
    *,
    revision: str | None = None,
    init: TruncatedNormalInit | None = None,
    seed: int = 0,
    implementation: Implementation = "fused",
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
) -> AlbertMap:
    """Load ALBERT from a hub id or a local directory as an :class:`AlbertMap`.

    Without ``init`` the pre-trained weights are loaded (``AlbertModel.from_pretrained``). With
    ``init`` only the config is read and every weight is redrawn with ``init`` from a CPU
    generator seeded by ``seed`` -- one of the paper's *initial networks* (a new seed gives a new
    network; the same seed the same one on every device). The model is in eval mode (dropout off)
    with ``requires_grad_(False)``, cast to ``dtype`` and moved to ``device``.

    Raises ``ModelLoadError`` when the source cannot be read and ``ValueError`` for configs that
    do not share one layer (``num_hidden_groups`` or ``inner_group_num`` != 1).
    """
    if implementation not in IMPLEMENTATIONS:
        raise ValueError(f"implementation must be one of {IMPLEMENTATIONS}, got {implementation!r}")
    from transformers import AlbertModel  # lazy: transformers

    config = load_albert_config(source, revision=revision)
    check_shared_layer(config)
    if init is None:
        with torch.random.fork_rng(devices=[]):  # loading must not move the global RNG either
            model, info = hf_load(AlbertModel.from_pretrained, source, "ALBERT weights", revision=revision,
                                   config=config, add_pooling_layer=False, dtype=torch.float32,
                                   output_loading_info=True, use_safetensors=True)
        # Checkpoints of AlbertForMaskedLM etc. carry extra head weights (fine); a checkpoint
        # lacking embedding or encoder weights would silently iterate random ones (not fine).
        missing = sorted(k for k in info.get("missing_keys", ()) if not k.startswith("pooler"))
        mismatched = list(info.get("mismatched_keys", ()))
        if missing or mismatched:
            raise ModelLoadError(
                f"could not load the ALBERT weights from {source!r}: the checkpoint does not match its config "
                f"(missing: {missing[:8]}{' ...' if len(missing) > 8 else ''}; size mismatches: {mismatched[:8]})"
            )
    else:
        with torch.random.fork_rng(devices=[]):  # HF's own init must not move the global RNG
            model = AlbertModel(config, add_pooling_layer=False)
        generator = torch.Generator(device="cpu").manual_seed(int(seed))
        apply_truncated_normal(model, init, generator)
    model.eval()
    model.requires_grad_(False)
    model.to(device=device, dtype=dtype)
    amap = AlbertMap(model, implementation=implementation)
    amap.eval()
    amap.requires_grad_(False)
    return amap


def load_mlm_head(
    source: str,
    *,
    revision: str | None = None,
    init: TruncatedNormalInit | None = None,
    seed: int = 0,
    word_embeddings: Tensor | None = None,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
) -> nn.Module:
    """ALBERT's MLM head (transformers' ``AlbertMLMHead``: dense, activation, LayerNorm, decoder
    tied to the word embeddings), ``hidden states (..., hidden_size) -> logits (..., vocab_size)``.

    Without ``init`` it is the pre-trained head of the checkpoint, loaded through
    ``AlbertForMaskedLM.from_pretrained`` (so its decoder is tied to the checkpoint's word
    embeddings, as in the real model); a checkpoint without MLM-head weights (one saved from
    ``AlbertModel``) raises ``ModelLoadError``. With ``init`` (an initial network) the head of
    ``AlbertForMaskedLM(config)`` is redrawn with ``init`` from a CPU generator seeded by ``seed``
    and its decoder is tied to ``word_embeddings`` (the initial network's own, redrawn ones).
    Eval mode, ``requires_grad_(False)``, cast to ``dtype`` on ``device``.
    """
    from transformers import AlbertForMaskedLM  # lazy: transformers

    config = load_albert_config(source, revision=revision)
    if init is None:
        with torch.random.fork_rng(devices=[]):
            model, info = hf_load(AlbertForMaskedLM.from_pretrained, source, "ALBERT MLM head", revision=revision,
                                   config=config, dtype=torch.float32, output_loading_info=True, use_safetensors=True)
        missing = sorted(k for k in info.get("missing_keys", ()) if k.startswith("predictions."))
        if missing:
            raise ModelLoadError(
                f"{source!r} has no pre-trained MLM head (missing {missing[:4]}); a readout with ALBERT's own head "
                "needs a checkpoint saved from AlbertForMaskedLM"
            )
        head = model.predictions
    else:
        if word_embeddings is None:
            raise ValueError("an initial network's MLM head is tied to its word embeddings: pass word_embeddings")
        with torch.random.fork_rng(devices=[]):
            head = AlbertForMaskedLM(config).predictions
        head.decoder.weight = nn.Parameter(torch.empty_like(head.decoder.weight))  # untie before redrawing
        apply_truncated_normal(head, init, torch.Generator(device="cpu").manual_seed(int(seed)))
        with torch.no_grad():
            head.decoder.weight.copy_(word_embeddings.detach().to(head.decoder.weight))
    head.eval()
    head.requires_grad_(False)
    return head.to(device=device, dtype=dtype)


__all__ = [
    "AlbertMap",
    "FusedAlbertLayer",
    "IMPLEMENTATIONS",
    "check_shared_layer",
    "load_albert",
    "load_albert_config",
    "load_mlm_head",
]
