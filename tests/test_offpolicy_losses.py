"""Hand-computed checks of the pure off-policy losses and targets (arithmetic in the comments)."""

import math

import pytest
import torch
from torch import nn

from ctrl_rl.algos.offpolicy_losses import (
    categorical_mean,
    categorical_projection,
    categorical_support,
    categorical_td_loss,
    clipped_double_q,
    deterministic_actor_loss,
    lowest_mean_distribution,
    polyak_update,
    sac_actor_loss,
    sac_critic_loss,
    soft_q_target,
    squashed_gaussian_log_prob,
    squashed_gaussian_sample,
    td3_target_policy_noise,
    temperature_loss,
)


def t(*xs):
    return torch.tensor(xs, dtype=torch.float32)


LOG_SQRT_2PI = 0.9189385  # ½ ln 2π


# ---------------------------------------------------------------- squashed Gaussian


def test_squashed_sample_hand_case():
    # dim 0: μ=0, σ=1, ε=0 -> u=0, a=0: log N = -½ln2π = -.918939 ; log(1 - tanh² 0) = 0
    # dim 1: μ=.5, σ=.5, ε=1 -> u=1, a=tanh 1=.761594: log N = -½ - ln .5 - ½ln2π = -.225792
    #        log(1 - tanh² 1) = -2 ln cosh 1 = -.867562 -> -.225792 + .867562 = .141770
    # sum: -.918939 + .141770 = -.777169
    a, log_prob = squashed_gaussian_sample(t(0.0, 0.5)[None], t(0.0, math.log(0.5))[None], t(0.0, 1.0)[None])
    assert torch.allclose(a, t(0.0, 0.7615942)[None])
    assert log_prob.shape == (1,)
    assert log_prob.item() == pytest.approx(-0.777169, abs=1e-5)


def test_squashed_log_prob_matches_naive_formula_on_moderate_values():
    g = torch.Generator().manual_seed(0)
    mean = torch.randn(6, 3, generator=g, dtype=torch.float64)
    log_std = 0.5 * torch.randn(6, 3, generator=g, dtype=torch.float64)
    u = mean + log_std.exp() * torch.randn(6, 3, generator=g, dtype=torch.float64)
    naive = torch.distributions.Normal(mean, log_std.exp()).log_prob(u) - torch.log(1 - torch.tanh(u).square())
    assert torch.allclose(squashed_gaussian_log_prob(mean, log_std, u), naive.sum(-1), atol=1e-10)
    # one value by hand: u=1, σ=1: -.918939 + 2 ln cosh 1 (= .867562) = -.051377
    assert squashed_gaussian_log_prob(t(1.0)[None], t(0.0)[None], t(1.0)[None]).item() == pytest.approx(-0.051377, 1e-4)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_squashed_log_prob_is_finite_and_exact_at_saturation(sign):
    # u=±20, μ=±20, σ=1: log N = -.918939 ; log(1 - tanh² 20) = -2 ln cosh 20 = -2(20 - ln 2) = -38.613706
    # -> log π = -.918939 + 38.613706 = 37.694767. Naive float32: tanh(20) == 1 -> log 0 -> +inf.
    u = t(20.0 * sign).requires_grad_()
    log_prob = squashed_gaussian_log_prob(t(20.0 * sign), t(0.0), u)
    assert log_prob.item() == pytest.approx(37.694767, abs=1e-4)
    assert torch.log(1 - torch.tanh(u.detach()).square()).item() == -math.inf  # why the stable form
    log_prob.backward()
    assert torch.isfinite(u.grad).all()
    # ε=10, σ=2, μ=0 -> u=20: log N = -50 - ln 2 - .918939 = -51.612086 ; + 38.613706 = -12.998380
    a, lp = squashed_gaussian_sample(t(0.0)[None], t(math.log(2.0))[None], t(10.0 * sign)[None])
    assert a.item() == sign and lp.item() == pytest.approx(-12.998380, abs=1e-4)


# ---------------------------------------------------------------- SAC targets and losses


def test_soft_q_target_with_termination():
    # α=.2 ; row 0: 1 + .99 (10 - .2·(-1)) = 1 + .99·10.2 = 11.098 ; row 1 terminated (discount 0): y = r = 2
    y = soft_q_target(t(1.0, 2.0), t(0.99, 0.0), t(10.0, 100.0), t(-1.0, 5.0), 0.2)
    assert torch.allclose(y, t(11.098, 2.0))
    assert torch.allclose(soft_q_target(t(1.0, 2.0), t(0.99, 0.0), t(10.0, 100.0), t(-1.0, 5.0), t(0.2)), y)


def test_soft_q_target_n_step():
    # n=3, γ=.9: buffer gives r = 1 + .9 + .81 = 2.71 and discount γ³ = .729
    # y = 2.71 + .729 (10 - .5·2) = 2.71 + 6.561 = 9.271
    assert soft_q_target(t(2.71), t(0.729), t(10.0), t(2.0), 0.5).item() == pytest.approx(9.271, abs=1e-5)


def test_clipped_double_q():
    qs = torch.tensor([[1.0, 5.0], [3.0, 2.0]])  # [E=2, B=2]
    assert torch.equal(clipped_double_q(qs), t(1.0, 2.0))
    assert torch.equal(clipped_double_q(qs, "mean"), t(2.0, 3.5))
    with pytest.raises(ValueError, match="mode"):
        clipped_double_q(qs, "max")


def test_sac_critic_loss():
    # y = [0, 1] ; critic 0 [1, 2]: MSE (1+1)/2 = 1 -> ½ ; critic 1 [3, 0]: (9+1)/2 = 5 -> 2.5 ; sum 3
    q_pred = torch.tensor([[1.0, 2.0], [3.0, 0.0]], requires_grad=True)
    target = t(0.0, 1.0).requires_grad_()
    loss = sac_critic_loss(q_pred, target)
    assert loss.item() == pytest.approx(3.0)
    loss.backward()
    # d/dq ½ mean((q - y)²) = (q - y) / B
    assert torch.allclose(q_pred.grad, torch.tensor([[0.5, 0.5], [1.5, -0.5]]))
    assert target.grad is None  # target detached


def test_sac_actor_loss_and_alpha_is_constant():
    # α=.5: α log π - Q = [-.5 - 2, .5 - 0] = [-2.5, .5] -> mean -1
    alpha = torch.tensor(0.5, requires_grad=True)
    loss = sac_actor_loss(t(-1.0, 1.0), t(2.0, 0.0), alpha)
    assert loss.item() == pytest.approx(-1.0)
    assert not loss.requires_grad
    assert sac_actor_loss(t(-1.0, 1.0), t(2.0, 0.0), 0.5).item() == pytest.approx(-1.0)


def test_temperature_loss_value_and_direction():
    # log α = .5, log π = [-1, -3], H̄ = 1: log π + H̄ = [0, -2] -> loss = -.5 · mean = .5
    # entropy estimate -mean(log π) = 2 > H̄ = 1 -> grad = -mean(log π + H̄) = +1 > 0: descent lowers α
    log_alpha = torch.tensor(0.5, requires_grad=True)
    log_prob = t(-1.0, -3.0).requires_grad_()
    loss = temperature_loss(log_alpha, log_prob, 1.0)
    assert loss.item() == pytest.approx(0.5)
    loss.backward()
    assert log_alpha.grad.item() == pytest.approx(1.0)
    assert log_prob.grad is None
    # entropy -2 below target -1: log π + H̄ = [1, 1] -> grad -1 < 0: α grows
    log_alpha.grad = None
    temperature_loss(log_alpha, t(2.0, 2.0), -1.0).backward()
    assert log_alpha.grad.item() == pytest.approx(-1.0)


# ---------------------------------------------------------------- TD3 / PQL


def test_deterministic_actor_loss():
    assert deterministic_actor_loss(t(1.0, 3.0)).item() == pytest.approx(-2.0)


def test_td3_target_policy_noise_is_clipped_and_bounded():
    g = torch.Generator().manual_seed(0)
    # σ huge: every ε·σ lands outside ±.2 and is clipped to exactly ±.2
    smoothed = td3_target_policy_noise(torch.zeros(1000), 1e6, 0.2, g)
    assert torch.allclose(smoothed.abs(), torch.full((1000,), 0.2))
    assert (smoothed > 0).any() and (smoothed < 0).any()
    # .95 + .2 = 1.15 -> action bound 1 ; -.95 - .2 -> -1
    edge = td3_target_policy_noise(torch.full((1000,), 0.95), 1e6, 0.2, g)
    assert edge.max().item() == 1.0 and edge.min().item() == pytest.approx(0.75)
    assert td3_target_policy_noise(torch.full((4,), -0.95), 1e6, 0.2, g).min().item() >= -1.0
    # σ = 0: unchanged ; same seed -> same noise ; per-sample σ broadcasts
    assert torch.equal(td3_target_policy_noise(t(0.3, -0.4), 0.0, 0.2, g), t(0.3, -0.4))
    a = td3_target_policy_noise(torch.zeros(5), 0.1, 0.5, torch.Generator().manual_seed(3))
    b = td3_target_policy_noise(torch.zeros(5), 0.1, 0.5, torch.Generator().manual_seed(3))
    assert torch.equal(a, b)
    per_env = td3_target_policy_noise(torch.zeros(2, 3), t(0.0, 1e6)[:, None], 0.2, g)
    assert torch.equal(per_env[0], torch.zeros(3)) and torch.allclose(per_env[1].abs(), torch.full((3,), 0.2))


# ---------------------------------------------------------------- C51

V_MIN, V_MAX = -1.0, 1.0  # 3 atoms z = [-1, 0, 1], Δz = 1


def test_categorical_projection_three_atom_example():
    # p = [.2, .5, .3], r = .5, discount = .5: Tz = .5 + .5·[-1, 0, 1] = [0, .5, 1] -> b = [1, 1.5, 2]
    # atom 0 lands exactly on atom 1: .2 -> m1 ; atom 1 splits .25/.25 to m1/m2 ; atom 2 exactly on m2: .3
    # m = [0, .45, .55]  (the classic l == u bug would give [0, .25, .25])
    m = categorical_projection(t(0.2, 0.5, 0.3)[None], t(0.5), t(0.5), V_MIN, V_MAX)
    assert torch.allclose(m, t(0.0, 0.45, 0.55)[None])


def test_categorical_projection_between_atoms_splits_linearly():
    # p one-hot at z=0, r = .25, discount .9: Tz = .25 -> b = 1.25: .75 to atom 1, .25 to atom 2
    m = categorical_projection(t(0.0, 1.0, 0.0)[None], t(0.25), t(0.9), V_MIN, V_MAX)
    assert torch.allclose(m, t(0.0, 0.75, 0.25)[None])
    # wider support z = [0, 1, ..., 10]: discount 0, r = 3.3 -> .7 at z=3, .3 at z=4
    m = categorical_projection(torch.full((1, 11), 1 / 11), t(3.3), t(0.0), 0.0, 10.0)
    expected = torch.zeros(1, 11)
    expected[0, 3], expected[0, 4] = 0.7, 0.3
    assert torch.allclose(m, expected, atol=1e-5)


def test_categorical_projection_on_atom_keeps_all_mass():
    p = t(0.2, 0.5, 0.3)[None]
    # r = 0, discount 1: every Tz_j = z_j exactly -> identity
    assert torch.allclose(categorical_projection(p, t(0.0), t(1.0), V_MIN, V_MAX), p)
    # terminal (discount 0): all mass at clamp(r); r = 0 -> middle atom, r = 1 -> edge atom
    assert torch.allclose(categorical_projection(p, t(0.0), t(0.0), V_MIN, V_MAX), t(0.0, 1.0, 0.0)[None])
    assert torch.allclose(categorical_projection(p, t(1.0), t(0.0), V_MIN, V_MAX), t(0.0, 0.0, 1.0)[None])
    # 101 atoms on ±20 (FastSAC), Δz = .4: r = .8, discount 0 is atom 52 up to float round-off
    m = categorical_projection(torch.full((1, 101), 1 / 101), t(0.8), t(0.0), -20.0, 20.0)
    assert m[0, 52].item() == pytest.approx(1.0, abs=1e-4) and m.sum().item() == pytest.approx(1.0, abs=1e-5)


def test_categorical_projection_clamps_to_edges():
    p = t(0.2, 0.5, 0.3)[None].expand(3, 3)
    # r = 5: Tz = 5 + .9 z ∈ [4.1, 5.9] > 1 -> all at v_max ; r = -5 -> all at v_min ; discount 0, r = -7 -> v_min
    m = categorical_projection(p, t(5.0, -5.0, -7.0), t(0.9, 0.9, 0.0), V_MIN, V_MAX)
    assert torch.allclose(m, torch.tensor([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]))


def test_categorical_projection_rows_sum_to_one():
    g = torch.Generator().manual_seed(0)
    probs = torch.randn(64, 51, generator=g).softmax(-1)
    rewards = torch.empty(64).uniform_(-15.0, 15.0, generator=g)
    discount = torch.where(torch.rand(64, generator=g) < 0.2, 0.0, 0.99**3)
    m = categorical_projection(probs, rewards, discount, -10.0, 10.0)
    assert (m >= 0).all()
    assert torch.allclose(m.sum(-1), torch.ones(64), atol=1e-5)


def test_categorical_td_loss():
    # row 0: logits [0, 0] -> p = [.5, .5], target [1, 0] -> CE = ln 2 = .693147
    # row 1: logits [0, ln 3] -> p = [.25, .75], target [.5, .5] -> CE = -(.5 ln .25 + .5 ln .75) = .836988
    # batch mean .765068 ; two identical critics -> 1.530136
    logits = torch.tensor([[0.0, 0.0], [0.0, math.log(3.0)]])
    target = torch.tensor([[1.0, 0.0], [0.5, 0.5]])
    assert categorical_td_loss(logits, target).item() == pytest.approx(0.765068, abs=1e-5)
    assert categorical_td_loss(torch.stack([logits, logits]), target).item() == pytest.approx(1.530136, abs=1e-5)


def test_categorical_mean_and_lowest_mean_distribution():
    z = categorical_support(V_MIN, V_MAX, 3)
    # .2·(-1) + .5·0 + .3·1 = .1
    assert categorical_mean(t(0.2, 0.5, 0.3), z).item() == pytest.approx(0.1)
    # critic 0 means [.1, .8], critic 1 means [-.5, 1] -> pick critic 1 for sample 0, critic 0 for sample 1
    probs = torch.tensor([[[0.2, 0.5, 0.3], [0.0, 0.2, 0.8]], [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]])
    assert torch.allclose(categorical_mean(probs, z), torch.tensor([[0.1, 0.8], [-0.5, 1.0]]))
    assert torch.equal(lowest_mean_distribution(probs, z), torch.stack([probs[1, 0], probs[0, 1]]))


# ---------------------------------------------------------------- Polyak


class _Net(nn.Module):
    def __init__(self, value: float) -> None:
        super().__init__()
        self.linear = nn.Linear(2, 1)
        nn.init.constant_(self.linear.weight, value)
        nn.init.constant_(self.linear.bias, value)
        self.register_buffer("obs_mean", torch.full((2,), value))
        self.register_buffer("count", torch.tensor(int(value)))


@pytest.mark.parametrize("tau,expected", [(0.0, 0.0), (1.0, 2.0), (0.5, 1.0), (0.25, 0.5)])
def test_polyak_update_modules(tau, expected):
    # target 0, online 2: (1 - τ)·0 + τ·2 = 2τ ; buffers always copied (2), never averaged
    target, online = _Net(0.0), _Net(2.0)
    polyak_update(target, online, tau)
    for p in target.parameters():
        assert torch.allclose(p, torch.full_like(p, expected))
    assert torch.equal(target.obs_mean, torch.full((2,), 2.0)) and target.count.item() == 2
    assert torch.equal(online.linear.weight, torch.full((1, 2), 2.0))  # online untouched


def test_polyak_update_tensor_lists_and_mismatch():
    target, online = [torch.zeros(3), torch.ones(2)], [torch.full((3,), 4.0), torch.full((2,), 3.0)]
    polyak_update(target, online, 0.5)  # [2, 2, 2] and (1 + 3)/2 = 2
    assert torch.equal(target[0], torch.full((3,), 2.0)) and torch.equal(target[1], torch.full((2,), 2.0))
    with pytest.raises(ValueError, match="copy of the online"):
        polyak_update([torch.zeros(1)], [torch.zeros(1), torch.zeros(1)], 0.5)
    with pytest.raises(TypeError):
        polyak_update(_Net(0.0), [torch.zeros(1)], 0.5)
