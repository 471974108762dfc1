"""PROPS: the behavior loss by hand, the sampling-error measurement against its closed form, the
behavior update's direction, the rollout ring, exact resume, and lower sampling error than PPO."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest
import torch

from ctrl_rl.algos.diagnostics import sampling_error
from ctrl_rl.algos.losses import props_behavior_loss
from ctrl_rl.algos.ppo import PPO
from ctrl_rl.algos.props import make_props
from ctrl_rl.app.configure import load_train_config
from ctrl_rl.app.evaluate import evaluate
from ctrl_rl.app.export import export
from ctrl_rl.app.train import train
from ctrl_rl.config import ConfigError
from ctrl_rl.config_onpolicy import PROPSConfig
from ctrl_rl.nets.actor_critic import GaussianActor
from ctrl_rl.nets.distributions import gaussian_kl

SMALL = ["algo=props", "task=pendulum", "env.num_envs=16", "algo.num_steps_per_env=16", "algo.actor_hidden=[32,32]",
         "algo.critic_hidden=[32,32]", "algo.num_minibatches=2", "algo.props_num_minibatches=4",
         "runner.progress=false"]


def test_behavior_loss_by_hand():
    """r = 0.5, 1.0, 1.5 with ε_P 0.3: max(r, clip r) = 0.7, 1.0, 1.5; KL 0.1, 0.2, 0.3 at λ 0.3."""
    target = torch.zeros(3)
    behavior = torch.tensor([math.log(0.5), 0.0, math.log(1.5)], requires_grad=True)
    kl = torch.tensor([0.1, 0.2, 0.3])
    loss = props_behavior_loss(behavior, target, kl, clip=0.3, kl_coef=0.3)
    assert float(loss.detach()) == pytest.approx((0.7 + 1.0 + 1.5) / 3 + 0.3 * 0.2, abs=1e-6)
    loss.backward()
    # d/d log π_φ of r/3 is r/3; none below 1-ε_P: an action already rare is not pushed further
    torch.testing.assert_close(behavior.grad, torch.tensor([0.0, 1.0 / 3, 0.5]))


def _actor(normalize: bool = False) -> GaussianActor:
    return GaussianActor(1, 1, [8], "elu", init_std=1.0, std_type="scalar", min_std=1e-3, max_std=10.0,
                         normalize_obs=normalize)


def test_sampling_error_is_the_kl_of_the_maximum_likelihood_fit():
    """One state, actions from N(0.5, 0.8²): π_D converges to the sample mean and std, and the
    reported error is KL(N(m̂, ŝ²) || π_θ) in closed form; ~0 for a large sample from π_θ itself."""
    torch.manual_seed(0)
    actor = _actor()
    obs = torch.zeros(4000, 1)
    actions = 0.5 + 0.8 * torch.randn(4000, 1)
    err = sampling_error(actor, obs, actions, steps=1500, lr=2e-2)
    with torch.no_grad():
        mean, std = actor.distribution(obs[:1])
    m_hat, s_hat = actions.mean(), actions.std(unbiased=False)
    expected = float(gaussian_kl(m_hat.view(1, 1), s_hat.view(1, 1), mean, std))
    assert err == pytest.approx(expected, rel=0.02)
    with torch.no_grad():
        own = mean + std * torch.randn(200_000, 1)
    assert sampling_error(actor, torch.zeros(200_000, 1), own, steps=200, lr=2e-2) < 1e-4
    assert all(p.grad is None for p in actor.parameters())  # the measured actor is never touched


def _filled_props(props_epochs: int = 16) -> PPO:
    cfg = PROPSConfig(actor_hidden=[16], critic_hidden=[16], num_steps_per_env=8, props_num_minibatches=4,
                      props_epochs=props_epochs, props_learning_rate=1e-2, normalize_obs=False)
    alg = make_props(cfg, {"policy": 2}, 1, num_envs=16, device="cpu", seed=0)
    s = alg.storage
    g = torch.Generator().manual_seed(1)
    for _ in range(cfg.num_steps_per_env):
        obs = {"policy": torch.randn(16, 2, generator=g)}
        alg.act(obs)
        s.actions[s.step] = torch.rand(16, 1, generator=g) + 0.2  # only positive actions were sampled
        alg.process_step(obs, torch.zeros(16), torch.zeros(16, dtype=torch.bool),
                         torch.zeros(16, dtype=torch.bool), {})
    return alg


def test_behavior_update_favours_the_actions_the_buffer_lacks():
    alg = _filled_props()
    stats = alg.source.update_behavior(alg.model.actor, [alg.storage], alg.generator)
    obs = alg.storage.actor_obs.reshape(-1, 2)
    with torch.no_grad():
        b_mean, b_std = alg.source.behavior.distribution(obs)
        t_mean, t_std = alg.model.actor.distribution(obs)
    assert float((b_mean - t_mean).mean()) < -0.01  # pushed towards the negative, unsampled side
    assert float(gaussian_kl(b_mean, b_std, t_mean, t_std).mean()) < 2 * alg.cfg.props_target_kl
    assert stats["props_epochs"] > 0
    alg0 = _filled_props(props_epochs=0)
    alg0.source.update_behavior(alg0.model.actor, [alg0.storage], alg0.generator)
    pairs = zip(alg0.source.behavior.state_dict().items(), alg0.model.actor.state_dict().values(), strict=True)
    for (k, a), b in pairs:
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=k)  # 0 epochs: on-policy sampling


def test_ring_keeps_the_newest_rollouts_and_recomputes_old_log_probs(tmp_path):
    run = train(SMALL + ["runner.max_iterations=3", "algo.buffer_batches=3", f"runner.log_root={tmp_path}"])
    cfg = load_train_config(SMALL + ["algo.buffer_batches=3"])
    state = torch.load(run / "replay_3.pt", weights_only=False)
    assert state["iteration"] == 3 and state["replay"]["num_kept"] == 2 and state["replay"]["head"] == 0
    alg = make_props(cfg.algo, {"policy": 3}, 1, 16, "cpu")
    alg.load_state_dict(torch.load(run / "model_3.pt", weights_only=False)["algo"])
    alg.load_replay_state_dict(state["replay"])
    assert len(alg.source.rollouts()) == 3 and alg.source.rollouts()[-1] is alg.storage
    batch = alg.source.training_batch(alg.model)
    assert batch["actions"].shape[0] == 3 * 16 * 16
    with torch.no_grad():
        mean, _ = alg.model.actor.distribution(batch["actor_obs"])
    torch.testing.assert_close(batch["old_mean"], mean)  # under the current π_θ, not the collector


def test_config_errors_name_the_fix():
    with pytest.raises(ConfigError, match="algo.props_clip: must be in"):
        load_train_config(["algo=props", "algo.props_clip=1.5"])
    with pytest.raises(ConfigError, match="algo.buffer_batches: must be > 0"):
        load_train_config(["algo=props", "algo.buffer_batches=0"])
    with pytest.raises(ConfigError, match="lower algo.props_num_minibatches"):
        load_train_config(["algo=props", "env.num_envs=2", "algo.num_steps_per_env=4", "algo.num_minibatches=1"])


@pytest.mark.slow
def test_resume_is_exact_and_export_matches_torch(tmp_path):
    """6 iterations straight vs 3 + resume + 3: the kept rollouts and the behavior policy come back."""
    common = SMALL + [f"runner.log_root={tmp_path}", "runner.save_interval=3"]
    full = train(common + ["runner.max_iterations=6", "runner.run_name=full"])
    half = train(common + ["runner.max_iterations=3", "runner.run_name=half"])
    resumed = train(common + ["runner.max_iterations=6"], checkpoint=str(half / "model_3.pt"))
    a = torch.load(full / "model_6.pt", weights_only=False)["algo"]
    b = torch.load(resumed / "model_6.pt", weights_only=False)["algo"]
    for part in ("model", "behavior"):
        for k, v in a[part].items():
            torch.testing.assert_close(v, b[part][k], rtol=0, atol=0, msg=f"{part}.{k}")
    assert export(str(full), []).is_file()  # parity-checked against torch inside export
    assert np.isfinite(evaluate(str(full), [], episodes=4)["mean_return"])


def _sampling_errors(run) -> list[float]:
    with open(run / "metrics.csv") as f:
        return [float(r["sampling_error"]) for r in csv.DictReader(f)]


@pytest.mark.slow
def test_sampling_error_is_lower_than_ppos_at_the_same_settings(tmp_path):
    """Same envs, rollout length, networks and seeds: PROPS's logged sampling error (buffer of 2
    rollouts, behavior-corrected) is well below PPO's (one on-policy rollout). Measured here on
    3 seeds: 0.014 vs 0.026. How much of it the behavior update itself buys (vs on-policy sampling
    into the same buffer: 0.0147 vs 0.0156 with the target frozen) is in BENCHMARKS.md."""
    common = ["task=pendulum", "env.num_envs=8", "algo.num_steps_per_env=32", "algo.actor_hidden=[64,64]",
              "algo.critic_hidden=[64,64]", "algo.sampling_error_steps=100", "algo.sampling_error_interval=1",
              "runner.max_iterations=30",
              "runner.progress=false", f"runner.log_root={tmp_path}"]
    errors: dict[str, float] = {}
    for algo in ("props", "ppo"):
        runs = [train(common + [f"algo={algo}", f"seed={s}", f"runner.run_name={algo}_{s}"]) for s in (1, 2)]
        errors[algo] = float(np.mean([e for r in runs for e in _sampling_errors(r)]))
    assert errors["props"] < 0.8 * errors["ppo"], errors
