"""The store of a depth-dynamics spec: networks and samples, and each measure's variables.

Each measure's time axis is its own dimension named after it (``deviation_step``,
``lyapunov_step``, ...), holding the step t of each kept value, so a measure kept every 100 steps
never shares an axis with one kept every step. Along time, a chunk is one *segment*
(``checkpoint_every`` steps), so a segment's results are one region write aligned to chunks.
"""

from __future__ import annotations

import numpy as np

from runner.core.layout import Layout, LayoutBuilder, counts, network_coords
from runner.plugin.measures import declare, hints, measures
from runner.studies.depth.measure import PAPER, DepthShape
from runner.studies.depth.resolve import Network
from runner.studies.depth.spec import DepthSpec


def segment_length(spec: DepthSpec) -> int:
    """Steps between durable points: ``checkpoint_every`` or about 1% of the run (>= 1000 steps)."""
    base = spec.stride_lcm()
    if spec.dynamics.checkpoint_every:  # a multiple of base (checked by the spec)
        return spec.dynamics.checkpoint_every
    target = min(spec.dynamics.steps, max(1000, spec.dynamics.steps // 100))
    return base * max(1, round(target / base))


def build_layout(spec: DepthSpec, networks: list[Network], texts: list[str] | None = None,
                 origins: list[str] | None = None, scores: list[float] | None = None) -> Layout:
    S, T = spec.input.samples, spec.dynamics.steps
    registry = measures("depth")
    b = LayoutBuilder(segment=segment_length(spec), reference=PAPER)
    network_coords(b, [n.label for n in networks], [n.model_label for n in networks], [n.replicate for n in networks])
    b.coord("precision", [n.precision for n in networks], ("network",), long_name="floating-point precision")
    if any(n.revision is not None for n in networks):  # checkpoint series: depth as time against training as time
        b.coord("series", [n.model.name for n in networks], ("network",), long_name="[[model]] entry of the checkpoint")
        b.coord("revision", [n.revision or "" for n in networks], ("network",), long_name="checkpoint of the series")
        b.coord("training_step", np.array([np.nan if n.training_step is None else n.training_step for n in networks],
                                          dtype=np.float64),
                ("network",), long_name="training step of the checkpoint (NaN: not a series)", **counts("steps"))
    b.index("sample", S, long_name="input sample")  # lazy: sizes are checked before anything is allocated
    if spec.text_models:
        b.coord("token", np.arange(spec.input.tokens), long_name="token position")
        for name, values, what in (("text", texts, "input text"), ("origin", origins, "where the text was drawn from")):
            if values is None:
                b.index(name, S, ("sample",), value="", long_name=what)
            else:
                b.coord(name, values, ("sample",), long_name=what)
        if scores is not None:  # sentence pairs ([input] score)
            b.coord("score", np.asarray(scores, dtype=np.float64), ("sample",),
                    long_name="annotated score of the sentence pair")
        b.var("input_ids", "inputs", ("sample", "token"), "int64", -1, "token id", None,
              "ids of the exactly-N_w-token input given to every text model (one tokenizer per experiment)",
              coverage_content_type="auxiliaryInformation")
        if any(registry[m.kind].tags.timing == "step" and registry[m.kind].tags.step.input_masking for m in spec.measure):
            b.var("input_masked", "inputs", ("sample", "token"), "int8", -1, "token replaced by [MASK]", None,
                  "1 where the input token was replaced by the tokenizer's mask token in x_0 of every text model "
                  "(the masking of an MLM readout; input_ids keep the original tokens, the labels), 0 elsewhere",
                  coverage_content_type="auxiliaryInformation")
    b.var("diverged_step", "*", ("network", "sample"), "float64", np.nan, "first non-finite step t (steps)", "1",
          "first step t at which the state held NaN or Inf, or its D(t) overflowed (NaN: never); later values of "
          "that sample are NaN", **hints(headline=("diverged samples", "count_finite")))
    if spec.dynamics.early_exit:
        b.var("exit_step", "*", ("network", "sample"), "float64", np.nan, "early-exit step s (steps)", "1",
              "step s at which the sample left f's batch: its state (x and its twins) had repeated bit for bit, and "
              "its values from s on were replayed from that cycle, equal to a full run's (NaN: never)",
              **hints(headline=("exited samples", "count_finite")))
        b.var("exit_period", "*", ("network", "sample"), "float64", np.nan, "period of x_t at exit (steps)", "1",
              "least p with x_{t+p} = x_t bit for bit once the sample exited (1: a fixed point; NaN: never exited)")
    if spec.dynamics.reduction():
        b.var("reduced_step", "*", ("network", "sample"), "float64", np.nan, "reduced from step t (steps)", "1",
              "step t from which the sample (x and its twins) ran as one token, broadcast: its tokens had "
              "synchronised (relative spread sqrt(D(t)) below [dynamics] reduce_tolerance unit roundoffs) and a "
              "perturbation across its tokens shrank (transverse stability); NaN: never (a map that does not treat "
              "tokens alike, a masked sample, one not synchronised, or refused by the guard)",
              **hints(headline=("reduced samples", "count_finite")))
        b.var("reduce_refused_step", "*", ("network", "sample"), "float64", np.nan,
              "reduction refused at step t (steps)", "1",
              "step t at which the guard found a perturbation across the sample's synchronised tokens growing "
              "(transverse instability, Pecora & Carroll 1998) at its entry or while reduced; the sample runs at "
              "full width from t on (NaN: never)", **hints(headline=("reduction refused", "count_finite")))
    shape = DepthShape(T, S, spec.input.tokens, bool(spec.text_models), max([n.n_heads for n in networks] + [1]),
                  any(n.precision == "fp64" for n in networks), tuple(n.label for n in networks))
    registry = measures("depth")
    for m in spec.measure:
        declare(registry[m.kind](m), b, shape)
    return b.build()


def maskings(spec: DepthSpec) -> list[list]:
    """[kind, masking parameters] of each measure of the spec that reads masked sentences."""
    registry = measures("depth")
    out = []
    for m in spec.measure:
        if registry[m.kind].tags.timing == "step":
            masking = registry[m.kind].tags.step.masking(m)
            if masking is not None:
                out.append([m.kind, masking])
    return out
