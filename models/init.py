"""Random initialisation of the paper's *initial networks*.

Inoue et al. (2021), Sec. II: "each weight parameter was independently sampled from a truncated
normal distribution N(0, sigma^2) where sigma = 0.02 was used and the sampled value was clipped in
the range of [-2 sigma, 2 sigma]; bias parameters are initially set to 0" -- the scheme of the
ALBERT reference code (``tf.truncated_normal_initializer(stddev=0.02)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class TruncatedNormalInit:
    """Weights ~ N(0, std^2) truncated to ``[-clip*std, clip*std]``; biases 0."""

    std: float = 0.02
    clip: float = 2.0

    def __post_init__(self) -> None:
        if not (self.std > 0 and math.isfinite(self.std)):
            raise ValueError(f"TruncatedNormalInit.std must be a positive number, got {self.std!r}")
        if not (self.clip > 0 and math.isfinite(self.clip)):
            raise ValueError(f"TruncatedNormalInit.clip must be a positive number, got {self.clip!r}")

    @property
    def effective_std(self) -> float:
        """Standard deviation of the truncated distribution (smaller than ``std``)."""
        c = self.clip
        phi = math.exp(-0.5 * c * c) / math.sqrt(2 * math.pi)
        mass = math.erf(c / math.sqrt(2))  # P(|z| < c)
        return self.std * math.sqrt(1 - 2 * c * phi / mass)


@torch.no_grad()
def apply_truncated_normal(module: nn.Module, init: TruncatedNormalInit, generator: torch.Generator) -> None:
    """Redraw every parameter of ``module`` in place, deterministically given ``generator``.

    - ``nn.Linear`` and ``nn.Embedding`` weights: N(0, std^2) truncated to ``[-clip*std, clip*std]``
      (every row of an embedding, including a ``padding_idx`` row, as in the reference code).
    - every bias: 0.
    - ``nn.LayerNorm``: weight (gamma) 1, bias (beta) 0. The paper only says "each weight
      parameter ... truncated normal, bias parameters 0"; the ALBERT reference code starts its
      layer norms at gamma = 1, beta = 0, and so do we.

    Sub-modules are visited in ``named_modules()`` order, so the draw depends only on the module
    structure and the generator state. Draws are made on the generator's device in float32 and
    then copied into the parameters (whatever their dtype or device), so a given seed gives the
    same network on every device. Any other parameter type raises ``TypeError`` rather than being
    silently left at its old value.
    """
    gen_device = generator.device
    handled: set[int] = set()
    for _, sub in module.named_modules():
        if isinstance(sub, (nn.Linear, nn.Embedding)):
            buf = torch.empty(sub.weight.shape, dtype=torch.float32, device=gen_device)
            nn.init.trunc_normal_(
                buf, mean=0.0, std=init.std, a=-init.clip * init.std, b=init.clip * init.std, generator=generator
            )
            # trunc_normal_ clamps to [a, b] after the inverse-CDF draw; guard the float edge anyway.
            buf.clamp_(-init.clip * init.std, init.clip * init.std)
            sub.weight.copy_(buf)
            handled.add(id(sub.weight))
            bias = getattr(sub, "bias", None)
            if bias is not None:
                bias.zero_()
                handled.add(id(bias))
        elif isinstance(sub, nn.LayerNorm):
            if sub.weight is not None:
                sub.weight.fill_(1.0)
                handled.add(id(sub.weight))
            if sub.bias is not None:
                sub.bias.zero_()
                handled.add(id(sub.bias))
    for name, p in module.named_parameters():
        if id(p) in handled:
            continue
        if name.endswith("bias") or name == "bias":
            p.zero_()  # free-standing biases (e.g. an MLM head's output bias)
        else:
            raise TypeError(f"apply_truncated_normal: do not know how to initialise parameter {name!r}")
