"""A TransJect layer as a map: the random-init and the saved-checkpoint paths, and its Lipschitz
bound seen by the depth study's Lyapunov exponent (through the real CLI)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import xarray as xr
from safetensors.torch import save_file

from models.base import MapInputs
from models.registry import family_for
from models.transject import TransJect, TransJectConfig
from tests.runner.helpers import run_cli, write_spec


def _inputs(samples=3, seed=0):
    return MapInputs(samples=samples, input_ids=None, attention_mask=None, generator=torch.Generator().manual_seed(seed))


def save_checkpoint(directory, variant="random-transject", **params):
    torch.manual_seed(1)
    config = {"vocab_size": 50, "n_classes": 3, "d_model": 16, "n_layers": 3, "n_experts": 2, **params}
    model = TransJect(TransJectConfig(**config, variant=variant))
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps({"variant": variant, "params": config}))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(directory / "model.safetensors"))
    return model


def test_a_saved_layer_iterates_as_the_encoder_applies_it(tmp_path):
    model = save_checkpoint(tmp_path / "ckpt").double().reorthogonalize()
    family = family_for(f"transject-layer:{tmp_path / 'ckpt'}")
    assert family.name == "transject-layer"
    assert family.dims(f"transject-layer:{tmp_path / 'ckpt'}", revision=None, params={"tokens": 5}, n_tokens=0).n_hidden == 16
    m = family.build(f"transject-layer:{tmp_path / 'ckpt'}", params={"layer": 1, "tokens": 5}, dtype=torch.float64)
    x0 = m.initial_state(_inputs())
    ids = torch.randint(50, (3, 5), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(x0, model.embed(ids))
    torch.testing.assert_close(m.step(x0), model.layer_map(1)(x0))


def test_a_variant_whose_sigma_depends_on_the_input_is_not_a_map(tmp_path):
    save_checkpoint(tmp_path / "approx", variant="transject")
    spec = write_spec(tmp_path, f"""
        [experiment]
        name = "approx"
        [[model]]
        name = "layer"
        source = "transject-layer:{tmp_path / 'approx'}"
        [input]
        samples = 4
        [dynamics]
        steps = 20
        [[measure]]
        kind = "lyapunov"
        """)
    out = run_cli("apply", spec, cwd=tmp_path)
    assert out.returncode in (65, 66) and "is not a map of the state alone" in out.stderr, out.stderr
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("alpha", [0.5, 0.9])
def test_the_local_exponent_stays_within_the_layer_lipschitz_bounds(tmp_path, alpha):
    """Theorem 2 per layer: (1 - a)^2 <= ratio <= (1 + a)^2, a = alpha / L, so lambda per step lies in
    [2 ln(1 - a), 2 ln(1 + a)] (30 steps, fp64, while the states stay well inside fp64's range)."""
    spec = write_spec(tmp_path, f"""
        [experiment]
        name = "bound"
        [[model]]
        name = "layer"
        source = "transject-layer:builtin"
        params = {{ tokens = 8, d_model = 32, n_layers = 2, alpha_init = {alpha} }}
        replicates = 2
        [input]
        samples = 16
        [dynamics]
        steps = 30
        precision = "fp64"
        [[measure]]
        kind = "lyapunov"
        k = 1e-6
        tau = 1
        """)
    out = run_cli("apply", spec, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lam = xr.open_zarr(tmp_path / "store/bound.zarr", consolidated=False)["lyapunov"].values.astype(np.float64)
    a = alpha / 2
    assert np.isfinite(lam).all()
    assert lam.max() <= 2 * math.log1p(a) + 1e-5 and lam.min() >= 2 * math.log1p(-a) - 1e-5
    assert lam.max() > 0.2 * 2 * math.log1p(a)  # the bound is approached, not met trivially
