"""The store of a training study: networks, checkpoints, curves, the vocabulary, and each measure's variables.

Dimensions: ``network`` (labels; ``model``, ``replicate``, ``network_kind``, ``seed``,
``tagset_of_network``, ``tagger_mode``, ``shuffled``), ``checkpoint`` (``step``, ``epoch``),
``layer``, ``train_step`` and ``training_epoch`` (curves), ``vocab`` (word frequencies), and the
measures' own (``word``, ``tagset``, ``quantity``, ...). Chunks: one (network, checkpoint) cell
for measures (each measure task owns its cell), one network for the curves (the training task).
"""

from __future__ import annotations

import numpy as np

from runner.checkpointed.axes import UNIT, declare_axes, declare_checkpoint_path, declare_curve, declare_train_loss
from runner.studies.training.data.corpus import Corpus
from runner.core.layout import Layout, LayoutBuilder, counts, network_coords
from runner.plugin.measures import declare, hints, measures
from runner.studies.training.context import sentence_words
from runner.studies.training.measure import PAPER, TrainingShape
from runner.studies.training.spec import TrainingStudySpec


def layer_names(num_layers: int) -> list[str]:
    return ["embedding"] + [f"lstm{i + 1}" for i in range(num_layers)] + ["logits"]


def build_layout(study: TrainingStudySpec, steps: list[int], steps_per_epoch: int, corpus: Corpus,
                 suites=None) -> Layout:
    """The store of a training spec; ``suites`` (:class:`~.suite.Suites`): a spec of checkpoint suites, whose
    checkpoints are revisions (``revision``, ``step``; no epochs, no training curves)."""
    if suites is not None:
        return _suite_layout(study, suites, corpus)
    nets = study.model
    b = LayoutBuilder(segment=steps_per_epoch, reference=PAPER, unit=UNIT)
    coord, var = b.coord, b.var
    network_coords(b, [n.name for n in nets], [n.name for n in nets], [0] * len(nets))
    coord("network_kind", [n.kind for n in nets], ("network",), long_name="lm or tagger")
    coord("seed", np.array([study.network_seed(i) for i in range(len(nets))]), ("network",),
          long_name="initialisation and dropout seed")
    coord("tagset_of_network", [n.tagset or "" for n in nets], ("network",), long_name="tag set a tagger predicts")
    coord("tagger_mode", [n.mode if n.kind == "tagger" else "" for n in nets], ("network",),
          long_name="tagger mode: tag_predictor or input_tagger ('' for a language model)")
    coord("shuffled", np.array([n.shuffled for n in nets]), ("network",), long_name="trained on shuffled labels")
    if corpus.variants:  # scaffold corpora: which one each network trained on, and its settings
        coord("corpus_variant", [n.corpus_variant or "" for n in nets], ("network",),
              long_name="training corpus of the network")
        first = next(iter(corpus.variants.values()))
        for key in first.coords:
            coord(key, np.array([corpus.variants[n.corpus_variant].coords[key] for n in nets]), ("network",),
                  long_name=key.replace("_", " "))
    layers = layer_names(study.training.num_layers)
    declare_axes(b, steps, steps_per_epoch, study.training.epochs, layers, log_every=study.training.log_every)
    _vocabulary(b, corpus)

    declare_checkpoint_path(b, "safetensors file of the weights, relative to the store's parent folder ('' while "
                               "not saved)")
    declare_train_loss(b, "token", "mean cross entropy of the batch at this step (dropout on)", "val_loss")
    declare_curve(b, "learning_rate", "step", "learning rate", "1",
                  "SGD rate at this step; divided by lr_decay after an epoch whose validation loss did not improve",
                  20, lr=study.training.lr, lr_decay=study.training.lr_decay)
    declare_curve(b, "val_loss", "epoch", "validation loss (nats per token)", "1",
                  "mean cross entropy on the validation split after the epoch (dropout off)", 1)
    var("val_perplexity", "train", ("network", "training_epoch"), "float32", np.nan, "validation perplexity", "1",
        "exp(val_loss)", **hints(plot="curve", order=2, headline=("final val perplexity", "last")))
    declare_curve(b, "epoch_train_loss", "epoch", "mean training loss (nats per token)", "1",
                  "mean over the epoch's batches", 20)
    declare_curve(b, "epoch_learning_rate", "epoch", "learning rate", "1", "rate used during the epoch", 20)
    var("word_frequency", "corpus", ("vocab",), "float64", np.nan, "word frequency (tokens)", "1",
        "count in the training split (<unk> sums the words folded into it)",
        coverage_content_type="auxiliaryInformation")
    var("word_class", "corpus", ("vocab",), str, "", "POS class", None,
        "open or closed class of the word's majority UPOS in training (UD), other, or '' when untagged",
        coverage_content_type="auxiliaryInformation")

    shape = TrainingShape(layers, study.training.num_layers, [n.name for n in nets], corpus,
                  [n.corpus_variant for n in nets], sentence_words(study, corpus))
    _measures(b, study, shape)
    return b.build()


def _vocabulary(b: LayoutBuilder, corpus: Corpus) -> None:
    b.coord("vocab", np.arange(len(corpus.vocab)), long_name="word id")
    b.coord("vocab_word", list(corpus.vocab.itos), ("vocab",), long_name="word")


def _suite_layout(study: TrainingStudySpec, suites, corpus: Corpus) -> Layout:
    nets = study.model
    b = LayoutBuilder(segment=1, reference=PAPER, unit=UNIT)
    network_coords(b, [n.name for n in nets], [n.model for n in nets], [n.replicate for n in nets])
    b.coord("network_kind", [n.kind for n in nets], ("network",), long_name="suite: a published checkpoint series")
    b.coord("source", [s[0].source for s in suites.series], ("network",), long_name="hub id or local directory")
    b.coord("checkpoint", np.arange(len(suites.steps)), long_name="checkpoint index")
    b.coord("step", np.asarray(suites.steps, dtype=np.int64), ("checkpoint",), long_name="training step",
            **counts("steps"))
    b.coord("epoch", np.full(len(suites.steps), np.nan), ("checkpoint",), long_name="epoch (unknown for a suite)",
            **counts("epochs"))
    b.coord("revision", [c.revision for c in suites.series[0]], ("checkpoint",),
            long_name="revision of the first network (hub branch or folder)")
    b.coord("layer", suites.layers, long_name="layer whose output is measured")
    _vocabulary(b, corpus)
    b.var("word_frequency", "corpus", ("vocab",), "float64", np.nan, "word frequency (tokens)", "1",
          "count in the training split of [corpus] (<unk> sums the words folded into it)",
          coverage_content_type="auxiliaryInformation")
    b.var("word_class", "corpus", ("vocab",), str, "", "POS class", None,
          "open or closed class of the word's majority UPOS in training (UD), other, or '' when untagged",
          coverage_content_type="auxiliaryInformation")
    _measures(b, study, TrainingShape(suites.layers, len(suites.layers) - 1, [n.name for n in nets], corpus,
                              [None] * len(nets), sentence_words(study, corpus)))
    return b.build()


def _measures(b: LayoutBuilder, study: TrainingStudySpec, shape: TrainingShape) -> None:
    registry = measures("training")
    for m in study.measure:
        declare(registry[m.kind](m), b, shape)
