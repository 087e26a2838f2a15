"""DI of word pairs by sequential and syntactic distance on a treebank (Saphra 2021, Ch. 5 paper Sec. 3,
Figs. 3-4): an LM of the study reads each parsed sentence (from a zero state, dropout off); every
pair within ``max_distance`` words gets DI_r({l}, {r}); means and counts are stored by sequential
distance, and by (sequential distance, syntactic distance, open/closed class of the two words)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from analyses.contextual_decomposition import lstm_weights
from analyses.syntactic_interdependence import aggregate, pair_interdependence
from runner.studies.training.data.treebank import ParsedSentence, load_treebank
from runner.studies.training.data.tagsets import CLOSED_CLASS, OPEN_CLASS
from runner.plugin.measures import CheckpointTags, MeasureTags, hints
from runner.plugin.timings import CheckpointMeasure
from runner.studies.training.measure import STUDY, TrainingParams

if TYPE_CHECKING:  # pragma: no cover
    from runner.studies.training.context import Context

CH5 = "Saphra 2021, Ch. 5 (Saphra & Lopez 2020), Sec. 3.1, Figs. 3-4"
CLASS_PAIRS = ("open-open", "open-closed", "closed-open", "closed-closed")


class Params(TrainingParams):
    """DI between word pairs by sequential and by syntactic distance on a dependency treebank (Ch. 5 Figs. 3-4)."""

    kind: Literal["syntax_interdependence"]
    treebank: str
    """A local CoNLL-U file (relative to the spec), e.g. UD English-EWT's ``en_ewt-ud-test.conllu``, or
    ``hf:<id>`` with the UD columns tokens, upos, head (paper: English-EWT)."""
    subset: str | None = None
    """Hub configuration (``hf:`` treebanks)."""
    split: str = "test"
    """Hub split (``hf:`` treebanks)."""
    sentences: int = Field(1000, ge=1)
    """First N sentences of the treebank that fit ``max_length`` (not in the paper)."""
    max_length: int = Field(40, ge=2)
    """Longer sentences are skipped (CD costs grow with the pairs; not in the paper)."""
    max_distance: int = Field(10, ge=1)
    """Largest sequential distance r - l measured."""
    max_syntactic: int = Field(10, ge=1)
    """Largest syntactic distance kept in the stratified table."""
    at: Literal["hidden", "logits"] = "hidden"
    """DI of the top LSTM layer's hidden state (default) or of the logits."""
    min_cases: int = Field(100, ge=1)
    """Figures plot a mean only over at least this many pairs (paper: 100)."""


@functools.lru_cache(maxsize=4)
def _treebank(source: str, base: str, subset: str | None, split: str) -> tuple[ParsedSentence, ...]:
    return tuple(load_treebank(source, Path(base), subset, split))


def _word_class(upos: str) -> str:
    return "open" if upos in OPEN_CLASS else "closed" if upos in CLOSED_CLASS else "other"


class SyntaxInterdependence(CheckpointMeasure, study=STUDY, reference=CH5, params=Params,
                            tags=MeasureTags("checkpoint", requires=("text",), checkpoint=CheckpointTags(
                                networks="networks", data=("treebank", "subset", "split")))):
    example = {"treebank": "en_ewt-ud-test.conllu"}  # for check_measure: the paper's treebank

    def variables(self, b, shape) -> None:
        p = self.p
        seq = b.coord("seq_distance", np.arange(1, p.max_distance + 1), long_name="sequential distance r - l (words)",
                      units="1")
        syn = b.coord("syn_distance", np.arange(1, p.max_syntactic + 1),
                      long_name="syntactic distance (edges)", units="1")
        pair = b.coord("pos_pair", list(CLASS_PAIRS), long_name="open/closed class of the left and right word")
        base = ("network", "checkpoint", seq)
        formula = "DI_r({l}, {r}) = ||h_lr - (h_l + h_r)|| / ||h_lr|| (Ch. 5 Eq. 2) of word pairs of the treebank"
        b.var("di_sequential", "syntax_interdependence", base, "float64", np.nan, "mean DI of word pairs", "1",
              f"mean {formula}, by sequential distance (Fig. 3)", treebank=p.treebank, at=p.at,
              min_cases=p.min_cases, **hints(plot="curve", order=33))
        b.var("di_sequential_count", "syntax_interdependence", base, "float64", np.nan, "word pairs averaged", "1",
              "number of pairs in di_sequential's mean")
        b.var("di_syntactic", "syntax_interdependence", base + (syn, pair), "float64", np.nan, "mean DI of word pairs",
              "1", f"mean {formula}, by sequential distance, syntactic distance and open/closed class (Fig. 4)",
              treebank=p.treebank, at=p.at, min_cases=p.min_cases)
        b.var("di_syntactic_count", "syntax_interdependence", base + (syn, pair), "float64", np.nan,
              "word pairs averaged", "1", "number of pairs in di_syntactic's mean")

    def run(self, ctx: Context, task) -> None:
        p = self.p
        sents = _treebank(p.treebank, str(getattr(ctx, "base", ".")), p.subset, p.split)
        sents = [s for s in sents if len(s.words) <= p.max_length][: p.sentences]
        vocab, lower = ctx.corpus.vocab, ctx.study.corpus.lowercase
        weights = lstm_weights(ctx.model(task.network, task.checkpoint))
        pairs, classes = [], []
        for s in sents:
            ids = vocab.encode([w.lower() if lower else w for w in s.words])
            pairs.append(pair_interdependence(ids, s.heads, max_distance=p.max_distance, weights=weights, at=p.at))
            classes.append([_word_class(u) for u in s.upos])
        agg = aggregate(pairs, classes, max_distance=p.max_distance, max_syntactic=p.max_syntactic,
                        class_pairs=CLASS_PAIRS)
        with np.errstate(invalid="ignore", divide="ignore"):
            ctx.write("di_sequential", task, np.where(agg["seq_count"] > 0, agg["seq_sum"] / agg["seq_count"], np.nan))
            ctx.write("di_syntactic", task, np.where(agg["syn_count"] > 0, agg["syn_sum"] / agg["syn_count"], np.nan))
        ctx.write("di_sequential_count", task, agg["seq_count"].astype(np.float64))
        ctx.write("di_syntactic_count", task, agg["syn_count"].astype(np.float64))
