"""The reduced iteration ([dynamics] reduce = "synchronized"): synchronised samples run as one token.

Known answers come from globally coupled logistic maps (Kaneko 1990): on the synchronised set the
map is the logistic map (lambda = ln 2 at r = 4), and a perturbation across the units grows by
(1 - eps) f'(x), so synchrony is transversally stable for eps > 1/2 and unstable below."""

from __future__ import annotations

import json
import math
import signal

import numpy as np
import pytest
import torch
import xarray as xr

from tests.runner.helpers import run_cli, write_spec

COUPLED = """
[experiment]
name = "{name}"
store = "store/{name}.zarr"

[[model]]
name = "stable"
source = "map:coupled_logistic"
params = {{ eps = 0.6, units = 8 }}

[[model]]
name = "unstable"
source = "map:coupled_logistic"
params = {{ eps = 0.3, units = 8, spread = 1e-13 }}

[input]
samples = 16

[dynamics]
steps = 1000
precision = "fp64"
checkpoint_every = 500
reduce_every = 10
reduce_tolerance = 1e6
{reduce}

[[measure]]
kind = "token_deviation"

[[measure]]
kind = "lyapunov"
k = 1e-8
tau = 10

[[measure]]
kind = "transient_chaos"

[[measure]]
kind = "effective_dimension"
every = 10
"""

REDUCE_VARS = ["reduced_step", "reduce_refused_step"]


def _open(path) -> xr.Dataset:
    return xr.open_zarr(path, consolidated=False).load()


def _apply(directory, name: str, text: str) -> xr.Dataset:
    """Apply ``text`` (a spec storing to ``store/<name>.zarr``) with the real CLI, in this process."""
    from runner.cli import main

    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(directory)
        assert main(["apply", "-q", str(write_spec(directory, text))]) == 0
    return _open(directory / f"store/{name}.zarr")


@pytest.fixture(scope="module")
def coupled(tmp_path_factory):
    """The coupled maps full, reduced, and reduced without the guard."""
    return {name: _apply(tmp_path_factory.mktemp(name), name, COUPLED.format(name=name, reduce=reduce))
            for name, reduce in (("full", ""), ("reduced", 'reduce = "synchronized"'),
                                 ("unguarded", 'reduce = "synchronized"\nreduce_guard_steps = 0'))}


def test_a_stably_synchronised_map_runs_reduced_with_its_known_exponent(coupled):
    red = coupled["reduced"].sel(network="stable")
    # every sample synchronises (eps = 0.6 > 1/2) and reduces at a check, guarded
    assert red.reduced_step.notnull().all() and (red.reduced_step % 10 == 0).all() and (red.reduced_step < 300).all()
    assert red.reduce_refused_step.isnull().all()
    # from its reduced step on a sample's tokens are one vector: D(t) = 0 exactly
    for s in range(16):
        start = int(red.reduced_step[s])
        assert (red.deviation.isel(sample=s, deviation_step=slice(start, None)) == 0).all()
    # on the synchronised set the map is the logistic map: lambda = ln 2 per step, as in the full run
    lam = red.lyapunov_per_step.mean().item()
    assert lam == pytest.approx(math.log(2), abs=0.02)
    full = coupled["full"].sel(network="stable")
    assert full.lyapunov_per_step.mean().item() == pytest.approx(math.log(2), abs=0.02)
    # the synchronisation itself happens before any reduction: same offsets
    np.testing.assert_array_equal(red.sync_offset.values, full.sync_offset.values)


def test_the_guard_refuses_a_transversally_unstable_synchrony(coupled):
    """eps = 0.3: (1 - eps) f' grows perturbations across the units by 1.4 per step on average. The
    units start 1e-13 apart, within tolerance at the first check; the guard sees the growth."""
    red, full, unguarded = (coupled[k].sel(network="unstable") for k in ("reduced", "full", "unguarded"))
    assert red.reduced_step.isnull().all()
    refused = red.reduce_refused_step
    assert refused.notnull().any() and (refused.dropna("sample") <= 30).all()
    # nothing reduced: the guarded run is the full run, bit for bit
    xr.testing.assert_identical(red.drop_vars(REDUCE_VARS).drop_attrs(), full.drop_attrs())
    # without the guard the samples are taken at the first check and stay synchronised, where the full
    # run's units fly apart
    xr.testing.assert_equal(unguarded.reduced_step.where(refused.notnull()), refused.rename("reduced_step"))
    taken = unguarded.reduced_step.notnull()
    assert taken.sum() >= 4
    assert (unguarded.deviation.isel(deviation_step=-1).where(taken, drop=True) == 0).all()
    assert (full.deviation.isel(deviation_step=-1).where(taken, drop=True) > 1e-4).all()


def test_the_option_off_writes_nothing_of_it(coupled):
    assert not set(REDUCE_VARS) & set(coupled["full"].data_vars)


def test_a_sample_sent_back_to_full_width_desynchronises_as_a_full_run_does(tmp_path):
    """eps = 0.45: transversally unstable on average (ln(0.55 x 2) > 0), but a 20-step window may
    contract, so some samples are admitted and then refused at a guard every 50 steps. Their tokens
    were equal bit for bit, which the elementwise map would keep for ever: sent back, they get the
    spread they could have had when merged, and fly apart as the never-reduced samples do."""
    text = COUPLED.format(name="b", reduce='reduce = "synchronized"\nreduce_guard_every = 50').replace(
        "eps = 0.6, units = 8 }", "eps = 0.45, units = 8, spread = 1e-12 }")
    ds = _apply(tmp_path, "b", text).sel(network="stable")  # the first model, now at eps = 0.45
    back = (ds.reduced_step < ds.reduce_refused_step).values
    assert back.sum() >= 2
    final = ds.deviation.isel(deviation_step=-1).values
    assert (final[back] > 1e-8).all()
    never = ds.reduced_step.isnull().values
    assert (final[never] > 1e-8).all()


def test_the_option_enters_task_ids_only_when_on(tmp_path, in_process):
    def ids(reduce: str) -> list[str]:
        text = COUPLED.format(name="a", reduce=reduce)
        code, out, err = in_process("plan", write_spec(tmp_path, text), "--json")
        assert code == 0, err
        return [t["id"] for t in json.loads(out)["tasks"]]

    off = ids("")
    assert ids('reduce = "none"\nreduce_guard_steps = 3') == off
    on = ids('reduce = "synchronized"')
    assert not set(on) & set(off)
    assert not set(ids('reduce = "synchronized"\nreduce_guard_steps = 3')) & set(on)


def test_plan_says_what_reduces_and_what_it_is_validated_for(tmp_path, in_process):
    text = COUPLED.format(name="a", reduce='reduce = "synchronized"') + """
[[model]]
name = "logistic"
source = "map:logistic"
"""
    code, out, err = in_process("plan", write_spec(tmp_path, text))
    assert code == 0, err
    assert "reduce     synchronized: a sample whose tokens agree within 1e+06 u" in out
    assert "reduces: stable, unstable; full width: logistic" in out
    assert "validated against full runs" in out
    code, out, err = in_process("plan", write_spec(tmp_path, text.replace("reduce_every = 10",
                                                                           "reduce_every = 10\nreduce_guard_steps = 0")))
    assert "NO GUARD" in out


@pytest.mark.parametrize("edit, message", [
    ('reduce = "synchronized"\nearly_exit = true', "[dynamics] reduce: reduce and early_exit both take rows"),
    ('reduce = "synchronized"\nreduce_guard_size = 1e-12',
     "[dynamics] reduce_guard_size: 1e-12 is within ten times the reduction's tolerance in fp64"),
    ('reduce = "synchronous"', "[dynamics] reduce: Input should be 'none' or 'synchronized'"),
    ('reduce = "synchronized"\nreduce_guard_every = 0',
     "[dynamics] reduce_guard_every: Input should be greater than or equal to 1"),
])
def test_bad_reduction_settings_are_refused_before_anything_runs(tmp_path, in_process, edit, message):
    code, _, err = in_process("plan", write_spec(tmp_path, COUPLED.format(name="a", reduce=edit)))
    assert code == 65
    assert message in err


def test_a_reduced_pass_is_not_split_into_shards(tmp_path):
    text = COUPLED.format(name="a", reduce='reduce = "synchronized"').split("[[measure]]\nkind = \"lyapunov\"")[0]
    out = run_cli("apply", write_spec(tmp_path, text), "--shards", "2", cwd=tmp_path)
    assert out.returncode != 0
    assert "--shards: [dynamics] reduce draws each guard's perturbation" in out.stderr


def test_a_longer_reduced_run_continues_to_a_fresh_runs_result(tmp_path):
    spec = write_spec(tmp_path, COUPLED.format(name="x", reduce='reduce = "synchronized"'))
    assert run_cli("apply", spec, cwd=tmp_path).returncode == 0
    longer = run_cli("apply", spec, "--set", "dynamics.steps=1500", cwd=tmp_path)
    assert longer.returncode == 0, longer.stderr
    fresh_dir = tmp_path / "fresh"
    fresh_dir.mkdir()
    fresh = write_spec(fresh_dir, COUPLED.format(name="x", reduce='reduce = "synchronized"'))
    assert run_cli("apply", fresh, "--set", "dynamics.steps=1500", cwd=fresh_dir).returncode == 0
    xr.testing.assert_identical(_open(tmp_path / "store/x.zarr").drop_attrs(),
                                _open(fresh_dir / "store/x.zarr").drop_attrs())


def test_albert_in_fp64_stays_reduced_through_its_guards_and_a_map_of_one_token_is_untouched(tmp_path, shared_cache,
                                                                                             monkeypatch):
    """At a realistic width a mean over tokens in float64 need not be exact: equality of a reduced sample's
    tokens is bitwise, so guards every 50 steps keep the synchronised tiny ALBERT reduced. A logistic
    map beside it (one token) runs at full width with the values of a run without the option."""
    monkeypatch.setenv("TRANSIENT_CACHE", str(shared_cache))
    text = ALBERT.format(name="{name}").replace("steps = 600\ncheckpoint_every = 200", (
        'steps = 400\ncheckpoint_every = 200\nprecision = "fp64"\nreduce_tolerance = 1e6\nreduce_guard_every = 50'))
    text = text.replace("[input]", '[[model]]\nname = "logistic"\nsource = "map:logistic"\n\n[input]')
    text = text.replace('[[measure]]\nkind = "trajectory"\nsamples = [0]\ntokens = [0, 15]\nelements = [0]\n', "")
    text = text.replace("k = 1.0\n", "")  # each network's own k: ALBERT's 1, the logistic map's small one
    reduced = _apply(tmp_path, "r", text.format(name="r"))
    albert = reduced.sel(network="pretrained")
    assert (albert.reduced_step <= 250).all() and albert.reduce_refused_step.isnull().all()
    full = _apply(tmp_path, "f", text.format(name="f").replace('reduce = "synchronized"', ""))
    xr.testing.assert_identical(reduced.sel(network="logistic").drop_vars(REDUCE_VARS).drop_attrs(),
                                full.sel(network="logistic").drop_attrs())
    assert reduced.sel(network="logistic").reduced_step.isnull().all()


ALBERT = """
[experiment]
name = "{name}"
store = "store/{name}.zarr"

[[model]]
name = "pretrained"
source = "builtin:tiny-albert"

[input]
source = "builtin:pydoc-topics"
samples = 8
tokens = 16

[dynamics]
steps = 600
checkpoint_every = 200
reduce = "synchronized"

[[measure]]
kind = "token_deviation"

[[measure]]
kind = "lyapunov"
k = 1.0
tau = 10

[[measure]]
kind = "effective_dimension"

[[measure]]
kind = "trajectory"
samples = [0]
tokens = [0, 15]
elements = [0]
"""


def test_a_killed_reduced_run_resumes_to_the_uninterrupted_result(tmp_path, shared_cache):
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    for d in (whole, killed):
        d.mkdir()
        write_spec(d, ALBERT.format(name="r"))
    assert run_cli("apply", "spec.toml", cwd=whole, TRANSIENT_CACHE=str(shared_cache)).returncode == 0
    # the kill lands after the durable point at 200, where the samples were being admitted
    out = run_cli("apply", "spec.toml", cwd=killed, TRANSIENT_CACHE=str(shared_cache),
                  RUNNER_TEST_KILL="pretrained@230")
    assert out.returncode == -signal.SIGKILL
    resumed = run_cli("apply", "spec.toml", cwd=killed, TRANSIENT_CACHE=str(shared_cache))
    assert resumed.returncode == 0, resumed.stderr
    a, b = _open(whole / "store/r.zarr"), _open(killed / "store/r.zarr")
    assert (a.reduced_step <= 200).all() and a.reduced_step.notnull().all()
    xr.testing.assert_identical(a.drop_attrs(), b.drop_attrs())


def test_one_token_of_albert_is_its_synchronised_step(shared_cache, monkeypatch):
    """The layer on one token (V alone: softmax over one key is 1) is the layer on that token
    repeated, to rounding, for a pre-trained and an initial network."""
    from models.init import TruncatedNormalInit
    from models.registry import family_for

    monkeypatch.setenv("TRANSIENT_CACHE", str(shared_cache))
    family = family_for("builtin:tiny-albert")
    gen = torch.Generator().manual_seed(0)
    for init in (None, TruncatedNormalInit(std=0.02, clip=2.0)):
        f = family.build("builtin:tiny-albert", init=init, seed=1, dtype=torch.float64, device="cpu")
        assert f.token_equivariant
        x = torch.randn(5, 1, f.config.hidden_size, generator=gen, dtype=torch.float64)
        with torch.no_grad():
            torch.testing.assert_close(f.step(x).expand(-1, 16, -1), f.step(x.expand(-1, 16, -1).contiguous()),
                                       rtol=1e-12, atol=1e-12)
            # and permuting tokens permutes the image (positions enter only through x_0)
            z = torch.randn(3, 16, f.config.hidden_size, generator=gen, dtype=torch.float64)
            perm = torch.randperm(16, generator=gen)
            torch.testing.assert_close(f.step(z[:, perm]), f.step(z)[:, perm], rtol=1e-12, atol=1e-12)


VALIDATION = """
[experiment]
name = "{name}"
store = "store/{name}.zarr"

[[model]]
name = "pretrained"
source = "builtin:tiny-albert"

[[model]]
name = "initial"
source = "builtin:tiny-albert"
init = {{ scheme = "truncated_normal", std = 0.02, clip = 2.0 }}

[input]
source = "builtin:pydoc-topics"
samples = 16
tokens = 16

[dynamics]
steps = 10_000
checkpoint_every = 5000
{reduce}

[[measure]]
kind = "token_deviation"
every = 100

[[measure]]
kind = "lyapunov"
k = 1.0
tau = 10

[[measure]]
kind = "transient_chaos"

[[measure]]
kind = "effective_dimension"
every = 100
"""


def test_a_reduced_tiny_albert_run_agrees_with_the_full_run_over_ten_thousand_steps(tmp_path, shared_cache,
                                                                                    monkeypatch):
    """The quickstart's networks (pre-trained and initial), 16 sentences, 1e4 steps, same seeds: the reduced run's
    statistics lie within the full run's 95% bootstrap intervals, with most sample-steps reduced."""
    from runner.api import apply
    from runner.studies.depth.agreement import differing, statistics

    monkeypatch.setenv("TRANSIENT_CACHE", str(shared_cache))
    monkeypatch.chdir(tmp_path)
    stores = {}
    for name, reduce in (("full", ""), ("reduced", 'reduce = "synchronized"')):
        spec = write_spec(tmp_path, VALIDATION.format(name=name, reduce=reduce), f"{name}.toml")
        assert not apply(spec, quiet=True).failed
        stores[name] = _open(tmp_path / f"store/{name}.zarr")
    full, reduced = stores["full"], stores["reduced"]
    start = reduced.reduced_step.values
    assert np.isfinite(start).all() and reduced.reduce_refused_step.isnull().all()
    assert (10_000 - start).sum() / start.size / 10_000 > 0.8  # most of the run is reduced
    assert differing(reduced, full, ["pretrained", "initial"]) == []
    # the statistics are not degenerate: the test could fail
    stats = statistics(full, "initial")
    assert stats["mean lambda per step"][1] < stats["mean lambda per step"][2]
    assert set(stats) == {"chaotic fraction", "mean lambda per step", "median sync offset", "mean chaos length",
                          "censored fraction", "final N_eff"}
