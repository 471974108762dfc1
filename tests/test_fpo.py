"""FPO: the ratio by hand, the flow actor's sampler and CFM loss against closed forms, export
with the noise input, and config checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ctrl_rl.algos.losses import fpo_log_ratio
from ctrl_rl.app.configure import load_train_config
from ctrl_rl.app.evaluate import evaluate
from ctrl_rl.app.export import export
from ctrl_rl.app.train import train
from ctrl_rl.config import ConfigError
from ctrl_rl.deploy.runtime import OnnxPolicy
from ctrl_rl.nets.flow import FlowActor


def test_log_ratio_by_hand():
    old = torch.tensor([[1.0, 2.0], [0.5, 0.5]])
    new = torch.tensor([[0.5, 1.5], [1.0, 1.0]])
    torch.testing.assert_close(fpo_log_ratio(old, new, "mean"), torch.tensor([0.5, -0.5]))
    torch.testing.assert_close(fpo_log_ratio(old, new, "per_sample", clip=0.3),
                               torch.tensor([[0.3, 0.3], [-0.3, -0.3]]))
    with pytest.raises(ValueError, match="choose one of: mean, per_sample"):
        fpo_log_ratio(old, new, "median")


def _constant_field(c: float, steps: int = 10) -> FlowActor:
    """A flow actor whose velocity is ``c`` everywhere (last layer: zero weights, bias c)."""
    actor = FlowActor(3, 2, [8], "silu", normalize_obs=False, num_steps=steps)
    with torch.no_grad():
        actor.net[-1].weight.zero_()
        actor.net[-1].bias.fill_(c)
    return actor


def test_sampler_integrates_from_noise_at_t1_to_the_action_at_t0():
    """With v ≡ c, ten Euler steps of dt 0.1 from x_1 = ε land on ε - c; zero noise: -c."""
    actor = _constant_field(0.25)
    obs, eps = torch.randn(5, 3), torch.randn(5, 2)
    torch.testing.assert_close(actor(obs, eps), eps - 0.25)
    torch.testing.assert_close(actor(obs), torch.full((5, 2), -0.25))  # the deterministic action


def test_cfm_loss_is_the_squared_velocity_error_of_the_straight_path():
    """x_t = t ε + (1 - t) a has velocity ε - a; with v ≡ c the loss is mean_j (c - ε_j + a_j)²."""
    actor = _constant_field(0.5)
    a = torch.tensor([[0.2, -0.4]])
    eps = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]])
    t = torch.tensor([[0.1, 0.5, 1.0]])
    expected = ((0.5 - (eps - a.unsqueeze(1))) ** 2).mean(-1)
    torch.testing.assert_close(actor.cfm_loss(torch.zeros(1, 3), a, eps, t), expected)
    # a field that is the exact straight-path velocity scores zero
    exact = actor.cfm_loss(torch.zeros(1, 3), torch.full((1, 2), 0.5), torch.ones(1, 3, 2), t)
    torch.testing.assert_close(exact, torch.zeros(1, 3))


def test_eps_target_is_the_implied_noise_error():
    """``target="eps"``: ε̂ = x_t + (1 - t) v against ε, i.e. the velocity error weighted by (1 - t)²."""
    actor = _constant_field(0.5)
    a = torch.tensor([[0.2, -0.4]])
    eps = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]])
    t = torch.tensor([[0.1, 0.5, 1.0]])
    x_t = t.unsqueeze(-1) * eps + (1 - t.unsqueeze(-1)) * a.unsqueeze(1)
    eps_hat = x_t + (1 - t.unsqueeze(-1)) * 0.5
    expected = (eps_hat - eps).square().mean(-1)
    got = actor.cfm_loss(torch.zeros(1, 3), a, eps, t, target="eps")
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(got, (1 - t) ** 2 * actor.cfm_loss(torch.zeros(1, 3), a, eps, t))
    assert got[0, 2] == 0.0  # pure noise (t = 1) carries no information about the action
    with pytest.raises(ValueError, match="choose one of: velocity, eps"):
        actor.cfm_loss(torch.zeros(1, 3), a, eps, t, target="x0")


def test_train_export_runtime_round_trip(tmp_path):
    """Train briefly, export (parity checked with zero and random noise inside export), and the
    torch-free runtime reproduces the flow policy for any noise, zero noise by default."""
    run = train(["algo=fpo", "task=pendulum", "env.num_envs=32", "algo.num_steps_per_env=8", "algo.actor_hidden=[32]",
                 "algo.critic_hidden=[32]", "runner.max_iterations=2", "runner.progress=false",
                 f"runner.log_root={tmp_path}"])
    bundle = export(str(run), [])
    policy = OnnxPolicy(bundle)
    assert policy.noise_dim == 1
    state = torch.load(run / "model_2.pt", weights_only=False)
    from ctrl_rl.algos import make_algorithm

    cfg = load_train_config(["algo=fpo", "algo.actor_hidden=[32]", "algo.critic_hidden=[32]"])
    alg = make_algorithm(cfg.algo, {"policy": 3}, 1, 32, "cpu", inference_only=True)
    alg.load_state_dict(state["algo"], restore_rng=False)
    obs, noise = np.random.default_rng(0).normal(size=(2, 16, 3)).astype(np.float32)
    with torch.no_grad():
        det = alg.model.actor(torch.as_tensor(obs)).clamp(-1, 1).numpy()
        sto = alg.model.actor(torch.as_tensor(obs), torch.as_tensor(noise[:, :1])).clamp(-1, 1).numpy()
    np.testing.assert_allclose(policy(obs), det, atol=1e-5)
    np.testing.assert_allclose(policy(obs, noise[:, :1]), sto, atol=1e-5)
    assert np.isfinite(evaluate(str(run), [], episodes=2)["mean_return"])


def test_config_errors_name_the_fix():
    with pytest.raises(ConfigError, match="FPO needs algo.schedule=fixed"):
        load_train_config(["algo=fpo", "algo.schedule=adaptive"])
    with pytest.raises(ConfigError, match="set algo.entropy_coef=0"):
        load_train_config(["algo=fpo", "algo.entropy_coef=0.01"])
    with pytest.raises(ConfigError, match="algo.ratio_mode: must be one of: mean, per_sample"):
        load_train_config(["algo=fpo", "algo.ratio_mode=median"])
