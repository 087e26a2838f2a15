"""Ch. 5 App. B, Fig. 11 from a tiny sweep over the scaffold generator's ``rules`` (n), through the real
CLI: the nested sweep key sets [corpus.scaffold] rules in each point, `runner figures` draws ch5_fig11
once from the sweep's store, and its lines are the stored CD probabilities at the last checkpoint."""

from __future__ import annotations

import json

import numpy as np
import pytest
from training_helpers import ROOT

from runner.plugin.recipes import recipes
from runner.spec.sweep import open_sweep
from runner.studies.training.figures import scaffold_mean
from tests.runner.helpers import run_cli

SPEC = """
[experiment]
name = "rules"
seed = 0

[corpus]
source = "scaffold:"
analysis_tokens = 100

[corpus.scaffold]
lengths = [2, 3]
settings = ["unfamiliar"]
vocab_size = 30
tokens = 3000
rules = 40
phrases = 5
valid_tokens = 600
test_cases = 20

[training]
epochs = 2
lr = 1.0
lr_decay = 1.0
clip = 0.25
batch_size = 10
bptt = 10
eval_batch_size = 10
dropout = 0.0
embedding_dim = 8
hidden_dim = 8
num_layers = 1

[checkpoints]
every_epoch = true
initial = false

[[model]]
name = "k2"
corpus_variant = "unfamiliar_k2"

[[model]]
name = "k3"
corpus_variant = "unfamiliar_k3"

[[measure]]
kind = "rule_cd_probability"
focus = ["alpha", "scaffold"]

[sweep.corpus.scaffold]
rules = [10, 40]
"""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("rules")
    spec = root / "rules.toml"
    spec.write_text(SPEC)
    out = run_cli("apply", "-q", spec, cwd=root)
    assert out.returncode == 0, out.stderr
    return root, spec


@pytest.mark.timeout(120)
def test_each_point_trains_on_its_own_number_of_rules(sweep):
    root, spec = sweep
    plan = run_cli("plan", spec, "--json", "--no-estimate", cwd=root)
    assert plan.returncode == 0, plan.stderr
    assert [p["name"] for p in json.loads(plan.stdout)["points"]] == ["rules=10", "rules=40"]
    text = run_cli("plan", spec, "--no-estimate", cwd=root).stdout
    assert "sweep      corpus.scaffold.rules = [10, 40]: 2 point(s)" in text
    ds = open_sweep(root / "store" / "rules.zarr")
    assert list(ds["rules"].values) == [10, 40]
    assert ds["rule_cd_probability"].dims == ("rules", "network", "checkpoint", "test_domain", "cd_focus")
    assert np.isfinite(ds["rule_cd_probability"].values).all()
    # the points differ only in the corpus, so their first-epoch values differ
    assert not np.array_equal(ds["rule_cd_probability"].sel(rules=10).values, ds["rule_cd_probability"].sel(rules=40).values)


@pytest.mark.timeout(120)
def test_figures_draw_fig11_against_the_number_of_rules(sweep):
    root, spec = sweep
    out = run_cli("figures", spec, "--json", cwd=root)
    assert out.returncode == 0, out.stderr
    status = {f["id"]: f["status"] for f in json.loads(out.stdout)["figures"]}
    assert status["ch5_fig11"] == "drawn"
    assert status["ch5_fig8@rules=10"] == status["ch5_fig8@rules=40"] == "drawn"  # the others: once per point
    assert (root / "store" / "rules.figures" / "ch5_fig11.png").is_file()

    ds = open_sweep(root / "store" / "rules.zarr")
    fig = recipes("training")["ch5_fig11"].draw(ds)
    assert len(fig.axes) == 4  # (alpha, scaffold) in focus x (in-domain, random) scaffolds
    panels = [(f, d) for f in ("alpha", "scaffold") for d in ("in_domain", "out_domain")]
    for ax, (focus, domain) in zip(fig.axes, panels):
        lines = {line.get_label(): line for line in ax.lines if not line.get_label().startswith("_")}
        assert set(lines) == {"k=2 unfamiliar (n=1)", "k=3 unfamiliar (n=1)"}
        for label, line in lines.items():
            net = label.split()[0].replace("=", "")
            want = scaffold_mean(ds["rule_cd_probability"].sel(test_domain=domain, cd_focus=focus), [net])
            np.testing.assert_array_equal(line.get_xdata(), [10, 40])
            np.testing.assert_array_equal(line.get_ydata(), want.isel(checkpoint=-1).values)
        assert ax.get_xscale() == "log"


def test_the_shipped_spec_sweeps_the_number_of_rules(tmp_path):
    out = run_cli("plan", ROOT / "specs" / "scaffold_rules.toml", "--no-estimate", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "sweep      corpus.scaffold.rules = [100, 300, 1000, 3000, 10000]: 5 point(s)" in out.stdout
