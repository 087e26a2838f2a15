"""The Python API as a notebook would use it: a spec from a dict, plan, apply, open, align steps.

Run it from anywhere (offline, CPU, a few seconds); it writes into ./store/:

    .venv/bin/python docs/api_example.py
"""

from runner import api

# A spec is a TOML file or the same tables as a dict: here the logistic map at r = 4, whose
# largest Lyapunov exponent is ln 2 per step, and a tanh reservoir.
spec = api.load_spec({
    "experiment": {"name": "api_example", "description": "the logistic map and a tanh reservoir"},
    "model": [{"name": "logistic", "source": "map:logistic"},
              {"name": "tanh", "source": "map:tanh", "params": {"g": 1.5, "n": 16}}],
    "input": {"samples": 8},
    "dynamics": {"steps": 100, "precision": "fp64"},
    "measure": [{"kind": "lyapunov", "k": 1e-8, "tau": 1}, {"kind": "effective_dimension", "every": 10}],
}, overrides=["dynamics.steps=200"])           # as `--set dynamics.steps=200` on the command line

planned = api.plan(spec)                        # validated and resolved, as `runner plan`
print(planned.summary())
outcome = api.apply(planned)                    # resumable, as `runner apply`
print(f"ran {len(outcome.ran)} tasks")

ds = api.open(planned.store)                    # an xarray.Dataset
lam = ds["lyapunov"].sel(network="logistic").mean().item()
print(f"logistic map: largest Lyapunov exponent {lam:.3f} per step (ln 2 = 0.693)")
steps = api.on_common_steps(ds)                 # lyapunov_step, neff_step, ... on one `step` axis
print(steps[["lyapunov_per_step", "effective_dimension"]].sel(network="tanh").mean("sample").to_dataframe().dropna().head())
