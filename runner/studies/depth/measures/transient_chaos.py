"""Transient-chaos length per sample from the exponent series (Inoue et al. 2021, Sec. II.B, Fig. 4B, 4D)."""

from __future__ import annotations

from typing import Literal

import numpy as np

from analyses.transient_chaos import summarize_chaos, transient_chaos, transient_chaos_of_chunks
from runner.core.layout import flags
from runner.plugin.measure_protocol import DerivedContext
from runner.plugin.measures import DerivedTags, MeasureTags, hints
from runner.plugin.timings import DerivedMeasure
from runner.studies.depth.measure import PAPER, STUDY, DepthParams

#: Intervals of lambda read at once (rounded to whole stored chunks): the memory of a derivation,
#: whatever the run's length (1000 samples x 2048 intervals in float64: 16 MB).
CHUNK_INTERVALS = 2048

#: The codes of ``chaos_outcome``, in order.
CHAOS_OUTCOMES = ("chaotic_transient", "never_chaotic", "censored", "diverged", "not_applicable", "twin_left")


class Params(DepthParams):
    """Transient-chaos length per sample from the exponent series (Fig. 4D)."""

    kind: Literal["transient_chaos"]


class TransientChaos(DerivedMeasure, study=STUDY, reference=PAPER, params=Params,
                     tags=MeasureTags("derived", derived=DerivedTags(source="lyapunov"))):
    version = 2  # 2: twin_left, apart from diverged (the state)
    precision_checked = {"tf32": True, "bf16": False}

    def variables(self, b, shape) -> None:
        m = "transient_chaos"
        b.var("chaos_length", m, ("network", "sample"), "float64", np.nan, "transient chaos length (steps)", "1",
              "time after which lambda(t) stays negative to the end of the run; 0: never chaotic (Fig. 4D); NaN: the "
              "sample diverged (see diverged_step); a censored length (chaos_censored) is a lower bound",
              **hints(plot="histogram", order=3, headline=("mean chaos length", "mean")))
        b.var("chaos_censored", m, ("network", "sample"), "bool", False, "chaos length censored", None,
              "true where lambda(t) was still positive in the last interval: the run ended before the transient did, "
              "so chaos_length is only a lower bound", **hints(headline=("censored chaos lengths", "count_true")))
        b.var("chaos_mean_exponent", m, ("network", "sample"), "float64", np.nan,
              "mean lambda(t) over the chaotic transient, per interval of tau steps", "1",
              "mean of lambda over intervals before chaos_length")
        b.var("chaos_outcome", m, ("network", "sample"), "int8", -1, "transient chaos outcome", None,
              "paper's sign criterion: chaotic_transient, lambda(t) stayed negative from chaos_length on; "
              "never_chaotic, length 0; censored, still positive in the last interval (a lower bound); diverged, "
              "the state became non-finite (no length); twin_left, lambda(t) is NaN because the perturbed twin left "
              "the map's domain or diverged while the state did not (see lyapunov_twin; no length); see orbit_class "
              "for what the orbit settled on",
              **flags(*CHAOS_OUTCOMES))
        b.var("fraction_never_chaotic", m, ("network",), "float64", np.nan, "fraction of samples never chaotic", "1",
              "over the samples that did not diverge; paper: 38.5% for initial networks, 0% pre-trained",
              **hints(headline=("never chaotic", "value")))
        b.var("mean_chaotic_exponent", m, ("network",), "float64", np.nan,
              "mean exponent of chaotic samples, per interval of tau steps", "1",
              "mean of chaos_mean_exponent over chaotic samples (paper: 9.54e-2 pre-trained, 6.41e-3 initial)")

    def mark_not_applicable(self, store, network: int) -> None:
        n = len(store.read("chaos_outcome", (network,)))
        store.write("chaos_outcome", (network,), np.full(n, CHAOS_OUTCOMES.index("not_applicable"), np.int8))

    def derive(self, ctx: DerivedContext) -> None:
        import torch  # lazy: torch

        store, network = ctx.store, ctx.index
        array = store.group["lyapunov"]
        tau = int(array.attrs["tau"])  # as its source stored it: no other measure's table is read
        intervals, stored = array.shape[-1], array.chunks[-1]
        step = max(1, CHUNK_INTERVALS // stored) * stored  # whole stored chunks: each is decoded once
        chunks = (torch.from_numpy(store.read("lyapunov", (network, slice(None), slice(a, a + step))).astype(np.float64))
                  for a in range(0, intervals, step))
        result = transient_chaos_of_chunks(chunks, tau) if intervals else transient_chaos(
            torch.from_numpy(store.read("lyapunov", (network,)).astype(np.float64)), tau)
        summary = summarize_chaos(result)
        store.write("chaos_length", (network,), result.length.numpy())
        store.write("chaos_censored", (network,), result.censored.numpy())
        store.write("chaos_mean_exponent", (network,), result.mean_exponent.numpy())
        length, censored = result.length.numpy(), result.censored.numpy()
        state_diverged = np.isfinite(store.read("diverged_step", (network,)))  # the headline's count of diverged
        code = CHAOS_OUTCOMES.index
        outcome = np.select([np.isnan(length) & state_diverged, np.isnan(length), censored, length == 0],
                            [code("diverged"), code("twin_left"), code("censored"), code("never_chaotic")],
                            default=code("chaotic_transient")).astype(np.int8)
        store.write("chaos_outcome", (network,), outcome)
        store.write("fraction_never_chaotic", (network,), summary["fraction_never_chaotic"].numpy())
        store.write("mean_chaotic_exponent", (network,), summary["mean_exponent"].numpy())
