"""GPU checks of the iterate path (skipped without CUDA): no host synchronisation inside a
segment, and the same statistics as on the CPU."""

from __future__ import annotations

import time

import pytest
import torch

from runner.studies.depth.iterate import IteratePass, PassInputs
from runner.studies.depth.micro_batches import apply_map

pytestmark = pytest.mark.requires_gpu


class _Report:
    def progress(self, step): pass
    def provide(self, resource): pass
    def note(self, event, **fields): pass
    def warn(self, message): pass


def _pass(tmp_path, device):
    from runner.run.prepare import prepare
    from runner.storage.store import Store
    from runner.studies.depth.layout import build_layout
    from tests.runner.helpers import maps_spec, write_spec

    spec_path = write_spec(tmp_path, maps_spec("gpu", steps=200, samples=64, n=128))
    p = prepare(spec_path)
    layout = build_layout(p.spec, p.state)
    store = Store(tmp_path / "gpu.zarr")
    store.open(layout, {})
    net = p.state[1]  # the tanh reservoir
    tasks = [t for t in p.tasks if t.network == net.index and t.kind == "iterate"]
    return IteratePass(p.spec, layout, net, [t.measure for t in tasks], [t.id for t in tasks], store,
                       PassInputs(None, None), torch.device(device), tmp_path / "ckpt.safetensors", _Report())


def test_a_segment_never_synchronises_with_the_host(tmp_path):
    
    from runner.studies.depth.iterate import build_map
    from runner.studies.depth.measure import Segment

    p = _pass(tmp_path, "cuda")
    p.model = build_map(p.spec, p.net, p.device)
    _, z, diverged = p._start()
    seg = Segment(0, 100, False, p.T)
    bufs = {m.kind(): m.buffers(p, seg) for m in p.active}
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for t in range(100):
            diverged = p._observe(t, z, diverged, bufs, seg)
            z, _ = apply_map(p.model, z, None, None)
            for m in p.twins:
                rows = p.twin_rows[m.kind()]
                z[rows] = m.advance(p, t + 1, z[: p.S], z[rows], bufs.get(m.kind(), {}), seg)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_cuda_and_cpu_give_the_same_exponents(tmp_path):
    rates = {}
    for device in ("cpu", "cuda"):
        d = tmp_path / device
        d.mkdir()
        p = _pass(d, device)
        p.run()
        rates[device] = p.store.read("lyapunov_per_step", (p.net.index,)).mean()
    assert rates["cuda"] == pytest.approx(rates["cpu"], abs=0.01)


# ---------------------------------------------------------------------- CUDA-only paths


def _run(*args, cwd, **env):
    from tests.runner.helpers import run_cli

    return run_cli(*args, cwd=cwd, timeout=900, **env)


def test_the_training_study_runs_every_measure_on_cuda(tmp_path):
    """Sparsity of gradients and loss change allocation take gradients of eval-mode LSTMs: on cuDNN
    that needs the LSTM modules in training mode (models.lstm); the whole tiny study must finish."""
    import xarray as xr

    from tests.training.training_helpers import tiny_spec

    spec = tiny_spec(tmp_path, "cuda")
    result = _run("apply", spec, "-q", "--device", "cuda", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    ds = xr.open_zarr(tmp_path / "cuda.zarr")
    assert ds.chi_mean.sel(quantity="gradient").notnull().any() and ds.lca.notnull().any()
    assert ds.svcca_final.notnull().any() and ds.probe_accuracy.notnull().any()


def test_training_resume_after_kill_is_bitwise_equal_on_cuda(tmp_path):
    import numpy as np
    import xarray as xr

    from tests.runner.helpers import popen_cli
    from tests.training.training_helpers import tiny_spec

    ref = tiny_spec(tmp_path, "ref")
    assert _run("apply", ref, "-q", "--device", "cuda", cwd=tmp_path).returncode == 0
    spec = tiny_spec(tmp_path, "killed")
    proc = popen_cli("apply", spec, "-q", "--device", "cuda", cwd=tmp_path, RUNNER_TEST_STALL="lm@27")
    deadline = time.monotonic() + 600
    while not list((tmp_path / "killed.runner" / "checkpoints").glob("*/*/stalled")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.kill()
    proc.communicate()
    next((tmp_path / "killed.runner" / "checkpoints").glob("*/*/stalled")).unlink()
    assert _run("apply", spec, "-q", "--device", "cuda", cwd=tmp_path).returncode == 0
    a, b = xr.open_zarr(tmp_path / "ref.zarr"), xr.open_zarr(tmp_path / "killed.zarr")
    for name in a.data_vars:
        if name != "checkpoint_path":
            np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)


def test_depth_resume_after_kill_is_equal_on_cuda(tmp_path):
    import xarray as xr

    from tests.runner.helpers import maps_spec, popen_cli, write_spec

    text = maps_spec("resume", steps=3000, samples=64, checkpoint_every=100, n=256).replace(
        'precision = "fp64"', 'precision = "fp32"').replace("k = 1e-8", "k = 1e-3")  # fp32 resolves k >= 1e-5
    ref = tmp_path / "ref"
    ref.mkdir()
    assert _run("apply", write_spec(ref, text), "--device", "cuda", cwd=ref).returncode == 0
    spec = write_spec(tmp_path, text)
    proc = popen_cli("apply", spec, "--device", "cuda", cwd=tmp_path, RUNNER_TEST_STALL="tanh@1550")
    marker = tmp_path / "store/resume.runner/stalled"
    deadline = time.monotonic() + 600
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.kill()
    proc.communicate()
    marker.unlink()
    assert _run("apply", spec, "--device", "cuda", cwd=tmp_path).returncode == 0
    a = xr.open_zarr(tmp_path / "store/resume.zarr").load().drop_attrs()
    b = xr.open_zarr(ref / "store/resume.zarr").load().drop_attrs()
    xr.testing.assert_equal(a, b)


def test_lstm_on_cuda_is_ieee_fp32_not_tf32():
    """cuDNN would run fp32 LSTMs in TF32 by default (about 1e-3 relative error); the runner asks
    for IEEE fp32, within 1e-5 of a float64 reference."""
    from runner.core.device import set_precision

    set_precision("fp32")
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(256, 256, batch_first=True)
    x = torch.randn(8, 64, 256)
    ref, _ = lstm.double()(x.double())
    out, _ = lstm.float().cuda()(x.cuda())
    assert (out.double().cpu() - ref).abs().max() < 1e-5


def test_oom_halves_the_micro_batch_and_gives_the_same_states():
    from transformers import AlbertConfig, AlbertModel

    from models.albert import AlbertMap
    

    config = AlbertConfig(vocab_size=50, embedding_size=16, hidden_size=64, num_attention_heads=4,
                          intermediate_size=8192, num_hidden_layers=1, max_position_embeddings=64)
    amap = AlbertMap(AlbertModel(config, add_pooling_layer=False).eval()).cuda().requires_grad_(False)
    z = torch.randn(2048, 32, 64, device="cuda")
    with torch.no_grad():
        whole, _ = apply_map(amap, z, None, None)  # about 2 GB of FFN activations at once
        torch.cuda.empty_cache()
        total = torch.cuda.get_device_properties(0).total_memory
        limit = torch.cuda.memory_allocated() + (768 << 20)
        torch.cuda.set_per_process_memory_fraction(limit / total)
        try:
            split, batch = apply_map(amap, z, None, None)
        finally:
            torch.cuda.set_per_process_memory_fraction(1.0)
    assert batch is not None and batch < 2048
    torch.testing.assert_close(split, whole, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------- the reduced iteration on CUDA


def test_a_reduced_step_never_synchronises_with_the_host(tmp_path):
    """Between the reduction's checks a step (full rows and one-token rows, the broadcast) and the
    measures stay on the device."""
    from runner.run.prepare import prepare
    from runner.storage.store import Store
    from runner.studies.depth.iterate import build_map
    from runner.studies.depth.layout import build_layout
    from runner.studies.depth.measure import Segment
    from tests.depth.test_reduce import COUPLED
    from tests.runner.helpers import write_spec

    p = prepare(write_spec(tmp_path, COUPLED.format(name="gpu", reduce='reduce = "synchronized"')))
    layout = build_layout(p.spec, p.state)
    store = Store(tmp_path / "gpu.zarr")
    store.open(layout, {})
    net = p.state[0]
    tasks = [t for t in p.tasks if t.network == net.index and t.kind == "iterate"]
    run = IteratePass(p.spec, layout, net, [t.measure for t in tasks], [t.id for t in tasks], store,
                      PassInputs(None, None), torch.device("cuda"), tmp_path / "ckpt.safetensors", _Report())
    run.model = build_map(run.spec, run.net, run.device)
    run.reduce = run._reduction(None)
    _, z, diverged = run._start()
    run.reduce.reduced_step[: run.S // 2] = 0  # half the samples reduced, half at full width
    run.reduce._rows()
    seg = Segment(0, 100, False, run.T)
    bufs = {m.kind(): m.buffers(run, seg) for m in run.active}
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for t in range(1, 49):  # no check falls here (every 10 steps in COUPLED: t = 10, 20, ... are avoided)
            if t % 10 == 0:
                continue
            diverged = run._observe(t, z, diverged, bufs, seg)
            z = run._step(t, z, None)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.equal(z[: run.S // 2], z[: run.S // 2, :1].expand_as(z[: run.S // 2]))


def test_the_reduced_coupled_maps_on_cuda_give_their_known_exponent(tmp_path):
    import math

    import xarray as xr

    from tests.depth.test_reduce import COUPLED
    from tests.runner.helpers import write_spec

    spec = write_spec(tmp_path, COUPLED.format(name="cuda", reduce='reduce = "synchronized"'))
    assert _run("apply", spec, "--device", "cuda", cwd=tmp_path).returncode == 0
    ds = xr.open_zarr(tmp_path / "store/cuda.zarr").load()
    stable = ds.sel(network="stable")
    assert stable.reduced_step.notnull().all() and stable.reduce_refused_step.isnull().all()
    assert stable.lyapunov_per_step.mean().item() == pytest.approx(math.log(2), abs=0.02)
    assert ds.sel(network="unstable").reduced_step.isnull().all()
