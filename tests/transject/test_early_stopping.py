"""Early stopping on the test loss (App. B: patience 4): the later checkpoints never come, their
measure cells stay NaN, every task finishes, and the kept accuracy is the best epoch's."""

from __future__ import annotations

import numpy as np
import xarray as xr

from runner.run.apply import apply
from runner.run.prepare import prepare
from runner.studies.transject import estimate as _estimate  # noqa: F401  (imported before the patch below: a
from runner.studies.transject import train as train_module  # module first imported under it would keep the fake)

from .conftest import TINY


def test_training_stops_after_patience_epochs_without_improvement(tmp_path, monkeypatch):
    text = TINY.read_text().replace('seed = 0\n', f'seed = 0\nstore = "{tmp_path / "es.zarr"}"\n', 1)
    text = text.replace("epochs = 3", "epochs = 6").replace("patience = 4", "patience = 2")
    text = text[: text.index("[[model]]")] + """
[[model]]
name = "transject"
seeds = [0]
d_model = 16
n_layers = 2
n_experts = 2

[[measure]]
kind = "entropy"
"""
    spec = tmp_path / "es.toml"
    spec.write_text(text)
    calls = []

    def fake_evaluate(model, data, batch_size, device, seed):  # the test loss rises after epoch 2
        calls.append(1)
        return [0.9, 0.5, 0.7, 0.8, 0.1, 0.1][len(calls) - 1], [0.1, 0.6, 0.2, 0.3, 0.9, 0.9][len(calls) - 1]

    monkeypatch.setattr(train_module, "evaluate", fake_evaluate)
    out = apply(prepare(spec), quiet=True)
    assert not out.failed and len(out.ran) == 1 + 7 and len(calls) == 4
    ds = xr.open_zarr(tmp_path / "es.zarr", consolidated=False)
    assert int(ds.stopped_epoch[0]) == 4 and int(ds.best_epoch[0]) == 2
    assert float(ds.accuracy[0]) == 0.6 and float(ds.final_test_loss[0]) == 0.5
    np.testing.assert_allclose(ds.test_loss.values[0, :4], [0.9, 0.5, 0.7, 0.8])
    assert np.isnan(ds.test_loss.values[0, 4:]).all()
    assert list(ds.checkpoint_path.values[0] != "") == [True] * 5 + [False] * 2
    ent = ds.layer_entropy.values[0]
    assert np.isfinite(ent[:5]).all() and np.isnan(ent[5:]).all()
    again = apply(prepare(spec), quiet=True)
    assert not again.ran and not again.failed
