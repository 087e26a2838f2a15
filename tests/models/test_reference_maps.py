"""Reference maps: formulas, initial states, parameter validation."""

from __future__ import annotations

import pydantic
import pytest
import torch

from models import MAPS, MapInputs, build_map, params_model
from models.maps import CoupledLogisticMap, HenonMap, LogisticMap, Lorenz96Map, TanhReservoir


def _inputs(samples: int, seed: int = 0) -> MapInputs:
    return MapInputs(samples=samples, generator=torch.Generator().manual_seed(seed))


def test_registry():
    assert MAPS == {"logistic": LogisticMap, "henon": HenonMap, "tanh": TanhReservoir, "lorenz96": Lorenz96Map,
                    "coupled_logistic": CoupledLogisticMap}
    for name in MAPS:
        model = params_model(name)
        assert issubclass(model, pydantic.BaseModel)
        assert all(f.description for f in model.model_fields.values())  # field docstrings
        m = build_map(name, {}, seed=0, dtype=torch.float32, device="cpu")
        assert not m.needs_tokens and m.attention_probs(torch.zeros(1, 1, 1)) is None
    with pytest.raises(ValueError, match="unknown reference map"):
        build_map("lorenz", {}, seed=0, dtype=torch.float32, device="cpu")
    with pytest.raises(ValueError, match="unknown reference map"):
        params_model("lorenz")


def test_coupled_logistic_maps_keep_synchrony_and_scale_transverse_perturbations():
    """Kaneko's globally coupled maps: on the synchronised set each unit follows f(x) = r x (1 - x);
    a perturbation that sums to zero over the units is multiplied by (1 - eps) f'(x) in one step."""
    m = build_map("coupled_logistic", {"eps": 0.3, "units": 5}, seed=0, dtype=torch.float64, device="cpu")
    assert m.token_equivariant and not m.needs_tokens
    x0 = m.initial_state(MapInputs(samples=3, generator=torch.Generator().manual_seed(0)))
    assert x0.shape == (3, 5, 1) and (x0 >= 0.01).all() and (x0 <= 0.99).all()
    assert (x0.amax(1) - x0.amin(1) <= 0.2).all()  # the default spread: 0.1 either side
    c = torch.tensor([0.2, 0.5, 0.9], dtype=torch.float64).view(3, 1, 1).expand(3, 5, 1)
    torch.testing.assert_close(m.step(c), (4 * c * (1 - c)))
    d = torch.tensor([1.0, -2.0, 0.5, 0.25, 0.25], dtype=torch.float64).view(1, 5, 1) * 1e-9
    grown = m.step(c + d) - m.step(c)
    torch.testing.assert_close(grown, 0.7 * (4 - 8 * c) * d, rtol=1e-6, atol=1e-14)
    # permuting the units permutes the image
    z = torch.rand(2, 5, 1, dtype=torch.float64)
    perm = torch.tensor([3, 1, 4, 0, 2])
    torch.testing.assert_close(m.step(z[:, perm]), m.step(z)[:, perm])


def test_logistic():
    m = build_map("logistic", {"r": 3.7}, seed=0, dtype=torch.float64, device="cpu")
    x = m.initial_state(_inputs(1000))
    assert x.shape == (1000, 1, 1) and x.dtype == torch.float64
    assert x.min() >= 0.05 and x.max() <= 0.95
    torch.testing.assert_close(m.step(x), 3.7 * x * (1 - x), atol=0, rtol=0)
    # r = 4 keeps the orbit in [0, 1]
    m4 = build_map("logistic", {}, seed=0, dtype=torch.float64, device="cpu")
    x = m4.initial_state(_inputs(100))
    for _ in range(200):
        x = m4.step(x)
    assert x.min() >= 0 and x.max() <= 1


def test_henon():
    m = build_map("henon", {}, seed=0, dtype=torch.float64, device="cpu")
    x = m.initial_state(_inputs(500))
    assert x.shape == (500, 1, 2)
    # on the attractor: the classic bounding box, and the points are spread out
    assert x[..., 0].abs().max() < 1.3 and x[..., 1].abs().max() < 0.4
    assert x[..., 0].std() > 0.5
    y = m.step(x)
    torch.testing.assert_close(y[..., 0], 1 - 1.4 * x[..., 0] * x[..., 0] + x[..., 1], atol=0, rtol=0)
    torch.testing.assert_close(y[..., 1], 0.3 * x[..., 0], atol=0, rtol=0)


def test_tanh_reservoir():
    m = build_map("tanh", {"g": 2.0, "n": 400}, seed=3, dtype=torch.float64, device="cpu")
    assert m.W.shape == (400, 400)
    assert m.W.var().item() == pytest.approx(1 / 400, rel=0.02)
    assert abs(m.W.mean().item()) < 3e-3
    x = m.initial_state(_inputs(8))
    assert x.shape == (8, 1, 400)
    assert x.std().item() == pytest.approx(1.0, rel=0.05)
    torch.testing.assert_close(m.step(x)[:, 0], torch.tanh(2.0 * x[:, 0] @ m.W.T), atol=1e-12, rtol=0)
    same = build_map("tanh", {"g": 2.0, "n": 400}, seed=3, dtype=torch.float64, device="cpu")
    other = build_map("tanh", {"g": 2.0, "n": 400}, seed=4, dtype=torch.float64, device="cpu")
    assert torch.equal(m.W, same.W) and not torch.equal(m.W, other.W)
    # float32 maps hold the float32 cast of the same W
    m32 = build_map("tanh", {"g": 2.0, "n": 400}, seed=3, dtype=torch.float32, device="cpu")
    assert m32.W.dtype == torch.float32 and torch.equal(m32.W, m.W.float())
    assert m32.initial_state(_inputs(2)).dtype == torch.float32


def test_initial_states_follow_the_generator():
    m = build_map("henon", {}, seed=0, dtype=torch.float32, device="cpu")
    assert torch.equal(m.initial_state(_inputs(4, 1)), m.initial_state(_inputs(4, 1)))
    assert not torch.equal(m.initial_state(_inputs(4, 1)), m.initial_state(_inputs(4, 2)))
    m.to(torch.float64)
    assert m.initial_state(_inputs(4)).dtype == torch.float64


@pytest.mark.parametrize(
    ("name", "params", "field"),
    [
        ("logistic", {"r": 0.0}, "r"),
        ("logistic", {"r": -1.0}, "r"),
        ("logistic", {"rate": 4.0}, "rate"),
        ("henon", {"c": 1.0}, "c"),
        ("tanh", {"g": 0.0}, "g"),
        ("tanh", {"n": 0}, "n"),
        ("tanh", {"n": 2.5}, "n"),
    ],
)
def test_params_validation(name, params, field):
    with pytest.raises(pydantic.ValidationError, match=field):
        params_model(name).model_validate(params)
    with pytest.raises(ValueError):
        build_map(name, params, seed=0, dtype=torch.float32, device="cpu")


def test_params_are_frozen():
    p = params_model("logistic")()
    assert p.r == 4.0
    with pytest.raises(pydantic.ValidationError):
        p.r = 3.0
    assert params_model("henon")().a == 1.4 and params_model("henon")().b == 0.3
    assert params_model("tanh")().g == 1.5 and params_model("tanh")().n == 100


def test_lorenz96_is_the_flow_it_integrates():
    """One RK4 step of dt from a fixed point x_i = F stays there; a small dt follows dx/dt exactly."""
    m = build_map("lorenz96", {"n": 8, "forcing": 8.0, "dt": 0.05}, dtype=torch.float64)
    fixed = torch.full((1, 1, 8), 8.0, dtype=torch.float64)
    torch.testing.assert_close(m.step(fixed), fixed)  # (x_{i+1} - x_{i-2}) x_{i-1} = 0 and -x + F = 0
    x = torch.randn(2, 1, 8, dtype=torch.float64)
    fine = build_map("lorenz96", {"n": 8, "dt": 1e-6}, dtype=torch.float64)
    expected = (torch.roll(x, -1, -1) - torch.roll(x, 2, -1)) * torch.roll(x, 1, -1) - x + 8.0
    torch.testing.assert_close((fine.step(x) - x) / 1e-6, expected, rtol=1e-5, atol=1e-5)
