"""The fine-tuned-network setting of STS-B (Inoue et al. 2021, Fig. 3B dashed): f and a readout of
x_t trained together, one task per network, on the builtin tiny ALBERT and a local pair file."""

from __future__ import annotations

import numpy as np
import torch
import xarray as xr

from analyses.sts import finetune_readout, minibatch_orders, pearson, readout_predictions, train_linear_readouts
from tests.runner.helpers import write_spec
from tests.runner.pairs import write_pairs

SPEC = """
[experiment]
name = "finetune"
store = "{store}"
seed = 0

[[model]]
name = "pretrained"
source = "builtin:tiny-albert"

[[model]]
name = "logistic"
source = "map:logistic"

[input]
source = "pairs.tsv"
pair = ["sentence1", "sentence2"]
score = "label"
samples = 40
tokens = 16

[dynamics]
steps = 4

[[measure]]
kind = "sts_readout"

[[measure]]
kind = "sts_finetune"
steps = [2, 4]
lr = {lr}
readout_lr = 1e-3
"""


def _apply(in_process, tmp_path, lr):
    write_pairs(tmp_path / "pairs.tsv")
    store = tmp_path / f"lr{lr}.zarr"
    spec = write_spec(tmp_path, SPEC.format(store=store, lr=lr), f"lr{lr}.toml")
    code, out, err = in_process("plan", spec)
    assert code == 0 and "sts_finetune" in out, err
    code, _, err = in_process("apply", "-q", spec)
    assert code == 0, err
    return xr.open_zarr(store, consolidated=False)


def test_with_f_frozen_it_is_the_fixed_readout_and_tuning_f_changes_it_and_is_drawn(in_process, tmp_path):
    frozen = _apply(in_process, tmp_path, 0.0)
    r = frozen["sts_finetuned_pearson"].sel(network="pretrained").values
    fixed = frozen["sts_pearson"].sel(network="pretrained", sts_step=[2, 4]).values
    assert np.isfinite(r).all()
    # the same readout, trained on x_t recomputed per minibatch instead of taken from the pass
    np.testing.assert_allclose(r, fixed, rtol=1e-4, atol=1e-5)
    assert np.isnan(frozen["sts_finetuned_pearson"].sel(network="logistic").values).all()  # maps: no STS-B
    ds = _apply(in_process, tmp_path, 1e-3)
    tuned = ds["sts_finetuned_pearson"].sel(network="pretrained").values
    assert np.isfinite(tuned).all() and not np.allclose(tuned, r, rtol=1e-4)

    from runner.plugin.recipes import recipes  # Fig. 3B draws the fine-tuned network dashed

    ax = recipes("depth")["fig3b"].draw(ds).axes[0]
    (line,) = [x for x in ax.get_lines() if x.get_gid() == "sts_finetuned_pearson:pretrained"]
    assert line.get_linestyle() == "--"
    np.testing.assert_array_equal(line.get_xdata(), [2, 4])
    np.testing.assert_array_equal(line.get_ydata(), tuned)


def test_finetuning_a_linear_map_fits_a_score_the_fixed_readout_cannot():
    """f(x) = W x with W trainable: a target that needs the second coordinate, which a fixed W = 0
    erases, is learnt once W is tuned (and not while it is frozen)."""
    gen = torch.Generator().manual_seed(0)
    x0 = torch.randn(200, 1, 2, generator=gen, dtype=torch.float64)
    y = x0[:, 0, 1] * 3.0
    f = torch.nn.Linear(2, 2, bias=False).double()
    with torch.no_grad():
        f.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 0.0]]))
    orders = minibatch_orders(160, 30, 0)
    frozen = finetune_readout(f, x0, y, 1, n_train=160, epochs=30, lr=0.0, readout_lr=5e-2, orders=orders)
    # lr = 0 is the fixed readout of x_1 = f(x_0)
    with torch.no_grad():
        x1 = f(x0)[:, 0][None]
    w = train_linear_readouts(x1[:, :160], y[:160], epochs=30, lr=5e-2, orders=orders)
    assert torch.allclose(frozen, pearson(readout_predictions(w, x1[:, 160:]), y[160:]))
    assert abs(float(frozen)) < 0.3
    tuned = finetune_readout(f, x0, y, 1, n_train=160, epochs=30, lr=5e-2, orders=orders)
    assert float(tuned) > 0.99

