"""Sample shards of a depth pass (``--shards``) and executors by name, with the local executor."""

from __future__ import annotations


import numpy as np
import pytest
import xarray as xr

from runner.storage.store import read_tasks
from tests.runner.helpers import maps_spec, write_spec


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A tiny ALBERT (text inputs, attention masks), briefly trained: cheaper than the builtin one."""
    from models.tiny import build_tiny_albert

    return build_tiny_albert(tmp_path_factory.mktemp("tiny") / "albert", mlm_steps=10)

SPEC = """
[experiment]
name = "{name}"
store = "store/{name}.zarr"

[[model]]
name = "albert"
source = "path:{model}"

[[model]]
name = "tanh"
source = "map:tanh"
params = {{ g = 1.5, n = 8 }}

[input]
source = "builtin:pydoc-topics"
samples = 11
tokens = 6

[dynamics]
steps = 30
checkpoint_every = 10
precision = "fp64"

[[measure]]
kind = "effective_dimension"
every = 2

[[measure]]
kind = "token_deviation"
{extra}
"""


def _data(path):
    ds = xr.open_zarr(path)
    return ds.drop_attrs().drop_vars([v for v in ds.data_vars if v.startswith("input")]), ds


def test_sharded_passes_equal_unsharded_ones_and_a_stopped_run_resumes(in_process, tmp_path, monkeypatch, model):
    """3 shards per pass; the run is stopped after the first network's shards finished, before their
    merge: the next apply merges them without running them again, then runs the second network."""
    from runner.studies.depth import shards

    for name in ("whole", "sharded"):
        write_spec(tmp_path, SPEC.format(name=name, extra="", model=model), f"{name}.toml")
    assert in_process("apply", "whole.toml", "-q")[0] == 0
    real = shards.merge
    monkeypatch.setattr("runner.studies.depth.study.merge", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt))
    assert in_process("apply", "sharded.toml", "-q", "--shards", "3")[0] == 130  # stopped before the merge
    assert len(list((tmp_path / "store/sharded.runner/shards").glob("*/*/done"))) == 3
    monkeypatch.setattr("runner.studies.depth.study.merge", real)
    code, _, err = in_process("apply", "sharded.toml", "-q", "--shards", "3")
    assert code == 0, err
    whole, ws = _data(tmp_path / "store/whole.zarr")
    sharded, ss = _data(tmp_path / "store/sharded.zarr")
    assert float(whole.deviation.isel(deviation_step=5).max()) > 0 and whole.effective_dimension.notnull().all()
    # per-sample values joined along `sample`; N_eff from the shards' sufficient statistics
    xr.testing.assert_allclose(sharded, whole, rtol=1e-9, atol=0)
    records = read_tasks(tmp_path / "store/sharded.zarr")
    assert records.keys() == read_tasks(tmp_path / "store/whole.zarr").keys()  # the task ids of an unsharded run
    # the first network's shards were not run again; the second network's ran
    assert sorted({r["network"]: r["resumed_from"] for r in records.values()}.items()) == [(0, 30), (1, 0)]
    assert not any((tmp_path / "store/sharded.runner/shards").iterdir())  # shard files merged and removed
    assert in_process("apply", "sharded.toml", "--shards", "3")[0] == 0  # done: nothing runs again


def test_lyapunov_exponents_of_sharded_passes_equal_unsharded_ones(in_process, tmp_path, model):
    """Each shard iterates its samples' twins (drawn for the whole batch, then sliced): lambda(t) and
    the chaos lengths derived from it equal an unsharded run's."""
    extra = ('[[measure]]\nkind = "lyapunov"\ntau = 5\n\n[[measure]]\nkind = "transient_chaos"\n\n'
             '[[measure]]\nkind = "orbit"\nwindow = 16')  # per-sample orbit classes join along `sample` too
    for name in ("whole", "sharded"):
        write_spec(tmp_path, SPEC.format(name=name, extra=extra, model=model), f"{name}.toml")
    assert in_process("apply", "whole.toml", "-q")[0] == 0
    code, _, err = in_process("apply", "sharded.toml", "-q", "--shards", "3")
    assert code == 0, err
    whole, _ = _data(tmp_path / "store/whole.zarr")
    sharded, _ = _data(tmp_path / "store/sharded.zarr")
    assert whole.lyapunov.notnull().all() and whole.lyapunov.std() > 0
    # the linearity check's twin is 10 times closer to x, so a shard's other batch size moves its lambda by
    # ten times more of the rounding (about 1e-8 of it in fp64)
    xr.testing.assert_allclose(sharded.lyapunov_check, whole.lyapunov_check, rtol=1e-6, atol=0)
    xr.testing.assert_allclose(sharded.drop_vars("lyapunov_check"), whole.drop_vars("lyapunov_check"), rtol=1e-9, atol=0)


def test_measures_that_read_all_samples_are_refused_before_compute(in_process, tmp_path, model):
    write_spec(tmp_path, SPEC.format(name="twin", extra='[[measure]]\nkind = "twin_distance"', model=model), "twin.toml")
    code, _, err = in_process("apply", "twin.toml", "--shards", "2")
    assert code == 2 and "twin_distance iterates perturbed twins of chosen samples" in err and "Traceback" not in err
    write_spec(tmp_path, SPEC.format(name="pca", extra='[[measure]]\nkind = "pca"', model=model), "pca.toml")
    code, _, err = in_process("apply", "pca.toml", "--shards", "2")
    assert code == 2 and "pca reads all samples at once" in err and "effective_dimension, lyapunov, orbit, token_deviation" in err
    wide = maps_spec("wide", n=6000, measures='[[measure]]\nkind = "effective_dimension"')
    write_spec(tmp_path, wide, "wide.toml")
    code, _, err = in_process("apply", "wide.toml", "--shards", "2")
    assert code == 2 and "effective_dimension on tanh" in err and "6000 x 6000 matrix" in err
    assert not (tmp_path / "store").exists()


def test_unknown_executor_and_bad_options_are_refused(in_process, tmp_path):
    write_spec(tmp_path, maps_spec("x"), "x.toml")
    code, _, err = in_process("apply", "x.toml", "--executor", "slurm")
    assert code == 2 and "unknown executor 'slurm'; known: local, ray" in err
    assert in_process("apply", "x.toml", "--address", "auto")[0] == 2
    assert in_process("apply", "x.toml", "--shards", "0")[0] == 2
    assert not (tmp_path / "store").exists()


def test_shards_cover_the_samples_once_and_derived_tasks_run_whole(tmp_path):
    from runner.run.prepare import prepare

    spec = write_spec(tmp_path, maps_spec("bounds", samples=10, measures='''
        [[measure]]
        kind = "lyapunov"
        k = 1e-8
        '''))
    p = prepare(spec)
    group = [t for t in p.tasks if t.network == 0]
    parts = p.study.split(p, group, 4)
    assert [(s.lo, s.hi) for s in parts] == [(0, 2), (2, 5), (5, 7), (7, 10)]
    assert np.array_equal(np.concatenate([np.arange(10)[s.rows] for s in parts]), np.arange(10))
    assert len(p.study.split(p, group, 50)) == 10  # never more shards than samples
    with_chaos = prepare(write_spec(tmp_path, maps_spec("chaos"), "chaos.toml"))
    derived = [t for t in with_chaos.tasks if t.kind == "derive"]
    assert derived and with_chaos.study.split(with_chaos, derived[:1], 4) is None
