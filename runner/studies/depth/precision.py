"""In which floating-point precisions a depth measure's result can be trusted.

One application of f rounds every element of the state to the precision's unit roundoff u, so a
state x of N = N_w x N_h elements of unit scale (ALBERT's states after LayerNorm; the reference
maps' states) moves by about u sqrt(N) per step for no reason but rounding. A measure is trusted
in a precision when what it resolves stays well above that floor:

- the Lyapunov exponent's perturbation: ``k >= 10 u sqrt(N)`` (Algorithm A1 measures the growth of
  a perturbation of size k; rounding of comparable size would be measured as growth);
- the synchronisation threshold of D(t), a mean squared distance between token vectors:
  ``threshold >= 100 u^2 N_h`` (ten times the rounding of one token vector, squared).

TF32 rounds the inputs of every CUDA matmul to 10 mantissa bits, so its u is that of those
products. ``benchmarks/precision.py`` measures the same statistics in every precision against
fp32, with bootstrap intervals.
"""

from __future__ import annotations

import math

#: Unit roundoff of each precision (tf32: of its matmul inputs).
UNIT_ROUNDOFF = {"fp64": 2.0**-53, "fp32": 2.0**-24, "tf32": 2.0**-11, "bf16": 2.0**-8}


def perturbation_floor(precision: str, n_tokens: int, n_hidden: int) -> float:
    """The smallest perturbation norm a measure may resolve: ten times a step's rounding."""
    return 10 * UNIT_ROUNDOFF[precision] * math.sqrt(n_tokens * n_hidden)


def deviation_floor(precision: str, n_hidden: int) -> float:
    """The smallest D(t) threshold that stays above the rounding of token vectors (x 100)."""
    return 100 * UNIT_ROUNDOFF[precision] ** 2 * n_hidden


#: Where the precisions were compared (each measure's ``precision_checked``): at ALBERT-large
#: width, 1000 x 32-token samples, 200 steps; agreement is overlapping 95% bootstrap intervals (N_eff:
#: within 5%).
VALIDATED_ON = "ALBERT-large width on an NVIDIA H200, benchmarks/precision.py, 2026-11-26; docs/performance.md"


def validity(precision: str, measures: list) -> str | None:
    """What is known of a spec's ``measures`` (instances) in ``precision`` against fp32; None for
    fp32 and fp64 (the references) and where none of them was compared in it."""
    if precision in ("fp32", "fp64"):
        return None
    checked = {m.kind(): type(m).precision_checked[precision] for m in measures
               if precision in type(m).precision_checked}
    if not checked:
        return None
    agreed = [k for k, ok in checked.items() if ok]
    differed = [k for k, ok in checked.items() if not ok]
    parts = [f"validated for {', '.join(agreed)}"] if agreed else []
    parts += [f"NOT validated for {', '.join(differed)}"] if differed else []
    return f"{'; '.join(parts)} ({VALIDATED_ON})"
