"""GPU checks of the iterate path (skipped without CUDA): no host synchronisation inside a
segment, and the same statistics as on the CPU."""

from __future__ import annotations

import pytest
import torch

from runner.tasks.iterate import IteratePass, PassInputs

pytestmark = pytest.mark.requires_gpu


def _pass(tmp_path, device):
    from runner.apply import prepare
    from runner.layout import build_layout
    from runner.store import Store
    from tests.runner.helpers import maps_spec, write_spec

    spec_path = write_spec(tmp_path, maps_spec("gpu", steps=200, samples=64, n=128))
    p = prepare(spec_path)
    layout = build_layout(p.spec, p.networks)
    store = Store(tmp_path / "gpu.zarr")
    store.open(layout, {})
    net = p.networks[1]  # the tanh reservoir
    tasks = p.plan.for_network(net.index)
    return IteratePass(p.spec, layout, net, [t for t in tasks if t.kind == "iterate"], store,
                       PassInputs(None, None), torch.device(device), tmp_path / "ckpt.pt")


def test_a_segment_never_synchronises_with_the_host(tmp_path):
    from runner.tasks.device import apply_map
    from runner.tasks.iterate import build_map

    p = _pass(tmp_path, "cuda")
    model = build_map(p.spec, p.net, p.device)
    state = p._initial(model)
    bufs = p._buffers(0, 100, last=False)
    z = state["z"]
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for t in range(100):
            p._record(t, z, state, None, bufs, 0, model)
            z, _ = apply_map(model, z, None, None)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_cuda_and_cpu_give_the_same_exponents(tmp_path):
    rates = {}
    for device in ("cpu", "cuda"):
        d = tmp_path / device
        d.mkdir()
        p = _pass(d, device)
        p.run(lambda step: None)
        rates[device] = p.store.read("lyapunov_per_step", (p.net.index,)).mean()
    assert rates["cuda"] == pytest.approx(rates["cpu"], abs=0.01)
