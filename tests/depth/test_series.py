"""Depth as time against training as time: a ``[[model]]`` with ``revisions`` iterates each checkpoint
of a series (here the step folders of a local directory, laid out like hub revisions) as its own
network, and the store records each one's ``revision`` and ``training_step``."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import xarray as xr

from tests.runner.helpers import write_spec

SPEC = """
[experiment]
name = "series"
store = "{store}"
seed = 0

[[model]]
name = "albert"
source = "path:{source}"
{revisions}

[input]
source = "builtin:pydoc-topics"
samples = 8
tokens = 8

[dynamics]
steps = 20
checkpoint_every = 10

[[measure]]
kind = "token_deviation"

[[measure]]
kind = "lyapunov"
tau = 5

[[measure]]
kind = "effective_dimension"
"""


@pytest.fixture(scope="module")
def series(shared_cache, tmp_path_factory):
    """``<dir>/step0`` (a fresh initialisation of the tiny ALBERT) and ``<dir>/step200`` (the builtin
    tiny ALBERT, trained 200 MLM steps), each with the tokenizer."""
    import torch
    from transformers import AlbertConfig, AlbertForMaskedLM

    from models.registry import family_for

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRANSIENT_CACHE", str(shared_cache))
        trained = family_for("builtin:tiny-albert").location("builtin:tiny-albert", build=True)
    root = tmp_path_factory.mktemp("series") / "tiny"
    shutil.copytree(trained, root / "step200")
    shutil.copytree(trained, root / "step0")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        AlbertForMaskedLM(AlbertConfig.from_pretrained(root / "step0")).save_pretrained(root / "step0")
    return root


def _spec(tmp_path, source, revisions="", name="spec.toml"):
    store = tmp_path / f"{name}.zarr"
    return write_spec(tmp_path, SPEC.format(store=store, source=source, revisions=revisions), name), store


def test_each_checkpoint_is_a_network_equal_to_measuring_it_alone(in_process, tmp_path, series):
    spec, store = _spec(tmp_path, series, 'revisions = "step{0..200:200}"')
    code, out, err = in_process("plan", spec)
    assert code == 0, err
    assert "albert@step0" in out and "albert@step200" in out
    code, _, err = in_process("apply", "-q", spec)
    assert code == 0, err
    ds = xr.open_zarr(store, consolidated=False)
    assert list(ds["network"].values) == ["albert@step0", "albert@step200"]
    assert list(ds["revision"].values) == ["step0", "step200"]
    assert list(ds["training_step"].values) == [0, 200]
    assert list(ds["model"].values) == ["albert@step0", "albert@step200"]  # checkpoints are not replicates
    assert list(ds["series"].values) == ["albert", "albert"]

    for i, rev in enumerate(("step0", "step200")):  # a series network is that checkpoint, measured alone
        alone, alone_store = _spec(tmp_path, series / rev, name=f"{rev}.toml")
        code, _, err = in_process("apply", "-q", alone)
        assert code == 0, err
        one = xr.open_zarr(alone_store, consolidated=False)
        for var in ("lyapunov", "deviation", "sync_offset", "effective_dimension"):
            np.testing.assert_array_equal(ds[var].isel(network=i).values, one[var].isel(network=0).values)
    # the trained checkpoint and the fresh one are different maps
    assert not np.array_equal(ds["deviation"].isel(network=0).values, ds["deviation"].isel(network=1).values)


def test_a_missing_checkpoint_is_named_before_any_compute(in_process, tmp_path, series):
    spec, store = _spec(tmp_path, series, 'revisions = ["step0", "step99"]')
    code, out, _ = in_process("plan", spec)
    assert code == 0 and "step99" in out
    code, _, err = in_process("apply", spec)
    assert code == 66 and "step99" in err
    assert not store.exists()


@pytest.mark.parametrize("extra, message", [
    ('revisions = ["step0"]\nrevision = "main"', "either revision"),
    ('revisions = ["step0"]\ninit = { scheme = "truncated_normal" }', "init re-draws"),
    ('revisions = ["latest"]', "names no step"),
    ('revisions = "step{200..0}"', "upwards"),
])
def test_bad_series_are_refused_with_the_key(in_process, tmp_path, series, extra, message):
    spec, _ = _spec(tmp_path, series, extra)
    code, _, err = in_process("plan", spec)
    assert code == 65, err
    assert message in err and "[model]" in err


def test_a_map_cannot_be_a_series(in_process, tmp_path):
    spec = write_spec(tmp_path, SPEC.format(store=tmp_path / "m.zarr", source="x", revisions="")
                      .replace('source = "path:x"', 'source = "map:logistic"\nrevisions = ["step0"]'))
    code, _, err = in_process("plan", spec)
    assert code == 65 and "ALBERT" in err


def test_the_series_figure_plots_each_checkpoint_against_its_step(in_process, tmp_path, series):
    from runner.plugin.recipes import NotDrawable, recipes

    spec, store = _spec(tmp_path, series, 'revisions = ["step0", "step200"]')
    assert in_process("apply", "-q", spec)[0] == 0
    ds = xr.open_zarr(store, consolidated=False)
    top, bottom = recipes("depth")["series"].draw(ds).axes[:2]
    (lam,), (neff,) = top.get_lines()[:1], bottom.get_lines()
    np.testing.assert_array_equal(lam.get_xdata(), [0, 200])
    expected = [float(ds["lyapunov_per_step"].isel(network=i).mean()) for i in range(2)]
    np.testing.assert_allclose(lam.get_ydata(), expected, rtol=1e-6)
    np.testing.assert_array_equal(neff.get_ydata(), ds["effective_dimension"].isel(neff_step=-1).values)
    with pytest.raises(NotDrawable):  # a store without a series
        recipes("depth")["series"].draw(ds.drop_vars(["training_step", "revision", "series"]))
