"""Hand-computed checks of the pure on-policy losses (arithmetic in the comments)."""

import math

import pytest
import torch

from ctrl_rl.algos.losses import (
    adaptive_kl_learning_rate,
    compute_gae,
    explained_variance,
    ppo_surrogate_loss,
    value_loss,
)
from ctrl_rl.nets.distributions import censored_gaussian_log_prob, gaussian_entropy, gaussian_kl, gaussian_log_prob


def col(*xs):  # [T, N=1]
    return torch.tensor(xs, dtype=torch.float32).unsqueeze(-1)


def flags(*xs):
    return torch.tensor(xs, dtype=torch.bool).unsqueeze(-1)


R, V = col(1.0, 2.0, 3.0), col(0.5, 1.0, 1.5)
GAMMA, LAM = 0.5, 0.5  # γλ = 0.25


def test_gae_no_episode_end():
    # δ0 = 1 + .5*1.0 - .5 = 1.0 ; δ1 = 2 + .5*1.5 - 1 = 1.75 ; δ2 = 3 + .5*2 - 1.5 = 2.5
    # A2 = 2.5 ; A1 = 1.75 + .25*2.5 = 2.375 ; A0 = 1 + .25*2.375 = 1.59375
    adv, ret = compute_gae(R, V, col(1.0, 1.5, 2.0), flags(0, 0, 0), flags(0, 0, 0), GAMMA, LAM)
    assert torch.allclose(adv, col(1.59375, 2.375, 2.5))
    assert torch.allclose(ret, col(2.09375, 3.375, 4.0))


def test_gae_termination_zeroes_bootstrap_and_cuts_trace():
    # t=1 terminal: next value ignored (99 must not leak): δ1 = 2 - 1 = 1 ; A1 = 1 (trace cut)
    # A0 = 1 + .25*1 = 1.25 ; A2 = 2.5 (next episode)
    adv, _ = compute_gae(R, V, col(1.0, 99.0, 2.0), flags(0, 1, 0), flags(0, 1, 0), GAMMA, LAM)
    assert torch.allclose(adv, col(1.25, 1.0, 2.5))


def test_gae_truncation_bootstraps_from_final_obs_value():
    # t=1 truncated, V(final_obs) = 4: δ1 = 2 + .5*4 - 1 = 3 ; A1 = 3 (trace cut, not +.25*A2)
    # A0 = 1 + .25*3 = 1.75
    adv, _ = compute_gae(R, V, col(1.0, 4.0, 2.0), flags(0, 0, 0), flags(0, 1, 0), GAMMA, LAM)
    assert torch.allclose(adv, col(1.75, 3.0, 2.5))


def test_gae_envs_are_independent():
    rewards = torch.cat([R, 2 * R], dim=1)
    values = torch.cat([V, V], dim=1)
    nv = torch.cat([col(1.0, 1.5, 2.0), col(1.0, 1.5, 2.0)], dim=1)
    none = torch.zeros(3, 2, dtype=torch.bool)
    adv, _ = compute_gae(rewards, values, nv, none, none, GAMMA, LAM)
    a0, _ = compute_gae(R, V, col(1.0, 1.5, 2.0), flags(0, 0, 0), flags(0, 0, 0), GAMMA, LAM)
    a1, _ = compute_gae(2 * R, V, col(1.0, 1.5, 2.0), flags(0, 0, 0), flags(0, 0, 0), GAMMA, LAM)
    assert torch.allclose(adv, torch.cat([a0, a1], dim=1))


def test_gae_lambda_one_is_discounted_return_minus_value():
    # λ=1, γ=.5, no end, bootstrap V(s3)=2: G2 = 3+.5*2 = 4 ; G1 = 2+.5*4 = 4 ; G0 = 1+.5*4 = 3
    _, ret = compute_gae(R, V, col(1.0, 1.5, 2.0), flags(0, 0, 0), flags(0, 0, 0), 0.5, 1.0)
    assert torch.allclose(ret, col(3.0, 4.0, 4.0))


def test_ppo_surrogate_clipping():
    # ratios 1.5, 0.5, 1.0 ; A = 1, 1, -2 ; ε = .2
    # min(1.5, 1.2)=1.2 ; min(.5, .8)=.5 ; min(-2, -2)=-2 -> mean -0.1 -> loss 0.1
    old = torch.zeros(3)
    new = torch.log(torch.tensor([1.5, 0.5, 1.0]))
    loss, clip_frac, approx_kl = ppo_surrogate_loss(new, old, torch.tensor([1.0, 1.0, -2.0]), 0.2)
    assert loss.item() == pytest.approx(0.1, abs=1e-6)
    assert clip_frac.item() == pytest.approx(2 / 3)
    # (r-1) - log r: .5 - ln 1.5 = .094535 ; -.5 + ln 2 = .193147 ; 0 -> mean .095894
    assert approx_kl.item() == pytest.approx((0.5 - math.log(1.5) - 0.5 + math.log(2)) / 3, abs=1e-6)


def test_ppo_surrogate_gradient_vanishes_when_clipped():
    new = torch.log(torch.tensor([1.5])).requires_grad_()
    loss, _, _ = ppo_surrogate_loss(new, torch.zeros(1), torch.tensor([1.0]), 0.2)
    loss.backward()
    assert new.grad.item() == 0.0  # ratio above 1+ε with A>0: no incentive to move further


def test_ppo_surrogate_stays_finite_far_in_the_tail():
    """log ρ = 100 (exp overflows float32) with A = -1, beside log ρ = 0 with A = 1: log ρ is clamped at 20, so
    loss = -mean(min(-e^20, -1.2), min(1, 1)) = (e^20 - 1) / 2, finite; the clamped sample has no gradient, the
    other d loss / d log π = -A ρ / 2 = -0.5."""
    new = torch.tensor([100.0, 0.0], requires_grad=True)
    loss, clip_frac, approx_kl = ppo_surrogate_loss(new, torch.zeros(2), torch.tensor([-1.0, 1.0]), 0.2)
    assert loss.item() == pytest.approx((math.exp(20.0) - 1) / 2, rel=1e-6)
    assert clip_frac.item() == 0.5 and approx_kl.item() == pytest.approx((math.exp(20.0) - 1 - 20.0) / 2, rel=1e-6)
    loss.backward()
    assert new.grad.tolist() == [0.0, pytest.approx(-0.5)]


def test_value_loss_clipped_and_plain():
    # v=[2,0], old=[1,1], R=[1.5,0], ε=.2: unclipped [.25, 0]; clipped preds [1.2, .8] -> [.09, .64]
    # max -> [.25, .64] -> mean .445 ; plain mean .125
    v, old, ret = torch.tensor([2.0, 0.0]), torch.tensor([1.0, 1.0]), torch.tensor([1.5, 0.0])
    assert value_loss(v, old, ret, 0.2).item() == pytest.approx(0.445)
    assert value_loss(v, old, ret, None).item() == pytest.approx(0.125)


@pytest.mark.parametrize("kl,expected", [(0.03, 1e-3 / 1.5), (0.004, 1.5e-3), (0.01, 1e-3), (0.0, 1e-3)])
def test_adaptive_kl_learning_rate(kl, expected):
    assert adaptive_kl_learning_rate(1e-3, kl, 0.01) == pytest.approx(expected)


def test_adaptive_kl_bounds():
    assert adaptive_kl_learning_rate(1e-2, 1e-4, 0.01) == pytest.approx(1e-2)
    assert adaptive_kl_learning_rate(1e-5, 1.0, 0.01) == pytest.approx(1e-5)


def test_gaussian_helpers_match_torch_distributions():
    g = torch.Generator().manual_seed(0)
    m0, m1 = torch.randn(5, 3, generator=g), torch.randn(5, 3, generator=g)
    s0, s1 = torch.rand(5, 3, generator=g) + 0.1, torch.rand(5, 3, generator=g) + 0.1
    a = torch.randn(5, 3, generator=g)
    d0, d1 = torch.distributions.Normal(m0, s0), torch.distributions.Normal(m1, s1)
    assert torch.allclose(gaussian_log_prob(a, m0, s0), d0.log_prob(a).sum(-1), atol=1e-5)
    assert torch.allclose(gaussian_entropy(s0), d0.entropy().sum(-1), atol=1e-5)
    assert torch.allclose(gaussian_kl(m0, s0, m1, s1), torch.distributions.kl_divergence(d0, d1).sum(-1), atol=1e-5)
    # hand case: N(0,1) vs N(1,1) in one dim: KL = 1/2
    one, zero = torch.ones(1, 1), torch.zeros(1, 1)
    assert gaussian_kl(zero, one, one, one).item() == pytest.approx(0.5)


def test_censored_log_prob_scores_the_mass_beyond_a_bound():
    """Hand cases on bounds (-1, 1): at the upper bound with μ = 1 the mass beyond is 1/2; at the
    lower bound with μ = -1 + σ it is Φ(-1); beyond a bound, the same; inside, the plain density; no
    bounds, the plain density."""
    mean, std = torch.tensor([[1.0, -0.5, 0.2]]), torch.tensor([[0.3, 0.5, 2.0]])
    a = torch.tensor([[1.0, -1.0, 0.4]])
    phi_minus_1 = 0.5 * math.erfc(1 / math.sqrt(2))
    inside = -0.5 * 0.1**2 - math.log(2.0) - 0.5 * math.log(2 * math.pi)
    expected = math.log(0.5) + math.log(phi_minus_1) + inside
    torch.testing.assert_close(censored_gaussian_log_prob(a, mean, std, (-1.0, 1.0)), torch.tensor([expected]))
    torch.testing.assert_close(censored_gaussian_log_prob(a, mean, std, None), gaussian_log_prob(a, mean, std))
    beyond = torch.tensor([[1.3, -1.5, 0.4]])  # recorded unclipped: what the env executed is the bound
    torch.testing.assert_close(censored_gaussian_log_prob(beyond, mean, std, (-1.0, 1.0)), torch.tensor([expected]))
    # far from the bound: a finite, tiny log-mass and a finite gradient pulling μ towards it
    mu = torch.tensor([[-10.0]], requires_grad=True)
    lp = censored_gaussian_log_prob(torch.ones(1, 1), mu, torch.full((1, 1), 0.1), (-1.0, 1.0))
    lp.sum().backward()
    assert torch.isfinite(lp).all() and lp.item() < -5000 and mu.grad.item() > 0


def test_censored_likelihood_recovers_the_mean_of_clipped_draws():
    """Draws of N(0.9, 0.3) clipped to [-1, 1] (37% land on the bound): maximizing the censored
    likelihood recovers μ and σ; the plain density fits the clipped draws' mean and a shrunk σ."""
    g = torch.Generator().manual_seed(0)
    a = (0.9 + 0.3 * torch.randn(20_000, 1, generator=g)).clamp(-1.0, 1.0)

    def fit(bounds):
        mu, log_std = torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)
        opt = torch.optim.Adam([mu, log_std], lr=0.05)
        for _ in range(600):
            loss = -censored_gaussian_log_prob(a, mu.expand_as(a), log_std.exp().expand_as(a), bounds).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return mu.item(), log_std.exp().item()

    mu, std = fit((-1.0, 1.0))
    assert mu == pytest.approx(0.9, abs=0.01) and std == pytest.approx(0.3, abs=0.01)
    mu, std = fit(None)
    assert mu == pytest.approx(a.mean().item(), abs=0.01) and mu < 0.86 and std < 0.25


def test_explained_variance():
    target = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert explained_variance(target, target).item() == pytest.approx(1.0)
    assert explained_variance(torch.full((4,), 2.5), target).item() == pytest.approx(0.0)
