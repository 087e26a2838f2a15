"""TransJect, the injective distance-preserving encoder, and its two baselines, in one file.

Paper: "Don't Bet on Sparsity: Designing Brain-Inspired Distance-Preserving Encoder" (anonymous,
under review; the TransJect paper). Components, bottom up:

* Injective token embedding (Sec. 3.4): ``X0_i = Concat(Emb(x_i), PE_i)``, each half in R^{d/2}.
* Eigenvalues ``Sigma`` (Sec. 3.1), computed once on X0 and shared by all layers: approximated
  by minimising ``||X0^T X0 - U Sigma U^T||`` over an orthogonal U ("Approx." in Table 1), or a
  random diagonal trained by the task loss only ("Random"); standardised to ``max |Sigma| = 1``.
* Orthogonal attention (Theorem 1, App. A.4 Eq. 12): ``F_e(X) = ELU(X U_e Sigma V_e)``, U_e, V_e
  orthogonal, so ``||U_e Sigma V_e||_2 = max |Sigma| = 1``.
* Injective residual (Eq. 3): ``X + (alpha_l / L) F(X)``, alpha_l in (0, 1), ReZero-like; its
  entropic variant (Eq. 4) picks one of four residuals per neuron with ``u ~ U(0, 1)``.
* Mixture of experts (Eq. 5): ``X^(l) = sum_e lambda_e X^(l,e)``, lambda convex and learned.
* Orthogonal residual FFN (Eq. 6): ``X + (alpha_l / L) ELU(ELU(X W1 + b1) W2 + b2)``, W1, W2
  orthogonal (d -> d: TransJect keeps the hidden size, Table 4).
* Sublayer (Eq. 7) ``ORF o MOE o IR``. With ``a = alpha_l / L < 1 / L`` every term is a residual
  of a 1-Lipschitz map, so per layer ``(1 - a)^2 <= ||f(x) - f(y)|| / ||x - y|| <= (1 + a)^2``;
  over L layers the ratio is below ``(1 + 1/L)^(2L) < e^2`` (Theorem 2) and one layer's above
  ``(1 - 1/L)^2 >= 1/4`` for L >= 2 (App. A.7). The entropic variants are not bounded (Sec. 3.5).
* Classification head (Sec. 3.6): mean pooling (IMDb, AGnews) or max pooling (ListOps) of the
  last layer over the tokens, then one linear layer.

Defaults (Sec. 3.6, App. B): L = 6, d = 512, E = 4 experts, no dropout. Orthogonality is
``torch.nn.utils.parametrizations.orthogonal`` throughout. Choices the paper leaves open:

* alpha_l = sigmoid(a_l) stays in the open interval (0, 1) of Eq. 3; ReZero's zero start is the
  interval's edge, so alpha starts at ``alpha_init`` (small). The same alpha_l scales IR and ORF.
* lambda = softmax of per-layer logits (zero at init: uniform experts), not a function of the
  input: the proof of Theorem 2 treats lambda as constants. ``gate="input"`` instead weighs each
  sample's experts as the authors' code does (``IsoEncoderLayer.attn_combine``): lambda_{b,e} =
  softmax_e(w^T max_j X^(l,e)_{b,j,:} + c), a linear score of each expert's output max-pooled over
  the sample's tokens (padding left out here; the reference pools padding too). Theorem 2's bound
  then no longer holds as proved (lambda depends on X).
* Approx. Sigma, per sequence: ``M = X0^T X0`` over its non-padding tokens; for a given U the
  minimiser of ``||M - U Sigma U^T||_F`` is ``Sigma = diag(U^T M U)``, and
  ``reconstruction_loss = mean_b ||M - U Sigma U^T||_F^2 / ||M||_F^2`` is returned for the
  training loop to add with a weight (the paper gives none). Random Sigma: a parameter drawn from
  U(0, 1) at init (eigenvalues of X^T X are non-negative).
* Entropic u: one draw per expert and neuron at every forward call, shared by all tokens ("each
  neuron performs same computation for all the tokens") and the batch, in eval mode too.
* PE: the sinusoid of Vaswani et al. (2017) in d/2 dimensions.

docs/transject.md lists where this follows the paper and where the authors' code
(github.com/victor7246/TransJect) differs.

Baselines (same d and L; Table 4's sizes: 8 heads, d_ff = 2048, dropout 0.1):
``Transformer`` is a stack of ``nn.TransformerEncoderLayer`` (post-LN, ReLU) on ``Emb * sqrt(d) +
PE``; ``Transformer+ReZero`` (Bachlechner et al. 2020) replaces LayerNorm by ``x + alpha F(x)``
with alpha = 0 at init, from ``nn.MultiheadAttention`` and ``nn.Linear``.

Layout: batch first. ``input_ids`` ``(batch, seq)``, ``attention_mask`` ``(batch, seq)`` of 1 for
tokens and 0 for padding, hidden states ``(batch, seq, d)``, logits ``(batch, n_classes)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import orthogonal

from models.activations import Loss, chosen, gradients

Variant = Literal["transject", "random-transject", "entropic-transject", "random-entropic-transject"]
#: Expert weights of Eq. 5: learned constants per layer (the paper) or per sample from the experts'
#: outputs (the authors' code).
Gate = Literal["learned", "input"]
#: Table 1's rows, (eigenvalues, residual): (Approx., IR), (Approx., IR + Random), (Random, IR), (Random, IR + Random)
VARIANTS: tuple[str, ...] = ("transject", "entropic-transject", "random-transject", "random-entropic-transject")
Pooling = Literal["mean", "max"]
BASELINES: tuple[str, ...] = ("transformer", "transformer-rezero")


# --------------------------------------------------------------------------------------------
# configs


@dataclass(frozen=True)
class TransJectConfig:
    """Sec. 3.6 and App. B: L = 6 layers, d = 512, E = 4 experts (Table 4 counts E = 8), no dropout."""

    vocab_size: int
    n_classes: int
    d_model: int = 512
    n_layers: int = 6
    n_experts: int = 4
    variant: Variant = "transject"
    #: Sec. 3.6.1: mean pooling for IMDb and AGnews; Sec. 3.6.2: max pooling for ListOps.
    pooling: Pooling = "mean"
    #: Starting alpha_l of Eq. 3 (ReZero starts at 0, the edge of the paper's open interval (0, 1)).
    alpha_init: float = 0.01
    #: "learned": lambda per layer (Eq. 5, the paper); "input": per sample, as the authors' code.
    gate: Gate = "learned"

    def __post_init__(self) -> None:
        if self.vocab_size < 1 or self.n_classes < 1 or self.n_layers < 1 or self.n_experts < 1:
            raise ValueError("vocab_size, n_classes, n_layers and n_experts must be positive")
        if self.d_model < 2 or self.d_model % 2:
            raise ValueError(f"d_model must be even (embedding and PE take d/2 each), got {self.d_model}")
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {self.variant!r}")
        if self.pooling not in ("mean", "max"):
            raise ValueError(f"pooling must be 'mean' or 'max', got {self.pooling!r}")
        if not 0.0 < self.alpha_init < 1.0:
            raise ValueError(f"alpha_init must be in (0, 1), got {self.alpha_init}")
        if self.gate not in ("learned", "input"):
            raise ValueError(f"gate must be 'learned' or 'input', got {self.gate!r}")

    @property
    def random_sigma(self) -> bool:
        return self.variant.startswith("random")

    @property
    def entropic(self) -> bool:
        return "entropic" in self.variant


@dataclass(frozen=True)
class TransformerConfig:
    """The baselines (App. B, Table 4): L = 6, d = 512, d_ff = 2048, 8 heads, dropout 0.1; post-LN
    ``nn.TransformerEncoderLayer`` or, with ``rezero``, Transformer+ReZero."""

    vocab_size: int
    n_classes: int
    d_model: int = 512
    n_layers: int = 6
    n_heads: int = 8
    d_ff: int = 2048
    dropout: float = 0.1
    pooling: Pooling = "mean"
    rezero: bool = False

    def __post_init__(self) -> None:
        if min(self.vocab_size, self.n_classes, self.n_layers, self.n_heads, self.d_ff) < 1:
            raise ValueError("vocab_size, n_classes, n_layers, n_heads and d_ff must be positive")
        if self.d_model % self.n_heads or self.d_model % 2:
            raise ValueError(f"d_model must be even and divisible by n_heads, got {self.d_model}, {self.n_heads}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.pooling not in ("mean", "max"):
            raise ValueError(f"pooling must be 'mean' or 'max', got {self.pooling!r}")


@dataclass
class EncoderOutput:
    logits: Tensor  # (batch, n_classes)
    hidden_states: list[Tensor] | None  # X^(0), ..., X^(L), each (batch, seq, d); None unless asked for
    expert_weights: list[Tensor]  # lambda per layer, (E,) or with gate="input" (batch, E); empty for the baselines
    reconstruction_loss: Tensor  # scalar; zero where Sigma is not approximated
    sigma: Tensor | None = None  # standardised Sigma: (batch, d) approximated, (d,) random; None for baselines


# --------------------------------------------------------------------------------------------
# pieces


def sinusoidal_positions(n: int, dim: int, *, device=None, dtype=torch.float32) -> Tensor:
    """Vaswani et al. (2017), Sec. 3.5: PE[p, 2i] = sin(p / 10000^(2i/dim)), PE[p, 2i+1] = cos(...); ``(n, dim)``."""
    pos = torch.arange(n, device=device, dtype=torch.float64)[:, None]
    freq = torch.pow(10000.0, -torch.arange(0, dim, 2, device=device, dtype=torch.float64) / dim)
    pe = torch.zeros(n, dim, device=device, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq)[:, : dim // 2]
    return pe.to(dtype)


def orthogonal_linear(d: int, bias: bool) -> nn.Linear:
    """A d x d ``nn.Linear`` whose weight is orthogonal (``parametrizations.orthogonal``)."""
    return orthogonal(nn.Linear(d, d, bias=bias))


def entropic_residual(x: Tensor, fx: Tensor, u: Tensor) -> Tensor:
    """Eq. 4, neuron-wise, with ``fx = (alpha_l / L) F(x)`` and ``u`` (d,) in [0, 1):
    1.5x + fx (u <= .25), 1.5x - fx (<= .5), 4 fx (<= .75), x (else); its mean over u is x + fx."""
    return torch.where(u <= 0.25, 1.5 * x + fx,
                       torch.where(u <= 0.5, 1.5 * x - fx, torch.where(u <= 0.75, 4.0 * fx, x)))


def _pool(h: Tensor, attention_mask: Tensor | None, how: str) -> Tensor:
    if attention_mask is None:
        return h.mean(1) if how == "mean" else h.amax(1)
    m = attention_mask.to(torch.bool).unsqueeze(-1)
    if how == "mean":
        return (h * m).sum(1) / m.sum(1).clamp_min(1)
    return h.masked_fill(~m, float("-inf")).amax(1)


def reorthogonalize(model: nn.Module) -> nn.Module:
    """Re-project every orthogonal weight in the module's current dtype (after ``.double()``: the
    parametrization keeps a base matrix that is orthogonal only to the precision it was made in)."""
    with torch.no_grad():
        for module in model.modules():
            if parametrize.is_parametrized(module, "weight") and any(
                    type(p).__name__ == "_Orthogonal" for p in module.parametrizations.weight):
                module.weight = module.weight
    return model


class TransJectLayer(nn.Module):
    """One encoder layer, ``ORF o MOE o IR`` (Eq. 7), given the standardised Sigma."""

    def __init__(self, d: int, n_experts: int, n_layers: int, entropic: bool, alpha_init: float,
                 gate: Gate = "learned") -> None:
        super().__init__()
        self.n_layers, self.entropic, self.gate = n_layers, entropic, gate
        self.U = nn.ModuleList(orthogonal_linear(d, bias=False) for _ in range(n_experts))
        self.V = nn.ModuleList(orthogonal_linear(d, bias=False) for _ in range(n_experts))
        if gate == "learned":
            self.expert_logits = nn.Parameter(torch.zeros(n_experts))  # Eq. 5, softmax -> convex lambda
        else:
            self.expert_score = nn.Linear(d, 1)  # the reference's attn_combine
        self.W1, self.W2 = orthogonal_linear(d, bias=True), orthogonal_linear(d, bias=True)  # Eq. 6
        self.alpha_logit = nn.Parameter(torch.tensor(math.log(alpha_init / (1.0 - alpha_init))))

    @property
    def alpha(self) -> Tensor:
        """alpha_l in (0, 1) (Eq. 3); the residual branches are scaled by alpha_l / L."""
        return torch.sigmoid(self.alpha_logit)

    def expert_weights(self, outputs: list[Tensor] | None = None, attention_mask: Tensor | None = None) -> Tensor:
        """lambda: non-negative, summing to 1 over the experts (Eq. 5). ``gate="learned"``: (E,);
        ``gate="input"``: (batch, E) from the experts' ``outputs`` X^(l,e) (each (batch, seq, d)),
        softmax_e of a linear score of each output max-pooled over the (non-padding) tokens."""
        if self.gate == "learned":
            return torch.softmax(self.expert_logits, dim=0)
        if outputs is None:
            raise ValueError("gate='input' weighs each sample's experts by their outputs: pass them")
        pooled = torch.stack([_pool(h, attention_mask, "max") for h in outputs], dim=1)  # (batch, E, d)
        return torch.softmax(self.expert_score(pooled).squeeze(-1), dim=1)

    def attention(self, x: Tensor, sigma: Tensor, e: int) -> Tensor:
        """F_e(X) = ELU(X U_e Sigma V_e) (Theorem 1, Eq. 12); ``sigma`` broadcasts against ``x``."""
        return F.elu(self.V[e](self.U[e](x) * sigma))

    def expert_output(self, x: Tensor, sigma: Tensor, e: int, u: Tensor | None = None) -> Tensor:
        """X^(l,e) = x + (alpha/L) F_e(x) (Eq. 3), or Eq. 4 with ``u`` (E, d)."""
        fx = self.alpha / self.n_layers * self.attention(x, sigma, e)
        return entropic_residual(x, fx, u[e]) if u is not None else x + fx

    def mix(self, x: Tensor, sigma: Tensor, u: Tensor | None = None,
            attention_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """MOE o IR: sum_e lambda_e X^(l,e) (Eqs. 3, 5), and lambda (see :meth:`expert_weights`)."""
        out = torch.zeros_like(x)
        if self.gate == "learned":
            lam = self.expert_weights()
            for e in range(len(self.U)):  # one expert's output at a time
                out = out + lam[e] * self.expert_output(x, sigma, e, u)
            return out, lam
        outputs = [self.expert_output(x, sigma, e, u) for e in range(len(self.U))]
        lam = self.expert_weights(outputs, attention_mask)
        for e, h in enumerate(outputs):
            out = out + lam[:, e, None, None] * h
        return out, lam

    def moe(self, x: Tensor, sigma: Tensor, u: Tensor | None = None, attention_mask: Tensor | None = None) -> Tensor:
        """MOE o IR: sum_e lambda_e (x + (alpha/L) F_e(x)) (Eqs. 3, 5); Eq. 4 per expert with ``u`` (E, d)."""
        return self.mix(x, sigma, u, attention_mask)[0]

    def orf(self, x: Tensor) -> Tensor:
        """ORF(X) = X + (alpha/L) ELU(ELU(X W1 + b1) W2 + b2) (Eq. 6)."""
        return x + (self.alpha / self.n_layers) * F.elu(self.W2(F.elu(self.W1(x))))

    def forward_with_weights(self, x: Tensor, sigma: Tensor, u: Tensor | None = None,
                             generator: torch.Generator | None = None,
                             attention_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """The layer's output and its expert weights lambda; arguments as :meth:`forward`."""
        if self.entropic and u is None:
            u = torch.rand(len(self.U), x.shape[-1], generator=generator, device=x.device, dtype=x.dtype)
        out, lam = self.mix(x, sigma, u if self.entropic else None, attention_mask)
        return self.orf(out), lam

    def forward(self, x: Tensor, sigma: Tensor, u: Tensor | None = None,
                generator: torch.Generator | None = None, attention_mask: Tensor | None = None) -> Tensor:
        """``x`` (batch, seq, d), ``sigma`` (batch, 1, d) or (d,); entropic: ``u`` (E, d), else drawn;
        ``attention_mask`` (batch, seq): the tokens the input gate pools (``gate="input"`` only)."""
        return self.forward_with_weights(x, sigma, u, generator, attention_mask)[0]


# --------------------------------------------------------------------------------------------
# models


class TransJect(nn.Module):
    """TransJect encoder with the classification head; ``config.variant`` picks a row of Table 1."""

    def __init__(self, config: TransJectConfig) -> None:
        super().__init__()
        self.config = config
        d = config.d_model
        self.embedding = nn.Embedding(config.vocab_size, d // 2)
        if config.random_sigma:
            self.sigma_raw = nn.Parameter(torch.rand(d))
        else:
            self.eigvecs = orthogonal_linear(d, bias=False)  # U of ||X^T X - U Sigma U^T||
        self.layers = nn.ModuleList(TransJectLayer(d, config.n_experts, config.n_layers, config.entropic,
                                                   config.alpha_init, config.gate) for _ in range(config.n_layers))
        self.classifier = nn.Linear(d, config.n_classes)

    def embed(self, input_ids: Tensor) -> Tensor:
        """X^(0) = Concat(Emb(x_i), PE_i) (Sec. 3.4), ``(batch, seq, d)``."""
        e = self.embedding(input_ids)
        pe = sinusoidal_positions(input_ids.shape[1], e.shape[-1], device=e.device, dtype=e.dtype)
        return torch.cat([e, pe.expand(e.shape[0], -1, -1)], dim=-1)

    def eigenvalues(self, x0: Tensor | None, attention_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Standardised Sigma (max |Sigma| = 1) and the reconstruction loss (Sec. 3.1).

        Approx.: ``(batch, d)`` from ``M = X0^T X0`` of each sequence; Random: the parameter, ``(d,)``, loss 0."""
        if self.config.random_sigma:
            s = self.sigma_raw
            return s / s.abs().max().clamp_min(torch.finfo(s.dtype).tiny), s.new_zeros(())
        x = x0 if attention_mask is None else x0 * attention_mask.to(x0.dtype).unsqueeze(-1)
        m = x.mT @ x  # (batch, d, d)
        u = self.eigvecs.weight
        s = torch.einsum("di,bde,ei->bi", u, m, u)  # diag(U^T M U): the best Sigma for this U
        residual = m - torch.einsum("di,bi,ei->bde", u, s, u)
        recon = (residual.square().sum((1, 2)) / m.square().sum((1, 2)).clamp_min(torch.finfo(m.dtype).tiny)).mean()
        return s / s.abs().amax(-1, keepdim=True).clamp_min(torch.finfo(s.dtype).tiny), recon

    @staticmethod
    def _broadcast(sigma: Tensor) -> Tensor:
        return sigma.unsqueeze(-2) if sigma.dim() == 2 else sigma

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, *, output_hidden_states: bool = False,
                generator: torch.Generator | None = None) -> EncoderOutput:
        """Logits, lambda per layer, reconstruction loss, Sigma; hidden states X^(0..L) when asked.

        Padding tokens are transformed too (every map acts token-wise given Sigma) but take no part
        in Sigma or the pooling. ``generator`` draws the entropic u."""
        x = self.embed(input_ids)
        sigma, recon = self.eigenvalues(x, attention_mask)
        s = self._broadcast(sigma)
        hidden, weights = [x], []
        for layer in self.layers:
            x, lam = layer.forward_with_weights(x, s, generator=generator, attention_mask=attention_mask)
            hidden.append(x)
            weights.append(lam)
        logits = self.classifier(_pool(x, attention_mask, self.config.pooling))
        return EncoderOutput(logits, hidden if output_hidden_states else None, weights, recon, sigma)

    def layer_map(self, index: int, x0: Tensor | None = None, attention_mask: Tensor | None = None, *,
                  u: Tensor | None = None, generator: torch.Generator | None = None) -> Callable[[Tensor], Tensor]:
        """Layer ``index`` as a map ``x -> Sublayer(x)`` (Eq. 7) with Sigma fixed.

        Approx. variants need ``x0`` (the X^(0) Sigma is computed on, Sec. 3.1); ``x`` must then
        have x0's batch size. Entropic variants: ``u`` (E, d) freezes Eq. 4's draw, else each call
        draws anew with ``generator``. ``gate="input"`` pools ``attention_mask``'s tokens (then x
        needs its batch size). Iterating many times: ``with parametrize.cached(): ...``."""
        if not self.config.random_sigma and x0 is None:
            raise ValueError(f"variant {self.config.variant!r} computes Sigma from x0: pass the initial embeddings")
        sigma = self._broadcast(self.eigenvalues(x0, attention_mask)[0])  # Random: the parameter, x0 unused
        layer = self.layers[index]
        mask = attention_mask if layer.gate == "input" else None
        return lambda x: layer(x, sigma, u=u, generator=generator, attention_mask=mask)

    def reorthogonalize(self) -> TransJect:
        return reorthogonalize(self)


class ReZeroEncoderLayer(nn.Module):
    """Transformer+ReZero layer (Bachlechner et al. 2020): x + alpha SA(x), then x + alpha FFN(x),
    alpha = 0 at init, no LayerNorm; the call signature of ``nn.TransformerEncoderLayer``."""

    def __init__(self, d: int, n_heads: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d, n_heads, dropout=dropout, batch_first=True)
        self.linear1, self.linear2 = nn.Linear(d, d_ff), nn.Linear(d_ff, d)
        self.dropout, self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)
        self.resweight = nn.Parameter(torch.zeros(()))

    def forward(self, src: Tensor, src_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None) -> Tensor:
        sa = self.self_attn(src, src, src, attn_mask=src_mask, key_padding_mask=src_key_padding_mask,
                            need_weights=False)[0]
        src = src + self.dropout1(self.resweight * sa)
        ff = self.linear2(self.dropout(F.relu(self.linear1(src))))
        return src + self.dropout2(self.resweight * ff)


class TransformerClassifier(nn.Module):
    """The baselines: Transformer (post-LN ``nn.TransformerEncoderLayer``) or Transformer+ReZero,
    with TransJect's classification head and output."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        d = config.d_model
        self.embedding = nn.Embedding(config.vocab_size, d)
        self.drop = nn.Dropout(config.dropout)
        self.layers = nn.ModuleList(
            ReZeroEncoderLayer(d, config.n_heads, config.d_ff, config.dropout) if config.rezero else
            nn.TransformerEncoderLayer(d, config.n_heads, config.d_ff, config.dropout, batch_first=True)
            for _ in range(config.n_layers))
        self.classifier = nn.Linear(d, config.n_classes)

    def embed(self, input_ids: Tensor) -> Tensor:
        """Emb(x) sqrt(d) + PE, then dropout (Vaswani et al. 2017, Secs. 3.4, 3.5, 5.4); ``(batch, seq, d)``."""
        e = self.embedding(input_ids) * math.sqrt(self.config.d_model)
        return self.drop(e + sinusoidal_positions(input_ids.shape[1], e.shape[-1], device=e.device, dtype=e.dtype))

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, *,
                output_hidden_states: bool = False, generator: torch.Generator | None = None) -> EncoderOutput:
        pad = None if attention_mask is None else ~attention_mask.to(torch.bool)
        x = self.embed(input_ids)
        hidden = [x]
        for layer in self.layers:
            x = layer(x, src_key_padding_mask=pad)
            hidden.append(x)
        logits = self.classifier(_pool(x, attention_mask, self.config.pooling))
        return EncoderOutput(logits, hidden if output_hidden_states else None, [], x.new_zeros(()))

    def layer_map(self, index: int, x0: Tensor | None = None, attention_mask: Tensor | None = None,
                  **_) -> Callable[[Tensor], Tensor]:
        """Layer ``index`` as a map ``x -> layer(x)`` (``x0`` unused; padding masked as in forward)."""
        pad = None if attention_mask is None else ~attention_mask.to(torch.bool)
        layer = self.layers[index]
        return lambda x: layer(x, src_key_padding_mask=pad)


def build_model(name: str, params: dict) -> TransJect | TransformerClassifier:
    """``name``: ``transject`` (``params["variant"]`` picks Table 1's row), ``transformer`` or
    ``transformer-rezero``; ``params``: the config's fields."""
    if name == "transject":
        return TransJect(TransJectConfig(**params))
    if name in BASELINES:
        return TransformerClassifier(TransformerConfig(**params, rezero=name == "transformer-rezero"))
    raise ValueError(f"unknown model {name!r}; choose transject, transformer or transformer-rezero")


class TransJectActivations:
    """Named hook points of TransJect or a baseline (:mod:`models.activations`): ``embedding`` is X^(0)
    and ``layerL`` is X^(L), the model's own hidden states (padding tokens included; the entropic u is
    drawn with ``inputs.generator``, else with ``generator``)."""

    def __init__(self, model: TransJect | TransformerClassifier, generator: torch.Generator | None = None):
        self.model, self.generator = model, generator

    def layer_names(self) -> tuple[str, ...]:
        return ("embedding",) + tuple(f"layer{i + 1}" for i in range(len(self.model.layers)))

    def capture(self, inputs, names=None) -> dict[str, Tensor]:
        names = chosen(self.layer_names(), names)
        gen = inputs.generator if inputs.generator is not None else self.generator
        with torch.no_grad():
            out = self.model(inputs.input_ids, inputs.attention_mask, output_hidden_states=True, generator=gen)
        return {name: h for name, h in zip(self.layer_names(), out.hidden_states) if name in names}

    def capture_gradients(self, inputs, loss: Loss, names=None) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        """``loss`` of the model's output (its ``logits``, ``hidden_states`` ...)."""
        names = chosen(self.layer_names(), names)
        gen = inputs.generator if inputs.generator is not None else self.generator
        with torch.enable_grad():
            out = self.model(inputs.input_ids, inputs.attention_mask, output_hidden_states=True, generator=gen)
            kept = {name: h for name, h in zip(self.layer_names(), out.hidden_states) if name in names}
            grads = gradients(loss(out), kept)
        return {k: v.detach() for k, v in kept.items()}, grads

    def reset(self) -> None:
        pass
