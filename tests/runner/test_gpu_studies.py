"""End-to-end on CUDA (skipped without it): every shipped tiny spec applies on the GPU through the
real CLI, early exit equals a full run there, and every activation adapter reads CUDA models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.runner.helpers import maps_spec, run_cli, write_spec

pytestmark = pytest.mark.requires_gpu

ROOT = Path(__file__).resolve().parents[2]
TINY_SPECS = ["specs/quickstart.toml", "specs/tiny/lstm_tiny.toml", "specs/tiny/transject_tiny.toml",
              "specs/tiny/scaffold_tiny.toml"]


@pytest.mark.parametrize("shipped", TINY_SPECS)
def test_a_tiny_spec_applies_on_cuda(shipped, tmp_path):
    text = (ROOT / shipped).read_text().replace("[experiment]\n", f'[experiment]\nstore = "{tmp_path / "gpu.zarr"}"\n', 1)
    spec = write_spec(tmp_path, text, "gpu.toml")
    applied = run_cli("apply", spec, "-q", "--device", "cuda", cwd=tmp_path, timeout=600)
    assert applied.returncode == 0, applied.stderr
    assert run_cli("verify", tmp_path / "gpu.zarr", cwd=tmp_path).returncode == 0
    status = json.loads(run_cli("status", tmp_path / "gpu.zarr", "--json", cwd=tmp_path).stdout)
    assert status["state"] == "done" and status["tasks"], status
    assert {t["state"] for t in status["tasks"]} <= {"done", "n/a"}, status["tasks"]
    recorded = json.loads(run_cli("show", tmp_path / "gpu.zarr", "--json", cwd=tmp_path).stdout)["tasks"]
    assert recorded and all(t["device"].startswith("cuda") for t in recorded), recorded


def test_early_exit_on_cuda_equals_the_full_run(tmp_path):
    import xarray as xr

    stores = {}
    for name, extra in (("full", ""), ("exit", "early_exit = true")):
        text = maps_spec(name, steps=600, samples=64, n=64).replace('precision = "fp64"', f'precision = "fp64"\n{extra}')
        d = tmp_path / name
        d.mkdir()
        assert run_cli("apply", write_spec(d, text), "-q", "--device", "cuda", cwd=d).returncode == 0
        stores[name] = xr.open_zarr(d / f"store/{name}.zarr", consolidated=False).load()
    exited = stores["exit"]
    xr.testing.assert_identical(stores["full"].drop_attrs(),
                                exited.drop_vars(["exit_step", "exit_period"]).drop_attrs())


def _adapters():
    from transformers import AlbertConfig, AlbertModel, AutoModel, GPT2Config

    from models.albert import AlbertMap
    from models.lstm import LSTMLanguageModel, LSTMLanguageModelConfig
    from models.transject import build_model

    torch.manual_seed(0)
    albert = AlbertMap(AlbertModel(AlbertConfig(vocab_size=64, embedding_size=16, hidden_size=32, num_attention_heads=4,
                                                intermediate_size=64, num_hidden_layers=2), add_pooling_layer=False).eval())
    return {
        "albert": albert,
        "lstm": LSTMLanguageModel(LSTMLanguageModelConfig(vocab_size=64, embedding_dim=8, hidden_dim=8)).eval(),
        "transject": build_model("transject", {"vocab_size": 64, "n_classes": 3, "d_model": 8, "n_layers": 2,
                                               "n_experts": 2, "variant": "transject"}).eval(),
        "gpt2": AutoModel.from_config(GPT2Config(vocab_size=64, n_embd=16, n_layer=2, n_head=2, n_positions=32)).eval(),
    }


@pytest.mark.parametrize("family", ["albert", "lstm", "transject", "gpt2"])
def test_activation_adapters_read_cuda_models_as_cpu_ones(family):
    from models.activations import tokens
    from models.registry import SUITES, family_for

    model = _adapters()[family]
    ids = torch.randint(5, 64, (3, 10), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    source = {"albert": "builtin:tiny-albert", "lstm": "builtin:lstm-lm", "transject": "builtin:transject"}
    fam = family_for(source[family]) if family in source else SUITES
    cpu = fam.activations(model).capture(tokens(ids, mask))
    gpu = fam.activations(model.cuda()).capture(tokens(ids.cuda(), mask.cuda()))
    assert list(gpu) == list(cpu)
    for name in cpu:
        assert gpu[name].device.type == "cuda", name
        torch.testing.assert_close(gpu[name].cpu(), cpu[name], atol=1e-4, rtol=1e-4)
