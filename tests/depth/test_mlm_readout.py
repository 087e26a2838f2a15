"""The MLM readout of Fig. 3A on the builtin tiny ALBERT, through the real CLI.

The fixed head at t = num_hidden_layers is AlbertForMaskedLM itself (known answer from
transformers), and the pre-trained network beats its random-init counterpart there.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import xarray as xr

from runner.plugin.recipes import recipes
from tests.runner.helpers import maps_spec, popen_cli, run_cli, write_spec

SPEC = """
    [experiment]
    name = "mlm"
    seed = 0

    [[model]]
    name = "pretrained"
    source = "{albert}"

    [[model]]
    name = "initial"
    source = "{albert}"
    init = {{ scheme = "truncated_normal", std = 0.02, clip = 2.0 }}

    [[model]]
    name = "logistic"
    source = "map:logistic"

    [input]
    source = "builtin:pydoc-topics"
    samples = 64
    tokens = 32

    [dynamics]
    steps = 6
    checkpoint_every = 4

    [[measure]]
    kind = "token_deviation"

    [[measure]]
    kind = "mlm_readout"
    """


@pytest.fixture(scope="module")
def albert(tmp_path_factory) -> Path:
    """The tiny ALBERT with 80 MLM steps (20, the figures' fixture, is too few to predict anything)."""
    from models.tiny import build_tiny_albert

    return build_tiny_albert(tmp_path_factory.mktemp("albert") / "tiny", seed=0, mlm_steps=80)


@pytest.fixture(scope="module")
def store(tmp_path_factory, albert) -> xr.Dataset:
    """The run, killed (-9) in the pre-trained network's pass past its durable point at t = 4 and
    resumed: the readout at t = 4 and later (the known answer below) comes from the resumed pass."""
    root = tmp_path_factory.mktemp("mlm")
    spec = write_spec(root, SPEC.format(albert=albert))
    proc = popen_cli("apply", "-q", spec, cwd=root, RUNNER_TEST_STALL="pretrained@5")
    deadline = time.monotonic() + 120
    while not (root / "store/mlm.runner/stalled").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    out = run_cli("apply", "-q", spec, cwd=root)
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in (root / "store/mlm.runner/events.jsonl").read_text().splitlines()]
    assert {e.get("resumed_from") for e in events if e["event"] == "task_done" and e["network"] == 0} == {4}
    return xr.open_zarr(root / "store/mlm.zarr", consolidated=False)


@pytest.mark.slow
def test_the_pretrained_head_beats_the_initial_network_at_its_depth(store, albert):
    from models.tiny import TINY_CONFIG

    layers = TINY_CONFIG["num_hidden_layers"]
    acc = store["mlm_accuracy"].sel(mlm_step=layers)
    assert float(acc.sel(network="pretrained")) > float(acc.sel(network="initial")) + 0.02
    assert store["mlm_step"].values.tolist() == list(range(7))
    assert np.isnan(store["mlm_accuracy"].sel(network="logistic").values).all()  # a map has no MLM head
    assert np.isnan(store["mlm_accuracy_refit"].sel(network="logistic").values).all()
    refit = store["mlm_accuracy_refit"].sel(network=["pretrained", "initial"]).values
    assert ((refit >= 0) & (refit <= 1)).all()  # held out: the masked tokens of the last 4 of 64 samples
    masked = store["input_masked"].values.astype(bool)
    ids = store["input_ids"].values
    from transformers import AutoTokenizer

    special = AutoTokenizer.from_pretrained(albert).all_special_ids
    assert not np.isin(ids[masked], special).any()  # never a special token
    assert (masked.sum(1) == round(0.15 * 30)).all()  # BERT's count: round(15% of the 30 inner tokens)


def test_the_fixed_head_at_the_last_layer_is_albert_for_masked_lm(store, albert):
    from transformers import AlbertForMaskedLM

    from models.tiny import TINY_CONFIG

    ids = torch.as_tensor(store["input_ids"].values)
    masked = torch.as_tensor(store["input_masked"].values.astype(bool))
    model = AlbertForMaskedLM.from_pretrained(albert).eval()
    mask_id = 4  # [MASK] of the tiny tokenizer
    with torch.no_grad():
        logits = model(input_ids=torch.where(masked, mask_id, ids), attention_mask=torch.ones_like(ids)).logits
    expected = (logits.argmax(-1)[masked] == ids[masked]).double().mean().item()
    assert expected > 0.02  # not a trivial agreement of zeros
    got = float(store["mlm_accuracy"].sel(network="pretrained", mlm_step=TINY_CONFIG["num_hidden_layers"]))
    assert got == pytest.approx(expected, abs=1e-12)


def test_the_head_is_the_checkpoint_s_or_an_initial_network_s_own(albert):
    from transformers import AlbertForMaskedLM

    from models.albert import load_mlm_head
    from models.init import TruncatedNormalInit

    real = AlbertForMaskedLM.from_pretrained(albert).predictions.state_dict()
    loaded = load_mlm_head(str(albert)).state_dict()
    assert real.keys() == loaded.keys() and all(torch.equal(real[k], loaded[k]) for k in real)
    embeddings = torch.randn(real["decoder.weight"].shape)
    own = load_mlm_head(str(albert), init=TruncatedNormalInit(std=0.02, clip=2.0), seed=1, word_embeddings=embeddings)
    assert torch.equal(own.decoder.weight, embeddings) and not own.bias.any()
    assert own.dense.weight.abs().max() <= 0.04 and own.dense.weight.std() > 0.01
    again = load_mlm_head(str(albert), init=TruncatedNormalInit(std=0.02, clip=2.0), seed=1, word_embeddings=embeddings)
    assert torch.equal(own.dense.weight, again.dense.weight)


def test_fig3a_draws_the_stored_accuracies(store):
    fig = recipes("depth")["fig3a"].draw(store)
    (ax,) = fig.axes
    lines = {line.get_gid(): line for line in ax.lines}
    assert set(lines) == {f"{v}:{m}" for v in ("mlm_accuracy", "mlm_accuracy_refit")
                          for m in ("pretrained", "initial")}  # the map has none
    for m in ("pretrained", "initial"):
        for v, style in (("mlm_accuracy", "-"), ("mlm_accuracy_refit", "--")):
            np.testing.assert_array_equal(lines[f"{v}:{m}"].get_ydata(), store[v].sel(network=m).values)
            np.testing.assert_array_equal(lines[f"{v}:{m}"].get_xdata(), store["mlm_step"].values)
            assert lines[f"{v}:{m}"].get_linestyle() == style


def test_a_spec_of_maps_only_is_refused(tmp_path):
    spec = write_spec(tmp_path, maps_spec("maps", steps=10, samples=4, measures="""
        [[measure]]
        kind = "mlm_readout"
        """))
    out = run_cli("plan", spec, cwd=tmp_path)
    assert out.returncode == 65 and "mlm_readout reads text models" in out.stderr

