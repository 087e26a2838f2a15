"""SVCCA, PWCCA and linear CKA of layer activations (Saphra 2021, Ch. 4 Figs. 3-5, 8-11).

It reads activations only (:class:`~runner.checkpointed.measure.ActivationContext`), so every study
that takes the kit offers it: each checkpoint's activations against the network's last checkpoint's,
a reference network's (another seed, a tagger) or layer against layer. The layers it compares by
default are its study's (``takes(..., roles={"layers": ...})``)."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from analyses.cca import linear_cka, pwcca, svcca
from runner.checkpointed.measure import KIT, ActivationContext, ActivationView
from runner.plugin.measures import CheckpointTags, MeasureParams, MeasureTags, Suites, hints
from runner.plugin.timings import CheckpointMeasure

PAPER = "Saphra 2021, Training dynamics of neural language models (PhD thesis, Edinburgh), Ch. 4 and 6"

STATISTICS = {"svcca": "SVCCA mean canonical correlation (Raghu et al. 2017)",
              "pwcca": "projection-weighted CCA (Morcos et al. 2018)",
              "cka": "linear centred kernel alignment (Kornblith et al. 2019)"}


class Params(MeasureParams):
    """SVCCA, PWCCA and linear CKA of layer activations on the analysis tokens (Ch. 4 Figs. 3-5, 8-11)."""

    kind: Literal["svcca"]
    networks: list[str] = Field(default_factory=list)
    """Networks measured (default: those the study measures by default)."""
    compare: Literal["final", "seed", "layers", "tagger"] = "final"
    """``final``: each checkpoint vs the network's last one; ``seed``: vs ``reference`` (another LM
    with another seed) at the same checkpoint; ``layers``: every layer vs every layer at each
    checkpoint; ``tagger``: each LM layer vs the ``reference`` tagger's representation (the layer its
    study compares a tagger by)."""
    reference: list[str] = Field(default_factory=list)
    """Networks compared with (``seed``: one other LM; ``tagger``: the taggers)."""
    layers: list[str] = Field(default_factory=list)
    """Layers compared (default: the study's; a study without one asks for them)."""
    keep_variance: float = Field(0.99, gt=0, le=1)
    """Variance kept by the SVD step (Raghu et al.: 0.99)."""


def _similarities(x, y, keep: float) -> tuple[float, float, float]:
    return (float(svcca(x, y, keep).mean), float(pwcca(x, y)), float(linear_cka(x, y)))


class SVCCA(CheckpointMeasure, study=KIT, reference=PAPER, params=Params,
            tags=MeasureTags("checkpoint", variant="compare", checkpoint=CheckpointTags(
                suites=Suites(), networks="networks", references="reference", layers="layers"))):
    def problems(self, view: ActivationView) -> list[tuple[tuple, str]]:
        compare = self.p.compare
        if compare in ("seed", "tagger") and not view.references:
            return [(("compare",), f"compare = {compare!r} needs reference networks (other seeds, taggers), "
                     "which this spec's networks cannot have; compare a network with its own final checkpoint "
                     "('final') or its layers ('layers')")]
        unknown = super().problems(view)
        if unknown:
            return unknown
        if compare in ("seed", "tagger"):
            if not self.p.reference:
                return [(("reference",), f"compare = {compare!r} needs reference networks")]
            want = "lm" if compare == "seed" else "tagger"
            kinds = dict(view.kinds)
            wrong = [r for r in self.p.reference if kinds.get(r, want) != want]
            if wrong:
                return [(("reference",), f"references of compare = {compare!r} must be "
                         f"{'language models' if want == 'lm' else 'taggers'}; not {wrong}")]
        if not self.p.layers:
            return [(("layers",), "name the layers to compare: embedding, layer1 .. layerL (this study has no "
                     "default)")]
        bad = [x for x in self.p.layers if x not in view.layers] if view.layers is not None else []
        if bad:
            return [(("layers",), f"no network has layer(s) {bad}; the deepest has {', '.join(view.layers)}")]
        return []

    def needs(self, n, c, last, refs):
        return {"final": [(n, c), (n, last)], "seed": [(n, c)] + [(r, c) for r in refs],
                "layers": [(n, c)], "tagger": [(n, c)] + [(r, c) for r in refs]}[self.p.compare]

    def variables(self, b, shape) -> None:
        p = self.p
        if p.compare in ("final", "seed"):
            dims = ("network", "checkpoint", "layer")
            what = "the same network's final checkpoint" if p.compare == "final" else \
                f"the reference LM(s) {p.reference} at the same checkpoint"
        elif p.compare == "layers":
            b.coord("layer_other", shape.layers, long_name="layer compared with")
            dims = ("network", "checkpoint", "layer", "layer_other")
            what = "layer_other of the same checkpoint"
        else:
            b.coord("tagger", p.reference, long_name="tagger compared with")
            b.coord("tagger_network", np.array([shape.names.index(r) for r in p.reference]), ("tagger",),
                    long_name="network index of the tagger")
            dims = ("network", "checkpoint", "tagger", "layer")
            what = "the tagger's representation at the same checkpoint"
        for k, (stat, desc) in enumerate(STATISTICS.items()):
            extra = hints(plot="curve", order=3 + k if p.compare == "final" else 20) if len(dims) == 3 else {}
            if (stat, p.compare) == ("svcca", "final"):
                extra = {**extra, **hints(headline=("SVCCA first vs final ckpt", "first_mean"))}
            b.var(f"{stat}_{p.compare}", "svcca", dims, "float64", np.nan, f"{stat.upper()} vs {p.compare}", "1",
                  f"{desc} of the layer's activations on the analysis tokens against {what}",
                  keep_variance=p.keep_variance, **extra)

    def run(self, ctx: ActivationContext, task) -> None:
        p = self.p
        n, c = task.network, task.checkpoint
        li = ctx.layer_index()
        acts = ctx.activations(n, c)
        names = ctx.names
        L = len(li)
        if p.compare in ("final", "seed"):
            ref = ctx.activations(n, ctx.final(n)) if p.compare == "final" else \
                ctx.activations(names.index(p.reference[0]), c)
            out = np.full((3, L), np.nan)
            for layer in p.layers:
                if layer in acts:  # a shallower network lacks the deepest layers: NaN
                    out[:, li[layer]] = _similarities(acts[layer], ref[layer], p.keep_variance)
        elif p.compare == "layers":
            out = np.full((3, L, L), np.nan)
            for a in p.layers:
                for b in p.layers:
                    if a in acts and b in acts:
                        out[:, li[a], li[b]] = _similarities(acts[a], acts[b], p.keep_variance)
        else:
            out = np.full((3, len(p.reference), L), np.nan)
            for k, r in enumerate(p.reference):
                tagger = ctx.activations(names.index(r), c)[ctx.reference_layer(names.index(r))]
                for layer in p.layers:
                    out[:, k, li[layer]] = _similarities(acts[layer], tagger, p.keep_variance)
        for s, stat in enumerate(("svcca", "pwcca", "cka")):
            ctx.write(f"{stat}_{p.compare}", task, out[s])
