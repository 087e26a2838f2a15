"""``[dynamics] compile = true``: f compiled with torch.compile gives the eager run's values to rounding,
on the builtin tiny ALBERT (its twins and attention masks included), under new task
ids (the option joins the trajectory key only when on)."""

from __future__ import annotations


import numpy as np
import pytest
import xarray as xr

from runner.storage.store import read_tasks

SPEC = """
[experiment]
name = "{name}"
store = "store/{name}.zarr"
seed = 0

[[model]]
name = "pretrained"
source = "builtin:tiny-albert"

[input]
source = "builtin:pydoc-topics"
samples = 8
tokens = 8

[dynamics]
steps = 20
checkpoint_every = 10
{extra}

[[measure]]
kind = "token_deviation"

[[measure]]
kind = "lyapunov"
tau = 5
k = 1.0       # large against rounding: a default k (2.4e-4 of the state) would see compile's rounding in lambda

[[measure]]
kind = "effective_dimension"
"""


@pytest.mark.slow
def test_a_compiled_map_gives_the_eager_values_under_new_ids(in_process, tmp_path):
    from tests.runner.helpers import write_spec

    for name, extra in (("eager", ""), ("compiled", "compile = true")):
        write_spec(tmp_path, SPEC.format(name=name, extra=extra), f"{name}.toml")
        code, _, err = in_process("apply", "-q", f"{name}.toml")
        assert code == 0, err
    eager = xr.open_zarr(tmp_path / "store/eager.zarr", consolidated=False)
    compiled = xr.open_zarr(tmp_path / "store/compiled.zarr", consolidated=False)
    for var in ("deviation", "lyapunov", "effective_dimension"):
        assert np.isfinite(eager[var].values).all()
        np.testing.assert_allclose(compiled[var].values, eager[var].values, rtol=1e-4, atol=1e-6)
    ids = [read_tasks(tmp_path / f"store/{name}.zarr").keys() for name in ("eager", "compiled")]
    assert not set(ids[0]) & set(ids[1])


def test_the_compiler_is_imported_when_a_map_is_built_not_by_every_command():
    """``torch._dynamo`` costs every command 0.6 s to import: loading the studies leaves it out, and
    building an ALBERT map still keeps its mask cache out of compilation."""
    import subprocess
    import sys

    probe = ("import sys; from runner.plugin.loader import load_plugins; load_plugins(); "
             "assert 'torch._dynamo' not in sys.modules, 'imported by the plugins'; "
             "from transformers import AlbertConfig, AlbertModel; from models.albert import AlbertMap; "
             "AlbertMap(AlbertModel(AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=16, "
             "num_attention_heads=2, intermediate_size=32))); "
             "assert AlbertMap._layer_mask._torchdynamo_disable")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
