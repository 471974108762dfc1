"""``algo.smoothness_coef``: the temporal smoothness loss on the policy's mean action (CAPS's temporal term on
the second difference), what the gait report's ``action smoothness`` bar measures."""

from __future__ import annotations

import pytest
import torch

from ctrl_rl.algos.losses import action_smoothness_loss, smoothness_neighbours
from ctrl_rl.algos.ppo import PPO
from ctrl_rl.algos.schedule import adapt_weight
from ctrl_rl.app.train import train
from ctrl_rl.config import ConfigError
from ctrl_rl.config_onpolicy import PPOConfig


def test_neighbours_stay_inside_each_episode():
    # T = 4 steps of N = 2 envs, obs = 10 t + n; env 0's episode ends at step 1 (step 2 is a new one's first)
    obs = (10 * torch.arange(4.0)[:, None] + torch.arange(2.0)[None])[..., None]
    dones = torch.zeros(4, 2, dtype=torch.bool)
    dones[1, 0] = True
    prev, nxt, valid = smoothness_neighbours(obs, dones)
    assert prev[2, 1].item() == 11.0 and nxt[2, 1].item() == 31.0 and prev[1, 0].item() == 0.0
    # the rollout's ends have one neighbour; env 0's steps 1 and 2 straddle its episode's end
    assert valid.tolist() == [[False, False], [False, True], [False, True], [False, False]]


def test_smoothness_loss_by_hand():
    zero, one = torch.zeros(2, 1), torch.ones(2, 1)
    # a spike (0, 1, 0): second difference -2 -> 4; the second sample is not valid and does not count
    assert action_smoothness_loss(zero, one, zero, torch.tensor([True, False])).item() == 4.0
    # a straight line (0, 1, 2) costs nothing: a steady swing is not jitter
    assert action_smoothness_loss(zero, one, 2 * one, torch.tensor([True, True])).item() == 0.0
    # alternating +-0.25 over two action dims: (0.25 - 2 (-0.25) + 0.25)^2 = 1 in each
    a = torch.full((1, 2), 0.25)
    assert action_smoothness_loss(a, -a, a, torch.tensor([True])).item() == 1.0
    assert action_smoothness_loss(a, -a, a, torch.tensor([False])).item() == 0.0  # no valid step: 0


def test_smoothness_settings_are_checked():
    with pytest.raises(ConfigError, match="algo.smoothness_coef: must be >= 0"):
        PPOConfig(smoothness_coef=-1.0)
    with pytest.raises(ConfigError, match="algo.smoothness_coef: pairs each step with its neighbours"):
        PPOConfig(smoothness_coef=1.0, rnn_type="gru")
    with pytest.raises(ConfigError, match="algo.smoothness_target: must be > 0 .* with algo.smoothness_coef > 0"):
        PPOConfig(smoothness_target=0.02)  # no starting weight


def test_the_adaptive_weight_follows_the_kl_rule():
    assert adapt_weight(0.1, 0.041, 0.02) == pytest.approx(0.15)  # above 2 x target: x1.5
    assert adapt_weight(0.1, 0.009, 0.02) == pytest.approx(0.1 / 1.5)  # below target / 2: /1.5
    assert adapt_weight(0.1, 0.039, 0.02) == pytest.approx(0.1)  # in between: kept
    assert adapt_weight(0.1, 0.011, 0.02) == pytest.approx(0.1)
    assert adapt_weight(90.0, 1.0, 0.02) == pytest.approx(100.0)  # bounded
    assert adapt_weight(1e-4, 0.001, 0.02) == pytest.approx(1e-4)


def fill_alternating(alg: PPO, steps: int, envs: int) -> None:
    """A rollout whose observation flips sign every step: a policy linear in it jitters."""
    for t in range(steps):
        x = torch.full((envs, 1), 1.0 if t % 2 == 0 else -1.0)
        alg.act({"policy": x})
        alg.process_step({"policy": -x}, torch.zeros(envs), torch.zeros(envs, dtype=torch.bool),
                         torch.zeros(envs, dtype=torch.bool), {})
    alg.prepare_update()


def steep_ppo(**penalty: float) -> PPO:
    """PPO on a 1-d observation whose policy is linear with slope 0.5 and no bias, trained by ``penalty``
    alone (no entropy, fixed learning rate 0.05, one minibatch)."""
    cfg = PPOConfig(num_steps_per_env=8, actor_hidden=[], critic_hidden=[8], normalize_obs=False, entropy_coef=0.0,
                    num_minibatches=1, num_learning_epochs=1, schedule="fixed", learning_rate=0.05, **penalty)
    alg = PPO(cfg, {"policy": 1}, 1, num_envs=4, device="cpu")
    with torch.no_grad():
        alg.model.actor.net[-1].weight.fill_(0.5)
        alg.model.actor.net[-1].bias.zero_()
    return alg


def test_the_loss_makes_a_jittery_policy_smooth():
    """With no reward to chase, the smoothness loss alone takes a policy that answers a flipping observation
    with a flipping action (second difference 4 x 0.5 = 2 per step) to a nearly steady one."""
    alg = steep_ppo(smoothness_coef=1.0)
    fill_alternating(alg, 8, 4)
    first = alg.update()["smoothness"]
    assert first == pytest.approx(4.0, rel=1e-4)  # (0.5 + 1 + 0.5)^2
    for _ in range(30):
        fill_alternating(alg, 8, 4)
        last = alg.update()["smoothness"]
    assert last < 0.01 * first


def test_a_jittery_policy_raises_the_adaptive_weight_and_a_checkpoint_keeps_it():
    cfg = PPOConfig(num_steps_per_env=8, actor_hidden=[], critic_hidden=[8], normalize_obs=False, entropy_coef=0.0,
                    smoothness_coef=0.01, smoothness_target=0.02, num_minibatches=1, num_learning_epochs=1,
                    schedule="fixed", learning_rate=1e-4)
    alg = PPO(cfg, {"policy": 1}, 1, num_envs=4, device="cpu")
    with torch.no_grad():
        alg.model.actor.net[-1].weight.fill_(0.5)
    weights = []
    for _ in range(3):
        fill_alternating(alg, 8, 4)
        out = alg.update()
        weights.append(out["smoothness_coef"])
    assert weights == pytest.approx([0.01, 0.015, 0.0225])  # smoothness ~4, far above 0.04: x1.5 per update
    assert float(alg.smoothness_weight) == pytest.approx(0.0225 * 1.5)
    state = alg.state_dict()
    resumed = PPO(cfg, {"policy": 1}, 1, num_envs=4, device="cpu")
    resumed.load_state_dict(state)
    assert float(resumed.smoothness_weight) == pytest.approx(0.0225 * 1.5)


def test_the_loss_waits_for_its_start():
    cfg = PPOConfig(num_steps_per_env=8, actor_hidden=[], critic_hidden=[8], normalize_obs=False,
                    smoothness_coef=0.01, smoothness_target=0.02, smoothness_start=2, learning_rate=1e-4)
    alg = PPO(cfg, {"policy": 1}, 1, num_envs=4, device="cpu")
    with torch.no_grad():
        alg.model.actor.net[-1].weight.fill_(0.5)  # a jittery policy: the loss (~4) is far above its target
    seen = []
    for _ in range(3):
        fill_alternating(alg, 8, 4)
        seen.append("smoothness" in alg.update())
    assert seen == [False, False, True] and float(alg.smoothness_weight) == pytest.approx(0.015)


@pytest.mark.parametrize(("option", "refusal"), [("smoothness_coef", "fpo's policy has no Gaussian mean"),
                                                 ("lipschitz_coef", "fpo's actor has no Gaussian mean")])
def test_training_logs_the_penalty_and_non_gaussian_policies_refuse_it(tmp_path, option, refusal):
    """Both smoothness options (the CAPS loss and LCP's penalty): a TensorBoard scalar per update, and a
    clear refusal from a learner without a Gaussian mean."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    common = ["env.num_envs=8", "algo.num_steps_per_env=8", "runner.max_iterations=2", "runner.progress=false",
              "algo.actor_hidden=[16]", "algo.critic_hidden=[16]", f"runner.log_root={tmp_path}"]
    run = train(["task=pendulum", f"algo.{option}=0.5", *common])
    ea = EventAccumulator(str(run))
    ea.Reload()
    values = [e.value for e in ea.Scalars(f"Loss/{option.removesuffix('_coef')}")]
    assert len(values) == 2 and all(v >= 0 for v in values)
    with pytest.raises(ValueError, match=f"algo.{option}: {refusal}"):
        train(["algo=fpo", "task=pendulum", f"algo.{option}=1.0", *common])
