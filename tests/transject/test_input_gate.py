"""TransJect with the authors' per-sample expert gate (``gate = "input"``) through the real CLI: it
trains, and the experts measure stores the mean of the examples' weights (convex, not uniform)."""

from __future__ import annotations

import subprocess

import numpy as np
import xarray as xr

from tests.transject.conftest import RUNNER, env


def test_input_gate_trains_and_its_expert_weights_are_stored(tmp_path):
    spec = tmp_path / "gate.toml"
    spec.write_text(f'''
[experiment]
name = "gate"
study = "transject"
seed = 0
store = "{tmp_path / 'gate.zarr'}"

[data]
source = "listops:"
listops = {{ train = 32, test = 16, max_depth = 2, max_args = 3, min_length = 4, max_length = 20 }}
max_length = 20
analysis_examples = 6

[training]
epochs = 1
batch_size = 16

[[model]]
name = "gated"
variant = "transject"
gate = "input"
d_model = 8
n_layers = 2
n_experts = 3

[[model]]
name = "learned"
variant = "transject"
d_model = 8
n_layers = 2
n_experts = 3

[[measure]]
kind = "experts"
''')
    res = subprocess.run([*RUNNER, "apply", "-q", str(spec)], cwd=tmp_path, env=env(), capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    ds = xr.open_zarr(tmp_path / "gate.zarr", consolidated=False)
    w = ds.expert_weight.sel(network="gated-s0").values  # (checkpoint, encoder_layer, expert)
    assert w.shape[1:] == (2, 3) and np.isfinite(w).all()
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-6)
    assert np.abs(w - 1 / 3).max() > 1e-4  # per-sample gates from a random init: not uniform
    learned = ds.expert_weight.sel(network="learned-s0").values
    np.testing.assert_allclose(learned[0], 1 / 3, rtol=1e-6)  # the paper's gate starts uniform
    assert "gate = 'input'" in ds.expert_weight.attrs["description"]
