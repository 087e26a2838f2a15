"""Depth as time on a published-style suite without a shared layer: each checkpoint of a tiny GPT-NeoX
series (step folders laid out like hub revisions) is a ``layers:`` map, x_{t+1} = block_{t+1}(x_t),
measured by the depth study; its values are those of the model's own hidden states."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import xarray as xr

from analyses.effective_dimension import effective_dimension
from analyses.token_deviation import token_deviation
from suite_helpers import build_suite
from tests.runner.helpers import write_spec

SPEC = """
[experiment]
name = "stack"
store = "{store}"
seed = 0

[[model]]
name = "neox"
source = "layers:{source}"
revisions = ["step0", "step1000"]

[input]
source = "builtin:pydoc-topics"
samples = 8
tokens = 8

[dynamics]
steps = {steps}
{extra}

[[measure]]
kind = "token_deviation"

[[measure]]
kind = "lyapunov"
tau = 1

[[measure]]
kind = "effective_dimension"
"""


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    return build_suite(tmp_path_factory.mktemp("stack") / "neox", "gpt_neox", steps=(0, 1000))


def test_each_checkpoint_is_measured_layer_by_layer(in_process, tmp_path, suite):
    from transformers import AutoModel

    store = tmp_path / "s.zarr"
    spec = write_spec(tmp_path, SPEC.format(store=store, source=suite, steps=2, extra=""))
    code, _, err = in_process("apply", "-q", spec)
    assert code == 0, err
    ds = xr.open_zarr(store, consolidated=False)
    assert list(ds["training_step"].values) == [0, 1000]
    assert np.isfinite(ds["lyapunov"].values).all()
    ids = torch.as_tensor(ds["input_ids"].values)
    for i, rev in enumerate(("step0", "step1000")):
        with torch.no_grad():
            hidden = AutoModel.from_pretrained(suite / rev).eval()(input_ids=ids, output_hidden_states=True).hidden_states
        for t in (0, 1):  # hidden_states[2] is after GPT-NeoX's final norm, x_2 before it
            np.testing.assert_allclose(ds["deviation"].isel(network=i, deviation_step=t).values,
                                       token_deviation(hidden[t]).numpy(), rtol=1e-5)
            np.testing.assert_allclose(float(ds["effective_dimension"].isel(network=i, neff_step=t)),
                                       float(effective_dimension(hidden[t])), rtol=1e-5)


@pytest.mark.parametrize("steps, extra, key, message", [
    (3, "", "[dynamics] steps", "2 layers"),
    (2, "early_exit = true", "[model]", "different map at every step"),
])
def test_what_a_stack_cannot_do_is_refused(in_process, tmp_path, suite, steps, extra, key, message):
    spec = write_spec(tmp_path, SPEC.format(store=tmp_path / "s.zarr", source=suite, steps=steps, extra=extra))
    code, _, err = in_process("plan", spec)
    assert code == 65 and key in err and message in err, err
