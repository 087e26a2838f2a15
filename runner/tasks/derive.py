"""Measures computed from another measure's stored results (no iteration)."""

from __future__ import annotations

import numpy as np
import torch

from analyses.transient_chaos import summarize_chaos, transient_chaos
from runner.store import Store


def derive_transient_chaos(store: Store, network: int, tau: int) -> None:
    """Chaos length per sample from the stored exponent series lambda(t) (Inoue et al. 2021, Fig. 4D)."""
    lam = torch.from_numpy(store.read("lyapunov", (network,)).astype(np.float64))
    result = transient_chaos(lam, tau)
    summary = summarize_chaos(result)
    store.write("chaos_length", (network,), result.length.numpy())
    store.write("chaos_censored", (network,), result.censored.numpy())
    store.write("chaos_mean_exponent", (network,), result.mean_exponent.numpy())
    store.write("fraction_never_chaotic", (network,), summary["fraction_never_chaotic"].numpy())
    store.write("mean_chaotic_exponent", (network,), summary["mean_exponent"].numpy())


DERIVERS = {"transient_chaos": lambda store, task, spec: derive_transient_chaos(store, task.network, spec.measures()["lyapunov"].tau)}
