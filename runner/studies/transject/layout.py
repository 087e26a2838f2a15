"""The store of a TransJect study: networks, epoch checkpoints, curves, and each measure's variables.

Dimensions: ``network`` (labels ``<model>-s<seed>``; ``model``, ``replicate``, ``seed``,
``variant``, ``trained``), ``checkpoint`` (the epoch whose end it is, 0: initialisation; ``epoch``,
``step``), ``train_step`` and ``training_epoch`` (curves), ``layer`` (``embedding`` = X^(0),
``layer1`` .. ``layerL``), and the measures' own (``quantile``, ``pair``, ``encoder_layer``,
``expert``, ``token``, ``component``). A network measured from a saved checkpoint has only
checkpoint 0 (its weights). Chunks: one (network, checkpoint) cell for measures, one network for
the curves.
"""

from __future__ import annotations

import numpy as np

from runner.checkpointed.axes import UNIT, declare_axes, declare_checkpoint_path, declare_curve, declare_train_loss
from runner.core.layout import Layout, LayoutBuilder, network_coords
from runner.plugin.measures import declare, hints
from runner.studies.transject.measure import PAPER, TransJectShape


def build_layout(spec, nets: list[dict], spe: int, shape: TransJectShape, registrations: dict) -> Layout:
    b = LayoutBuilder(segment=max(spe, 1), reference=PAPER, unit=UNIT)
    coord, var = b.coord, b.var
    network_coords(b, [n.label for n in nets], [n.model for n in nets], [n.replicate for n in nets])
    coord("seed", np.array([n.seed for n in nets], dtype=np.int64), ("network",), long_name="initialisation seed")
    coord("variant", [n.variant for n in nets], ("network",), long_name="architecture (Table 1 row or baseline)")
    coord("trained", np.array([n.trained for n in nets]), ("network",),
          long_name="trained here (false: measured from a saved checkpoint)")
    E = spec.training.epochs
    declare_axes(b, [e * spe for e in range(E + 1)], spe, E, shape.layers,
                 checkpoint_meaning="checkpoint: the end of this epoch (0: initialisation)", epoch_meaning="epoch",
                 layer_meaning="layer whose output is measured (embedding: X^(0))")
    declare_checkpoint_path(b, "weights after the epoch, relative to the store's parent folder ('' while not saved "
                               "or after an early stop)")
    declare_train_loss(b, "example", "cross entropy of the batch at this step (Fig. 4)", "test_loss")
    declare_curve(b, "test_loss", "epoch", "test loss (nats per example)", "1",
                  "mean cross entropy on the test split after the epoch (Fig. 4; early stopping watches it)", 1)
    declare_curve(b, "test_accuracy", "epoch", "test accuracy", "1",
                  "share of test examples classified correctly after the epoch", 2)
    var("accuracy", "train", ("network",), "float64", np.nan, "test accuracy (Tables 2-3)", "1",
        "test accuracy of the epoch with the lowest test loss (early stopping, patience epochs later); "
        "of the weights themselves for a saved checkpoint",
        **hints(headline=("test accuracy", "value"), table="test accuracy, mean ± s.d. over seeds (Tables 2-3)"))
    var("final_test_loss", "train", ("network",), "float64", np.nan, "test loss of the kept weights (nats per example)",
        "1", "the lowest test loss over the epochs (a saved checkpoint: its test loss)")
    var("best_epoch", "train", ("network",), "float64", np.nan, "epoch with the lowest test loss (epochs)", "1",
        "NaN while training or for a saved checkpoint")
    var("stopped_epoch", "train", ("network",), "float64", np.nan, "epochs trained", "1",
        "fewer than [training] epochs after an early stop; NaN while training")
    var("export_path", "train", ("network",), str, "", "exported weights", None,
        "directory with config.json, model.safetensors and vocab.json of the kept epoch (a [[model]] checkpoint "
        "reads it), relative to the store's parent folder")
    for m in spec.measure:
        declare(registrations[m.kind], b, shape)
    return b.build()
