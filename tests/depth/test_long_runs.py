"""A measure's memory does not grow with the run's length: the transient-chaos length of a
million-step run is derived chunk by chunk (issue 39: 483 MB at 1e6 steps for 64 samples before)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.runner.helpers import cli_env, write_spec

SPEC = """
[experiment]
name = "long"
store = "long.zarr"

[[model]]
name = "tanh"
source = "map:tanh"
params = { g = 1.5, n = 8 }

[input]
samples = 256

[dynamics]
steps = 2_000_000
precision = "fp64"

[[measure]]
kind = "lyapunov"
k = 1e-6
tau = 10

[[measure]]
kind = "transient_chaos"
"""

# lambda(t) of a 2e6-step run written straight into the store (no iteration), then derived in a
# process of its own: its peak RSS before and after the derivation, and the values of the
# one-shot formula on the whole series for comparison
DERIVE = textwrap.dedent("""
    import resource, sys
    from types import SimpleNamespace
    import numpy as np, torch
    from analyses.transient_chaos import transient_chaos
    from runner.run.prepare import prepare
    from runner.plugin.measures import measures
    from runner.storage.store import Store
    from runner.studies.depth.layout import build_layout

    p = prepare(sys.argv[1])
    store = Store(p.store_path)
    store.open(build_layout(p.spec, p.state), {})
    S, K = store.group["lyapunov"].shape[1:]
    rng = np.random.default_rng(0)
    for a in range(0, K, 8192):
        lam = rng.normal(-0.2, 1.0, (S, min(K, a + 8192) - a))
        lam[:, -1] = np.where(np.arange(S) % 7 == 0, np.nan, lam[:, -1])
        store.write("lyapunov", (0, slice(None), slice(a, a + lam.shape[1])), lam)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    measure = next(m for m in p.spec.measure if m.kind == "transient_chaos")
    measures("depth")["transient_chaos"](measure).derive(SimpleNamespace(spec=p.spec, index=0, store=store))
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    whole = transient_chaos(torch.from_numpy(store.read("lyapunov", (0,))), 10)
    same_length = np.array_equal(store.read("chaos_length", (0,)), whole.length.numpy(), equal_nan=True)
    same_mean = np.allclose(store.read("chaos_mean_exponent", (0,)), whole.mean_exponent.numpy(), rtol=1e-12,
                            equal_nan=True)
    print(grown * 1024, S * K * 8, same_length, same_mean)
""")


def test_the_chaos_length_of_a_long_run_is_derived_in_bounded_memory(tmp_path):
    spec = write_spec(tmp_path, SPEC)
    proc = subprocess.run([sys.executable, "-c", DERIVE, str(spec)], cwd=tmp_path, env=cli_env(tmp_path),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    grown, series, same_length, same_mean = proc.stdout.split()
    assert same_length == "True" and same_mean == "True"
    assert int(series) == 256 * 200_000 * 8  # 410 MB of lambda(t)
    assert int(grown) < int(series) / 8, f"the derivation grew the process by {int(grown) / 1e6:.0f} MB"
