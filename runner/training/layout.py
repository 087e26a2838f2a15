"""The store's shape for a training study (reuses :class:`runner.layout.Coord`/``Var``/``Layout``).

Dimensions: ``network`` (coordinates ``network_name``, ``network_kind``, ``seed``, ``tagset``,
``tagger_mode``, ``shuffled``), ``checkpoint`` (coordinates ``step`` and ``epoch``), ``layer``,
``train_step`` and ``training_epoch`` (curves), ``vocab`` (word frequencies), ``word`` (the
frequent words of the sparsity matrix), ``tagset``, and small label dims (``quantity``,
``word_class``, ``tag_target``, ``layer_other``, ``tagger``, ``parameter_group``).

Chunks: one (network, checkpoint) cell per chunk for measures (each measure task owns its cell),
one network per chunk for the curves and the checkpoint list (written by the training task).
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from runner.layout import Coord, Layout, Var
from runner.data.corpus import Corpus
from runner.training.plan import TrainingPlan
from runner.training.spec import SVCCA

PAPER = "Saphra 2021, Training dynamics of neural language models (PhD thesis, Edinburgh), Ch. 4 and 6"
STATISTICS = {"svcca": "SVCCA mean canonical correlation (Raghu et al. 2017)",
              "pwcca": "projection-weighted CCA (Morcos et al. 2018)",
              "cka": "linear centred kernel alignment (Kornblith et al. 2019)"}


class _Var(Var):
    """A Var whose signature hashes string coordinates by value (object arrays' bytes are pointers)."""

    def signature(self, coords: dict[str, Coord]) -> str:
        h = hashlib.sha256(json.dumps([self.dims, self.shape, self.chunks, str(self.dtype)]).encode())
        for d in self.dims:
            if d in coords:
                v = coords[d].values
                h.update("\x00".join(map(str, v)).encode() if v.dtype == object else np.ascontiguousarray(v).tobytes())
        return h.hexdigest()[:16]


def layer_names(num_layers: int) -> list[str]:
    return ["embedding"] + [f"lstm{i + 1}" for i in range(num_layers)] + ["logits"]


def frequent_words(corpus: Corpus, n: int) -> np.ndarray:
    """Ids of the ``n`` most frequent training words (specials excluded)."""
    freq = np.asarray(corpus.frequencies())
    order = [i for i in np.argsort(-freq, kind="stable") if corpus.vocab.itos[i] not in ("<unk>", "<eos>")]
    return np.asarray(order[:n], dtype=np.int64)


def build_layout(plan: TrainingPlan, corpus: Corpus) -> Layout:
    study = plan.study
    nets = study.network
    coords: dict[str, Coord] = {}
    vars: dict[str, Var] = {}

    def coord(name, values, dims=None, **attrs):
        values = np.asarray(values, dtype=object if len(values) and isinstance(values[0], str) else None)
        coords[name] = Coord(name, dims or (name,), values, attrs)

    def var(name, measure, dims, dtype, fill, long_name, units, description, **extra):
        shape = tuple(len(coords[d].values) for d in dims)
        per_cell = {"network", "checkpoint"}
        chunks = tuple(1 if d in per_cell else max(n, 1) for d, n in zip(dims, shape))
        attrs = {"long_name": long_name, "units": units, "description": description, "reference": PAPER, **extra}
        vars[name] = _Var(name, measure, dims, shape, chunks, dtype, fill, attrs)

    coord("network", np.arange(len(nets)), long_name="network index")
    coord("network_name", [n.name for n in nets], ("network",), long_name="network name")
    coord("network_kind", [n.kind for n in nets], ("network",), long_name="lm or tagger")
    coord("seed", np.array([study.network_seed(i) for i in range(len(nets))]), ("network",),
          long_name="initialisation and dropout seed")
    coord("tagset_of_network", [n.tagset or "" for n in nets], ("network",), long_name="tag set a tagger predicts")
    coord("tagger_mode", [n.mode if n.kind == "tagger" else "" for n in nets], ("network",))
    coord("shuffled", np.array([n.shuffled for n in nets]), ("network",), long_name="trained on shuffled labels")
    steps = np.asarray(plan.steps, dtype=np.int64)
    coord("checkpoint", np.arange(len(steps)), long_name="checkpoint index")
    coord("step", steps, ("checkpoint",), long_name="optimizer step", units="1")
    coord("epoch", steps / plan.steps_per_epoch, ("checkpoint",), long_name="epoch (fractional)", units="1")
    total = plan.steps_per_epoch * study.training.epochs
    every = study.training.log_every
    coord("train_step", np.arange(every, total + 1, every, dtype=np.int64), long_name="optimizer step", units="1")
    coord("training_epoch", np.arange(1, study.training.epochs + 1), long_name="epoch", units="1")
    layers = layer_names(study.training.num_layers)
    coord("layer", layers, long_name="layer whose output is measured")
    coord("vocab", np.arange(len(corpus.vocab)), long_name="word id")
    coord("vocab_word", list(corpus.vocab.itos), ("vocab",), long_name="word")

    var("checkpoint_path", "train", ("network", "checkpoint"), str, "", "checkpoint file", "1",
        "safetensors file of the weights, relative to the store's parent folder ('' while not saved)")
    var("train_loss", "train", ("network", "train_step"), "float32", np.nan, "training loss", "nat/token",
        "mean cross entropy of the batch at this step (dropout on)")
    var("learning_rate", "train", ("network", "train_step"), "float32", np.nan, "learning rate", "1",
        "SGD rate at this step; divided by lr_decay after an epoch whose validation loss did not improve",
        lr=study.training.lr, lr_decay=study.training.lr_decay)
    var("val_loss", "train", ("network", "training_epoch"), "float32", np.nan, "validation loss", "nat/token",
        "mean cross entropy on the validation split after the epoch (dropout off)")
    var("val_perplexity", "train", ("network", "training_epoch"), "float32", np.nan, "validation perplexity", "1",
        "exp(val_loss)")
    var("epoch_train_loss", "train", ("network", "training_epoch"), "float32", np.nan, "mean training loss", "nat/token",
        "mean over the epoch's batches")
    var("epoch_learning_rate", "train", ("network", "training_epoch"), "float32", np.nan, "learning rate", "1",
        "rate used during the epoch")
    var("word_frequency", "corpus", ("vocab",), "int64", -1, "word frequency", "1",
        "count in the training split (<unk> sums the words folded into it)")
    var("word_class", "corpus", ("vocab",), str, "", "POS class", "1",
        "open or closed class of the word's majority UPOS in training (UD), other, or '' when untagged")

    names = [n.name for n in nets]
    for m in study.measure:
        if isinstance(m, SVCCA):
            if m.compare in ("final", "seed"):
                dims = ("network", "checkpoint", "layer")
                what = "the same network's final checkpoint" if m.compare == "final" else \
                    f"the reference LM(s) {m.reference} at the same checkpoint"
            elif m.compare == "layers":
                coord("layer_other", layers, long_name="layer compared with")
                dims = ("network", "checkpoint", "layer", "layer_other")
                what = "layer_other of the same checkpoint"
            else:
                coord("tagger", m.reference, long_name="tagger compared with")
                coord("tagger_network", np.array([names.index(r) for r in m.reference]), ("tagger",))
                dims = ("network", "checkpoint", "tagger", "layer")
                what = "the tagger's LSTM layer at the same checkpoint"
            for stat, desc in STATISTICS.items():
                var(f"{stat}_{m.compare}", m.kind, dims, "float64", np.nan, f"{stat.upper()} vs {m.compare}", "1",
                    f"{desc} of the layer's activations on the analysis tokens against {what}",
                    keep_variance=m.keep_variance)
        elif m.kind == "sparsity":
            coord("quantity", ["activation", "gradient"], long_name="activation h or gradient dL/dh")
            coord("word_class_split", ["all", "open", "closed"], long_name="words entering the correlation")
            top = frequent_words(corpus, m.frequent_words)
            coord("word", [corpus.vocab.itos[i] for i in top], long_name="frequent word")
            coord("word_id", top, ("word",))
            coord("word_count", np.asarray(corpus.frequencies())[top], ("word",), long_name="training frequency")
            cell = ("network", "checkpoint", "quantity", "layer")
            var("chi_mean", m.kind, cell, "float64", np.nan, "mean sparsity chi", "1",
                "mean over analysis tokens of chi(v) = ||v||_2 / ||v||_1 (Ch. 6 Sec. 2)")
            for side, word in (("target", "x_t, the word predicted"), ("input", "x_{t-1}, the word read")):
                var(f"rho_{side}", m.kind, cell + ("word_class_split",), "float64", np.nan,
                    f"rho ({side} word)", "1",
                    f"Pearson r over words of mu_(t: {word} = w) chi and the word's training frequency (Fig. 3-4)",
                    min_count=m.min_count)
            var("chi_class_mean", m.kind, cell + ("word_class_split",), "float64", np.nan, "mean chi by POS class",
                "1", "mean chi over tokens whose target word is in the class")
            var("word_chi", m.kind, cell + ("word",), "float64", np.nan, "mean chi by target word", "1",
                "mu_(t: x_t = w) chi(v_t) for frequent words: the word x checkpoint matrix (Fig. 2)")
        elif m.kind == "diagnostic":
            coord("tagset", list(m.tagsets), long_name="tag set")
            coord("tag_target", ["current", "next"], long_name="tag of x_t or of x_{t+1}")
            dims = ("network", "checkpoint", "layer", "tagset", "tag_target")
            var("probe_accuracy", m.kind, dims, "float64", np.nan, "diagnostic classifier accuracy", "1",
                "held-out accuracy of softmax(W2 relu(W1 h + b1) + b2) predicting the tag (Ch. 4 Figs. 6-7)",
                epochs=m.epochs, lr=m.lr)
            var("probe_majority", m.kind, dims, "float64", np.nan, "majority-class accuracy", "1",
                "held-out accuracy of always predicting the most frequent tag (chance baseline)")
        elif m.kind == "lca":
            groups = ["embedding"] + [f"lstm{i + 1}" for i in range(study.training.num_layers)] + ["decoder"]
            coord("parameter_group", groups, long_name="layer whose parameters are allocated the loss change")
            var("lca", m.kind, ("network", "checkpoint", "parameter_group"), "float64", np.nan,
                "loss change allocation", "nat/token",
                "sum over the layer's parameters of g~_i (theta_c,i - theta_c-1,i), from the previous checkpoint "
                "(Lan et al. 2019; thesis Sec. 6.1.1.1); negative = the layer lowered the loss", rule=m.rule)
            var("loss_change", m.kind, ("network", "checkpoint"), "float64", np.nan, "loss change", "nat/token",
                "L(theta_c) - L(theta_c-1) on the analysis tokens (dropout off)")
    return Layout(coords, vars, segment=plan.steps_per_epoch)
