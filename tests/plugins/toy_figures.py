"""A figure added without touching the engine or the study it draws: the random walk's mean squared
displacement against the step (tests/plugins/toy_study.py), beside its known answer E[x_t^2] = t."""

from __future__ import annotations

from runner.plugin.recipes import recipe


@recipe(study="walk", id="walk_msd", reproduces="E[x_t^2] = t for steps of +-1 (a known answer)", needs=("msd",))
def walk_msd(ds):
    """Mean squared displacement of the walkers against the step."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4, 3))
    ax = fig.subplots()
    t = ds["msd_step"].values
    ax.plot(t, ds["msd"].sel(network="walkers").values, label="measured")
    ax.plot(t, t, linestyle="--", color="grey", label="E[x_t^2] = t")
    ax.set_xlabel("step t")
    ax.set_ylabel("<x_t^2>")
    ax.legend()
    return fig
