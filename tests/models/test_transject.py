"""TransJect and its baselines (models/transject.py): the theory of the paper checked on random
inputs -- orthogonality, Theorem 1's activation bound, Sigma's standardisation, the per-layer and
composite distance bounds of Theorem 2 (App. A.7), injectivity, convex expert weights, Eq. 4's
expectation -- plus builds, forward/backward, layer maps and the registry. Tiny sizes only."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F
from torch.nn.utils import parametrize

from models.registry import family_for
from models.transject import (BASELINES, VARIANTS, TransformerClassifier, TransformerConfig, TransJect,
                              TransJectConfig, build_model, entropic_residual)

ALL = VARIANTS + BASELINES


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny(name: str = "transject", seed: int = 0, **kw):
    torch.manual_seed(seed)
    if name in VARIANTS:
        cfg = dict(vocab_size=17, n_classes=3, d_model=6, n_layers=2, n_experts=3, variant=name)
        cfg.update(kw)
        return TransJect(TransJectConfig(**cfg))
    cfg = dict(vocab_size=17, n_classes=3, d_model=8, n_layers=2, n_heads=2, d_ff=16)
    cfg.update(kw)
    return build_model(name, cfg)


def strong(variant: str, n_layers: int = 2, seed: int = 0) -> TransJect:
    """fp64 TransJect with alpha_l close to 1, so the bounds are nearly attained (not vacuous)."""
    model = tiny(variant, seed=seed, n_layers=n_layers).double().reorthogonalize()
    with torch.no_grad():
        for layer in model.layers:
            layer.alpha_logit.fill_(6.0)  # alpha = 0.9975
            layer.expert_logits.copy_(torch.randn(len(layer.U), dtype=torch.float64))
            layer.W1.bias.normal_()
            layer.W2.bias.normal_()
    return model.eval()


def token_ratio(f, x, y):
    """||f(x) - f(y)|| / ||x - y|| per token (the maps act token-wise given Sigma)."""
    return torch.linalg.vector_norm(f(x) - f(y), dim=-1) / torch.linalg.vector_norm(x - y, dim=-1)


def random_pairs(n: int, seq: int, d: int, seed: int = 1):
    """Far pairs, near pairs and pairs at large scale, float64."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, seq, d, generator=g, dtype=torch.float64)
    scale = torch.tensor([1.0, 1e-6, 5.0], dtype=torch.float64).repeat_interleave(n // 3 + 1)[:n].view(n, 1, 1)
    y = x + scale * torch.randn(n, seq, d, generator=g, dtype=torch.float64)
    x = x * torch.where(scale > 2, 4.0, 1.0)
    y = y * torch.where(scale > 2, 4.0, 1.0)
    return x, y


def orthogonal_weights(model):
    return [m.weight for m in model.modules() if parametrize.is_parametrized(m, "weight")]


# --------------------------------------------------------------------------------------------
# configs and builds


def test_config_defaults_follow_paper():
    cfg = TransJectConfig(vocab_size=100, n_classes=2)
    assert (cfg.d_model, cfg.n_layers, cfg.n_experts, cfg.variant, cfg.pooling) == (512, 6, 4, "transject", "mean")
    base = TransformerConfig(vocab_size=100, n_classes=2)
    assert (base.d_model, base.n_layers, base.n_heads, base.d_ff, base.dropout) == (512, 6, 8, 2048, 0.1)
    for bad in (dict(variant="sparse-transject"), dict(d_model=7), dict(alpha_init=0.0), dict(alpha_init=1.0),
                dict(pooling="first")):
        with pytest.raises(ValueError):
            TransJectConfig(vocab_size=10, n_classes=2, **bad)
    with pytest.raises(ValueError):
        TransformerConfig(vocab_size=10, n_classes=2, d_model=10, n_heads=4)
    with pytest.raises(ValueError, match="unknown model"):
        build_model("lstm", {})
    assert set(VARIANTS) == {"transject", "random-transject", "entropic-transject", "random-entropic-transject"}


@pytest.mark.parametrize("name", ALL)
def test_builds_runs_forward_and_backward(name):
    model = tiny(name).train()
    ids = torch.randint(0, 17, (3, 5))
    mask = torch.ones(3, 5, dtype=torch.long)
    mask[0, 3:] = 0
    out = model(ids, mask, output_hidden_states=True, generator=torch.Generator().manual_seed(0))
    d = model.config.d_model
    assert out.logits.shape == (3, 3)
    assert len(out.hidden_states) == model.config.n_layers + 1
    assert all(h.shape == (3, 5, d) for h in out.hidden_states)
    loss = F.cross_entropy(out.logits, torch.tensor([0, 1, 2])) + 1e-3 * out.reconstruction_loss
    loss.backward()
    for pname, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), pname
    if name in VARIANTS:
        assert len(out.expert_weights) == 2 and all(w.shape == (3,) for w in out.expert_weights)
        assert (out.reconstruction_loss > 0) == (not model.config.random_sigma)
        assert model(ids, mask).hidden_states is None
        assert not any(isinstance(m, torch.nn.Dropout) for m in model.modules())  # no dropout in TransJect
    else:
        assert out.expert_weights == [] and out.sigma is None
        layer_type = "ReZeroEncoderLayer" if name == "transformer-rezero" else "TransformerEncoderLayer"
        assert all(type(layer).__name__ == layer_type for layer in model.layers)


@pytest.mark.parametrize("name", ALL)
def test_padding_does_not_change_logits(name):
    model = tiny(name).eval()
    ids = torch.randint(0, 17, (2, 6))
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]])
    other = ids.clone()
    other[0, 4:] = (ids[0, 4:] + 5) % 17
    g = lambda: torch.Generator().manual_seed(3)  # noqa: E731
    with torch.no_grad():
        a = model(ids, mask, generator=g()).logits
        b = model(other, mask, generator=g()).logits
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_max_pooling_head():
    model = tiny("transject", pooling="max").eval()
    ids = torch.randint(0, 17, (2, 4))
    out = model(ids, output_hidden_states=True)
    torch.testing.assert_close(out.logits, model.classifier(out.hidden_states[-1].amax(1)))


@pytest.mark.parametrize("source, cls", [("builtin:transject", TransJect),
                                         ("builtin:transformer", TransformerClassifier),
                                         ("builtin:transformer-rezero", TransformerClassifier)])
def test_registry_builds_from_a_config_dict(source, cls):
    family = family_for(source)
    assert family is not None and family.name == "transject" and family.role == "trainable"
    params = dict(vocab_size=11, n_classes=2, d_model=8, n_layers=2)
    if source == "builtin:transject":
        params.update(n_experts=2, variant="random-entropic-transject")
    a = family.build(source, params=params, seed=4)
    b = family.build(source, params=params, seed=4)
    assert isinstance(a, cls)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    if source == "builtin:transject":
        assert a.config.entropic and a.config.random_sigma
    else:
        assert a.config.rezero == source.endswith("rezero")
    c = family.build(source, params=params, seed=4, dtype=torch.float64)
    assert all(w.dtype == torch.float64 for w in c.parameters())


# --------------------------------------------------------------------------------------------
# orthogonality, Theorem 1, Sigma


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_orthogonal_matrix_is_orthogonal(variant):
    model = tiny(variant)
    weights = orthogonal_weights(model)
    # per layer: U_e, V_e for every expert, W1, W2; plus the eigenvectors U of the Approx. variants
    assert len(weights) == 2 * (2 * 3 + 2) + (0 if model.config.random_sigma else 1)
    eye = torch.eye(6)
    for w in weights:
        assert (w.T @ w - eye).abs().max() < 1e-5 and (w @ w.T - eye).abs().max() < 1e-5
    # still orthogonal after an optimiser step
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    model(torch.randint(0, 17, (2, 4))).logits.sum().backward()
    opt.step()
    for w in orthogonal_weights(model):
        assert (w.T @ w - eye).abs().max() < 1e-5
    model.double().reorthogonalize()
    eye = eye.double()
    for w in orthogonal_weights(model):
        assert w.dtype == torch.float64 and (w.T @ w - eye).abs().max() < 1e-12


@pytest.mark.parametrize("variant", ["transject", "random-transject"])
def test_attention_activation_bound_is_max_sigma(variant):
    """Theorem 1: with orthogonal U, V the attention's linear part U Sigma V has norm max |Sigma| = 1."""
    model = tiny(variant).double().reorthogonalize()
    x0 = model.embed(torch.randint(0, 17, (3, 5)))
    sigma, _ = model.eigenvalues(x0)
    for s in sigma.reshape(-1, 6):
        for layer in model.layers:
            for u, v in zip(layer.U, layer.V):
                m = u.weight.T @ torch.diag(s) @ v.weight.T  # x -> V(U(x) * s) is x @ (U^T diag(s) V^T)
                sv = torch.linalg.svdvals(m)
                torch.testing.assert_close(sv, s.abs().sort(descending=True).values, rtol=0, atol=1e-12)
                assert abs(torch.linalg.matrix_norm(m, 2).item() - 1.0) < 1e-12


@pytest.mark.parametrize("variant", VARIANTS)
def test_sigma_is_standardised(variant):
    model = tiny(variant).double()
    ids = torch.randint(0, 17, (4, 7))
    mask = torch.ones(4, 7, dtype=torch.long)
    mask[1, 5:] = 0
    x0 = model.embed(ids)
    sigma, recon = model.eigenvalues(x0, mask)
    assert sigma.shape == ((6,) if model.config.random_sigma else (4, 6))
    torch.testing.assert_close(sigma.abs().amax(-1), torch.ones_like(sigma[..., 0]), rtol=0, atol=1e-15)
    if model.config.random_sigma:
        assert recon == 0
        torch.testing.assert_close(sigma, model.sigma_raw / model.sigma_raw.abs().max())
    else:
        assert (sigma >= -1e-12).all()  # X^T X is positive semi-definite
        assert 0 <= recon <= 1
        # standardised: independent of the scale of X0; padding takes no part
        torch.testing.assert_close(model.eigenvalues(3.0 * x0, mask)[0], sigma)
        x0b = x0.clone()
        x0b[1, 5:] = 100.0
        torch.testing.assert_close(model.eigenvalues(x0b, mask)[0], sigma)


def test_reconstruction_loss_recovers_the_spectrum():
    """Minimising ||X^T X - U Sigma U^T|| over orthogonal U gives the eigenvalues of X^T X (Sec. 3.1)."""
    model = tiny("transject", d_model=4).double()
    x0 = torch.randn(1, 9, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    opt = torch.optim.Adam(model.eigvecs.parameters(), lr=0.05)
    start = model.eigenvalues(x0)[1].item()
    for _ in range(300):
        opt.zero_grad()
        loss = model.eigenvalues(x0)[1]
        loss.backward()
        opt.step()
    sigma, recon = model.eigenvalues(x0)
    eig = torch.linalg.eigvalsh(x0[0].T @ x0[0])
    assert start > 1e-2 and recon < 1e-8
    torch.testing.assert_close(sigma[0].sort().values, eig / eig.max(), rtol=0, atol=1e-4)


# --------------------------------------------------------------------------------------------
# Theorem 2: injective, Lipschitz, bounded below


@pytest.mark.parametrize("variant", ["transject", "random-transject"])
def test_one_layer_stays_within_the_proved_bounds(variant):
    """App. A.7: with a = alpha_l / L, (1 - a)^2 <= ratio <= (1 + a)^2, hence within [1/4, (1 + 1/L)^2]
    for L = 2 (the paper's lower bound 0.25)."""
    L = 2
    model = strong(variant, n_layers=L)
    x, y = random_pairs(300, 4, 6)
    x0 = torch.randn_like(x)
    for index, layer in enumerate(model.layers):
        a = (layer.alpha / L).item()
        with torch.no_grad():
            r = token_ratio(model.layer_map(index, x0), x, y)
        assert r.min() >= (1 - a) ** 2 - 1e-9 and r.max() <= (1 + a) ** 2 + 1e-9
        assert r.min() >= 0.25 - 1e-9 and r.max() <= (1 + 1 / L) ** 2
        assert r.max() - r.min() > 0.3  # the layer is far from an isometry: the bounds are tested
        # the attention map MOE o IR alone: (1 - a) <= ratio <= 1 + a
        with torch.no_grad():
            ra = token_ratio(lambda z: layer.moe(z, model._broadcast(model.eigenvalues(x0)[0])), x, y)
        assert ra.min() >= 1 - a - 1e-9 and ra.max() <= 1 + a + 1e-9


@pytest.mark.parametrize("variant, n_layers", [("transject", 2), ("random-transject", 6)])
def test_encoder_is_lipschitz_with_bound_e_squared(variant, n_layers):
    """Theorem 2: the L-layer composite is Lipschitz below (1 + 1/L)^(2L) < e^2."""
    model = strong(variant, n_layers=n_layers)
    x, y = random_pairs(150, 3, 6, seed=5)
    x0 = torch.randn_like(x)
    maps = [model.layer_map(i, x0) for i in range(n_layers)]

    def encoder(z):
        for f in maps:
            z = f(z)
        return z

    with torch.no_grad():
        r = token_ratio(encoder, x, y)
    a = max(layer.alpha.item() for layer in model.layers) / n_layers
    assert r.max() <= (1 + a) ** (2 * n_layers) + 1e-9 <= math.e ** 2
    assert r.min() >= (1 - a) ** (2 * n_layers) - 1e-9 > 0


@pytest.mark.parametrize("variant", ["transject", "random-transject"])
def test_layer_is_injective_and_inverted_by_fixed_point_iteration(variant):
    """Lemma 3 / Corollaries 2-3: x + a G(x) with Lip(a G) < 1 is one-to-one; Banach's fixed point
    z <- y - a G(z) finds the unique preimage, for ORF and then for MOE o IR."""
    model = strong(variant)
    layer, L = model.layers[0], 2
    x = torch.randn(5, 4, 6, dtype=torch.float64)
    sigma = model._broadcast(model.eigenvalues(torch.randn_like(x))[0])
    a = layer.alpha / L
    with torch.no_grad():
        y = layer(x, sigma)
        h = y.clone()
        for _ in range(200):  # invert ORF: h + a ELU(ELU(h W1 + b1) W2 + b2) = y
            h = y - a * F.elu(layer.W2(F.elu(layer.W1(h))))
        z = h.clone()
        for _ in range(200):  # invert MOE o IR: z + a sum_e lambda_e F_e(z) = h
            z = h - (layer.moe(z, sigma) - z)
    torch.testing.assert_close(z, x, rtol=0, atol=1e-10)
    # distinct inputs never collide, however close
    x2 = x + 1e-9 * torch.randn_like(x)
    with torch.no_grad():
        assert (torch.linalg.vector_norm(layer(x2, sigma) - y, dim=-1) > 0).all()
        assert (token_ratio(lambda v: layer(v, sigma), x, x2) >= (1 - a.item()) ** 2 - 1e-6).all()


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_the_per_layer_bounds_are_attained(sign):
    """Sharpness: with Sigma = 1, V_e = +-U_e^T, W2 = +-W1^T and every ELU in its linear part, one
    layer scales distances by exactly (1 + a)^2 (sign +) or (1 - a)^2 (sign -), a = alpha_l / L."""
    model = strong("random-transject")
    layer, big = model.layers[0], 1e3
    with torch.no_grad():
        model.sigma_raw.fill_(0.5)
        for u, v in zip(layer.U, layer.V):
            v.weight = sign * u.weight.T
        layer.W2.weight = sign * layer.W1.weight.T
        layer.W1.bias.fill_(1e3 * big)  # x W1 + b1 > 0
        b2 = -(layer.W2(layer.W1.bias) - layer.W2.bias) + big  # ELU(x W1 + b1) W2 + b2 = +-x + big
        layer.W2.bias.copy_(b2)
        x = sign * (big + torch.rand(40, 3, 6, dtype=torch.float64))  # ELU(+-x U Sigma V) = +-x: linear
        y = x + sign * torch.rand_like(x)
        r = token_ratio(model.layer_map(0), x, y)
    a = layer.alpha.item() / 2
    torch.testing.assert_close(r, torch.full_like(r, (1 + sign * a) ** 2), rtol=0, atol=1e-9)


def test_entropic_variant_is_not_bounded_by_theorem_2():
    """Sec. 3.5: the entropic residual can expand by 1.5 per layer, so L = 6 such layers exceed e^2."""
    model = tiny("entropic-transject", n_layers=6).double().reorthogonalize().eval()
    x, y = random_pairs(30, 3, 6)
    x0 = torch.randn_like(x)
    u = torch.full((3, 6), 0.1, dtype=torch.float64)  # every neuron in Eq. 4's first case, 1.5 x + a F(x)
    with torch.no_grad():
        z, w = x, y
        for i in range(6):
            f = model.layer_map(i, x0, u=u)
            z, w = f(z), f(w)
    r = torch.linalg.vector_norm(z - w, dim=-1) / torch.linalg.vector_norm(x - y, dim=-1)
    assert r.min() > math.e ** 2


def test_vanilla_transformer_exceeds_the_bound():
    """Post-LN dot-product attention is not Lipschitz with a bound independent of the input
    (Kim et al. 2021): near-constant small inputs are blown up by LayerNorm far beyond e^2,
    where TransJect's layer stays within its bound on the same pairs."""
    torch.manual_seed(0)
    base = tiny("transformer", dropout=0.0).double().eval()
    x = 1e-3 * torch.randn(50, 4, 8, dtype=torch.float64)
    y = x + 1e-6 * torch.randn_like(x)
    with torch.no_grad():
        f = base.layer_map(0)
        r = torch.linalg.matrix_norm(f(x) - f(y)) / torch.linalg.matrix_norm(x - y)
    assert r.max() > 100 * math.e ** 2
    # ReZero with its weights scaled up: also unbounded
    rz = tiny("transformer-rezero", dropout=0.0).double().eval()
    with torch.no_grad():
        layer = rz.layers[0]
        layer.resweight.fill_(1.0)
        for lin in (layer.self_attn.out_proj, layer.linear1, layer.linear2):
            lin.weight.mul_(10.0)
        x = torch.randn(50, 4, 8, dtype=torch.float64)
        y = x + 1e-6 * torch.randn_like(x)
        f = rz.layer_map(0)
        r = torch.linalg.matrix_norm(f(x) - f(y)) / torch.linalg.matrix_norm(x - y)
    assert r.max() > 10 * math.e ** 2
    # TransJect on the first pairs
    model = strong("transject")
    x = 1e-3 * torch.randn(50, 4, 6, dtype=torch.float64)
    y = x + 1e-6 * torch.randn_like(x)
    with torch.no_grad():
        assert token_ratio(model.layer_map(0, torch.randn_like(x)), x, y).max() <= 2.25


# --------------------------------------------------------------------------------------------
# experts, entropic residual, layer maps


@pytest.mark.parametrize("variant", VARIANTS)
def test_input_gate_weighs_each_sample_and_trains(variant):
    # gate = "input" (the authors' code): lambda_{b,e} = softmax_e(w . max_j X^(l,e)_{b,j} + c).
    model = tiny(variant, n_experts=3, gate="input").double()
    model.reorthogonalize()
    ids = torch.randint(0, 17, (4, 5), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(4, 5, dtype=torch.long)
    mask[1, 3:] = 0
    out = model(ids, mask, output_hidden_states=True, generator=torch.Generator().manual_seed(0))
    assert not any(hasattr(layer, "expert_logits") for layer in model.layers)
    for l, (layer, w) in enumerate(zip(model.layers, out.expert_weights)):
        assert w.shape == (4, 3) and (w >= 0).all()
        torch.testing.assert_close(w.sum(1), torch.ones(4, dtype=torch.float64))
        assert (w.std(dim=0) > 1e-6).any()  # the samples' weights differ
        # the known answer, from the experts' outputs by hand (non-entropic: no random draw)
        if not layer.entropic:
            x = out.hidden_states[l]
            sigma = model._broadcast(model.eigenvalues(out.hidden_states[0], mask)[0])
            pooled = torch.stack([layer.expert_output(x, sigma, e).masked_fill(~mask.bool()[..., None], -math.inf)
                                  .amax(1) for e in range(3)], 1)
            want = torch.softmax(pooled @ layer.expert_score.weight[0] + layer.expert_score.bias, dim=1)
            torch.testing.assert_close(w, want)
    # one training step moves the gate
    before = [layer.expert_score.weight.detach().clone() for layer in model.layers]
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss = F.cross_entropy(out.logits, torch.tensor([0, 1, 2, 0])) + out.reconstruction_loss
    loss.backward()
    assert all(layer.expert_score.weight.grad.abs().sum() > 0 for layer in model.layers)
    opt.step()
    assert all(not torch.equal(b, layer.expert_score.weight) for b, layer in zip(before, model.layers))


def test_gate_is_checked_and_learned_stays_the_default():
    assert TransJectConfig(vocab_size=5, n_classes=2).gate == "learned"
    with pytest.raises(ValueError, match="gate"):
        TransJectConfig(vocab_size=5, n_classes=2, gate="token")
    with pytest.raises(ValueError, match="pass them"):
        tiny("transject", gate="input").layers[0].expert_weights()


@pytest.mark.parametrize("variant", VARIANTS)
def test_expert_weights_are_convex(variant):
    model = tiny(variant, n_experts=4)
    ids = torch.randint(0, 17, (2, 5))
    with torch.no_grad():
        for layer in model.layers:
            layer.expert_logits.copy_(torch.tensor([30.0, -4.0, 0.5, -60.0]))
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    for _ in range(2):
        out = model(ids, generator=torch.Generator().manual_seed(0))
        for w in out.expert_weights:
            assert w.shape == (4,) and (w >= 0).all()
            torch.testing.assert_close(w.sum(), torch.tensor(1.0))
        opt.zero_grad()
        out.logits.logsumexp(-1).sum().backward()
        opt.step()
    assert all(layer.expert_logits.grad.abs().sum() > 0 for layer in model.layers)


def test_entropic_residual_has_the_expectation_of_eq3():
    """Eq. 4: E_u[X^(l)] = X^(l-1) + (alpha/L) F(X^(l-1)); one case per neuron, shared by all tokens."""
    x, fx = torch.randn(2, 5, 8, dtype=torch.float64), torch.randn(2, 5, 8, dtype=torch.float64)
    cases = [entropic_residual(x, fx, torch.full((8,), u, dtype=torch.float64)) for u in (0.1, 0.3, 0.6, 0.9)]
    torch.testing.assert_close(sum(cases) / 4, x + fx, rtol=0, atol=1e-14)
    torch.testing.assert_close(cases[0], 1.5 * x + fx)
    torch.testing.assert_close(cases[1], 1.5 * x - fx)
    torch.testing.assert_close(cases[2], 4 * fx)
    torch.testing.assert_close(cases[3], x)
    u = torch.tensor([0.1, 0.3, 0.6, 0.9, 0.25, 0.5, 0.75, 1.0], dtype=torch.float64)
    mixed = entropic_residual(x, fx, u)
    for i, c in enumerate((0, 1, 2, 3, 0, 1, 2, 3)):
        torch.testing.assert_close(mixed[..., i], cases[c][..., i])


def test_entropic_draws_follow_the_generator():
    model = tiny("entropic-transject").eval()
    ids = torch.randint(0, 17, (2, 5))
    run = lambda seed: model(ids, generator=torch.Generator().manual_seed(seed)).logits  # noqa: E731
    with torch.no_grad():
        torch.testing.assert_close(run(1), run(1), rtol=0, atol=0)
        assert not torch.equal(run(1), run(2))
        x0 = model.embed(ids)
        u = torch.rand(3, 6)
        f = model.layer_map(0, x0, u=u)
        torch.testing.assert_close(f(x0), f(x0), rtol=0, atol=0)


@pytest.mark.parametrize("name", ALL)
def test_layer_maps_compose_to_the_forward(name):
    model = tiny(name).eval()
    ids = torch.randint(0, 17, (2, 5))
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])
    with torch.no_grad():
        out = model(ids, mask, output_hidden_states=True, generator=torch.Generator().manual_seed(7))
        x0 = model.embed(ids)
        g = torch.Generator().manual_seed(7)
        x = x0
        torch.testing.assert_close(x, out.hidden_states[0])
        for i in range(model.config.n_layers):
            x = model.layer_map(i, x0, mask, generator=g)(x)
            torch.testing.assert_close(x[mask.bool()], out.hidden_states[i + 1][mask.bool()])
    if name in ("transject", "entropic-transject"):
        with pytest.raises(ValueError, match="x0"):
            model.layer_map(0)
