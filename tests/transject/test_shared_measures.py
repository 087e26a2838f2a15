"""SVCCA of the training study across TransJect's epochs (a measure on activations only,
runner/checkpointed/measure.py), from the shipped tiny spec: a network's last epoch compared with itself
is 1 (SVCCA, PWCCA and linear CKA of X with X), earlier epochs are not; and what a TransJect spec refuses."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from tests.transject.conftest import tiny_spec


def test_svcca_against_the_final_epoch(tiny_store):
    ds = xr.open_zarr(tiny_store)
    assert list(ds.layer.values) == ["embedding", "layer1", "layer2"]
    for stat in ("svcca", "pwcca", "cka"):
        v = ds[f"{stat}_final"].values  # (network, checkpoint, layer)
        assert np.isfinite(v).all()
        np.testing.assert_allclose(v[:, -1], 1.0, atol=1e-6)  # the final epoch vs itself
        assert (v[:, :-1] <= 1 + 1e-9).all() and (v[:, :-1] >= -1e-9).all()
        assert (v[:, 0] < 1 - 1e-4).any()  # the untrained network differs from the trained one


def test_svcca_tasks_wait_for_the_final_epoch(tmp_path):
    from runner.run.prepare import prepare

    tasks = [t for t in prepare(tiny_spec(tmp_path)).tasks if t.kind == "svcca"]
    assert len(tasks) == 8 * 4  # every network, epochs 0..3
    for t in tasks:
        assert t.needs == tuple(dict.fromkeys((f"checkpoint:{t.network}:{t.checkpoint}", f"checkpoint:{t.network}:3")))


@pytest.mark.parametrize("replace, message", [
    ('layers = ["embedding", "layer1", "layer2"]', "name the layers to compare"),
    ('layers = ["embedding", "layer1", "layer2"]', "no network has layer(s) ['layer5']"),
    ('layers = ["embedding", "layer1", "layer2"]', "compare = 'seed' needs reference networks"),
    ('layers = ["embedding", "layer1", "layer2"]', "no [[model]] named ['lm']"),
])
def test_a_transject_spec_refuses_what_svcca_cannot_do_there(tmp_path, in_process, replace, message):
    new = {"name the layers to compare": "",
           "no network has layer(s) ['layer5']": 'layers = ["layer5"]',
           "compare = 'seed' needs reference networks": 'compare = "seed"\nlayers = ["embedding"]',
           "no [[model]] named ['lm']": 'networks = ["lm"]\nlayers = ["embedding"]'}[message]
    code, out, err = in_process("plan", tiny_spec(tmp_path, replace={replace: new}), "--no-estimate")
    assert code == 65 and message in err, err


def test_runner_figures_draws_svcca_of_transject_epochs(tiny_store):
    """Each line of the figure is a network's SVCCA (left) or CKA (right) of one layer over the epochs."""
    from runner.plugin.recipes import recipes

    ds = xr.open_zarr(tiny_store)
    fig = recipes("transject")["ch4_fig3"].draw(ds)
    svcca_ax, cka_ax = fig.axes[:2]
    for ax, name in ((svcca_ax, "svcca_final"), (cka_ax, "cka_final")):
        lines = {line.get_label(): line.get_ydata() for line in ax.get_lines()}
        assert len(lines) == 4 * 3  # the first seed of each of the four models, three layers
        np.testing.assert_array_equal(lines["transject-s0: layer2"],
                                      ds[name].sel(network="transject-s0", layer="layer2").values)
