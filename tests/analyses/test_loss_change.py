"""Loss change allocation on a quadratic loss, where the exact answers are known."""

import pytest
import torch

from analyses.loss_change import LossChangeAllocator, group_allocations, loss_change_allocation

SHAPES = {"layer1.weight": (2, 2), "layer1.bias": (2,), "layer2.weight": (3,)}
SIZE = 9


def _problem():
    g = torch.Generator().manual_seed(0)
    m = torch.randn(SIZE, SIZE, generator=g, dtype=torch.float64)
    a = m @ m.T + torch.eye(SIZE, dtype=torch.float64)
    b = torch.randn(SIZE, generator=g, dtype=torch.float64)
    theta = torch.randn(SIZE, generator=g, dtype=torch.float64)
    return a, b, theta


def _split(flat):
    out, start = {}, 0
    for name, shape in SHAPES.items():
        size = torch.Size(shape).numel()
        out[name] = flat[start : start + size].reshape(shape)
        start += size
    return out


def _descend(steps=20, lr=0.02):
    """Gradient descent on L = 0.5 theta^T A theta + b^T theta; yields per-step data."""
    a, b, theta = _problem()
    loss = lambda t: 0.5 * t @ a @ t + b @ t  # noqa: E731
    grad = lambda t: a @ t + b  # noqa: E731
    for _ in range(steps):
        new = theta - lr * grad(theta)
        delta = new - theta
        yield {
            "grads": _split(grad(theta)),
            "next": _split(grad(new)),
            "mid": _split(grad(theta + 0.5 * delta)),
            "deltas": _split(delta),
            "change": loss(new) - loss(theta),
            "curvature": 0.5 * delta @ a @ delta,
        }
        theta = new


def test_trapezoid_and_simpson_are_exact_for_quadratics():
    trap, simpson = LossChangeAllocator(), LossChangeAllocator(elementwise=False)
    actual = 0.0
    for step in _descend():
        totals = trap.update(step["grads"], step["deltas"], step["next"])
        assert sum(totals.values()).item() == pytest.approx(step["change"].item(), abs=1e-12)
        simpson.update(step["grads"], step["deltas"], step["next"], step["mid"])
        actual += step["change"].item()
    assert actual < 0
    assert trap.total().item() == pytest.approx(actual, rel=1e-10)
    assert simpson.total().item() == pytest.approx(actual, rel=1e-10)
    assert trap.steps == 20


def test_first_order_error_is_the_curvature_term():
    first = LossChangeAllocator()
    actual, curvature = 0.0, 0.0
    for step in _descend():
        first.update(step["grads"], step["deltas"])
        actual += step["change"].item()
        curvature += step["curvature"].item()
    # L(t + D) - L(t) = g.D + 0.5 D^T A D exactly, so first order misses the last term.
    assert first.total().item() == pytest.approx(actual - curvature, rel=1e-10)
    # Plain gradient steps: every element's first-order allocation is -lr g_i^2 <= 0.
    assert all((alloc <= 0).all() for alloc in first.allocations().values())


def test_allocation_shapes_grouping_and_state():
    step = next(iter(_descend(steps=1)))
    alloc = loss_change_allocation(step["grads"], step["deltas"])
    assert {k: tuple(v.shape) for k, v in alloc.items()} == SHAPES
    acc = LossChangeAllocator()
    acc.update(step["grads"], step["deltas"])
    layers = group_allocations(acc.totals())
    assert set(layers) == {"layer1", "layer2"}
    assert layers["layer1"].item() == pytest.approx((alloc["layer1.weight"].sum() + alloc["layer1.bias"].sum()).item())
    assert sum(layers.values()).item() == pytest.approx(acc.total().item())
    copy = LossChangeAllocator()
    copy.load_state_dict(acc.state_dict())
    assert copy.total().item() == acc.total().item() and copy.steps == 1
    with pytest.raises(ValueError):
        loss_change_allocation({"x": torch.ones(2)}, {"y": torch.ones(2)})
