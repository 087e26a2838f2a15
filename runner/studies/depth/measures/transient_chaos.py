"""Transient-chaos length per sample from the exponent series (Inoue et al. 2021, Sec. II.B, Fig. 4B, 4D)."""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch

from analyses.transient_chaos import summarize_chaos, transient_chaos
from runner.measures import hints, register
from runner.studies.depth.measure import DepthParams, DerivedMeasure


class Params(DepthParams):
    """Transient-chaos length per sample from the exponent series (Fig. 4D)."""

    kind: Literal["transient_chaos"]


@register
class TransientChaos(DerivedMeasure):
    Params = Params
    source = "lyapunov"

    def variables(self, b, shape) -> None:
        m = "transient_chaos"
        b.var("chaos_length", m, ("network", "sample"), "float64", np.nan, "transient chaos length (steps of f)", "1",
              "time after which lambda(t) stays negative to the end of the run; 0: never chaotic (Fig. 4D); NaN: the "
              "sample diverged (see diverged_step); a censored length (chaos_censored) is a lower bound",
              **hints(plot="histogram", order=3, headline=("mean chaos length", "mean")))
        b.var("chaos_censored", m, ("network", "sample"), "bool", False, "chaos length censored", "1",
              "true where lambda(t) was still positive in the last interval: the run ended before the transient did, "
              "so chaos_length is only a lower bound", **hints(headline=("censored chaos lengths", "count_true")))
        b.var("chaos_mean_exponent", m, ("network", "sample"), "float64", np.nan,
              "mean lambda(t) over the chaotic transient, per interval of tau steps", "1",
              "mean of lambda over intervals before chaos_length")
        b.var("fraction_never_chaotic", m, ("network",), "float64", np.nan, "fraction of samples never chaotic", "1",
              "over the samples that did not diverge; paper: 38.5% for initial networks, 0% pre-trained",
              **hints(headline=("never chaotic", "value")))
        b.var("mean_chaotic_exponent", m, ("network",), "float64", np.nan,
              "mean exponent of chaotic samples, per interval of tau steps", "1",
              "mean of chaos_mean_exponent over chaotic samples (paper: 9.54e-2 pre-trained, 6.41e-3 initial)")

    def derive(self, store, network: int, spec) -> None:
        tau = next(m.tau for m in spec.measure if m.kind == self.source)
        lam = torch.from_numpy(store.read("lyapunov", (network,)).astype(np.float64))
        result = transient_chaos(lam, tau)
        summary = summarize_chaos(result)
        store.write("chaos_length", (network,), result.length.numpy())
        store.write("chaos_censored", (network,), result.censored.numpy())
        store.write("chaos_mean_exponent", (network,), result.mean_exponent.numpy())
        store.write("fraction_never_chaotic", (network,), summary["fraction_never_chaotic"].numpy())
        store.write("mean_chaotic_exponent", (network,), summary["mean_exponent"].numpy())
