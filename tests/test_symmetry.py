"""Left/right symmetry: mirror maps (involutions, checked against the physics), the PPO pieces by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ctrl_rl.algos.symmetry import Symmetry, mirror_loss, mirror_minibatch
from ctrl_rl.app.train import train
from ctrl_rl.config import ConfigError
from ctrl_rl.mirror import EnvMirror, SignedPerm, pair_points
from ctrl_rl.sims import make_env
from ctrl_rl.storage.rollout import Minibatch

EXACT = {"obs_noise": 0.0, "max_action_delay": 0, "push_velocity": 0.0, "friction": [1.0, 1.0],
         "added_base_mass": [0.0, 0.0], "kp_scale": [1.0, 1.0], "kd_scale": [1.0, 1.0],
         "motor_strength": [1.0, 1.0], "command_resample_s": 0.0}
"""Two rows of one env that differ only by the mirror: no per-row randomization, noise or latency."""


def test_signed_perm_is_an_involution_and_refuses_what_is_not() -> None:
    m = SignedPerm([1, 0, 2], [-1, -1, 1])
    x = torch.tensor([[1.0, 2.0, 3.0]])
    torch.testing.assert_close(m(x), torch.tensor([[-2.0, -1.0, 3.0]]))
    torch.testing.assert_close(m(m(x)), x)
    np.testing.assert_array_equal(m(x.numpy()), [[-2.0, -1.0, 3.0]])
    both = SignedPerm.concat([m, SignedPerm.signs([1, -1])])
    np.testing.assert_array_equal(both.perm, [1, 0, 2, 3, 4])
    np.testing.assert_array_equal(both.sign, [-1, -1, 1, 1, -1])
    np.testing.assert_array_equal(m.tile(2).perm, [1, 0, 2, 4, 3, 5])
    legs = SignedPerm([1, 0, 3, 2], [1, 1, -1, -1]).restrict([2, 3])  # the policy moves joints 2 and 3
    np.testing.assert_array_equal(legs.perm, [1, 0])
    np.testing.assert_array_equal(legs.sign, [-1, -1])
    with pytest.raises(ValueError, match=r"element\(s\) \[0, 2\] map outside the selection"):
        SignedPerm([1, 0, 3, 2], [1, 1, -1, -1]).restrict([0, 2])
    with pytest.raises(ValueError, match="not its own inverse"):
        SignedPerm([1, 2, 0], [1, 1, 1])  # a 3-cycle
    with pytest.raises(ValueError, match="not its own inverse"):
        SignedPerm([1, 0], [1, -1])  # a pair with different signs
    with pytest.raises(ValueError, match="permutation of 0..1"):
        SignedPerm([0, 0], [1, 1])
    with pytest.raises(ValueError, match="must be \\+1 or -1"):
        SignedPerm([0], [0.5])


def test_points_pair_with_their_reflection() -> None:
    feet = np.array([[0.2, 0.1, 0.0], [0.2, -0.1, 0.0], [-0.2, 0.1, 0.0], [-0.2, -0.1, 0.0]])
    np.testing.assert_array_equal(pair_points(feet), [1, 0, 3, 2])
    np.testing.assert_array_equal(pair_points(np.array([[0.0, 0.0], [1.0, 0.0]])), [0, 1])  # on the plane
    with pytest.raises(ValueError, match=r"point\(s\) \[0, 1\].*no mirror twin"):
        pair_points(np.array([[0.0, 0.3], [0.0, -0.2]]))


@pytest.mark.parametrize("task,kwargs", [("quadruped_velocity_flat", {}), ("humanoid_velocity_flat", {}),
                                         ("quadruped_velocity_rough", {}),
                                         ("quadruped_velocity_flat", {"history_length": 3}),
                                         ("humanoid_velocity_flat", {"robot": "unitree_g1"})])  # legs act
def test_mirroring_every_observation_twice_is_the_identity(task: str, kwargs: dict) -> None:
    env = make_env("mujoco", task, 4, seed=0, **kwargs)
    mirror = env.mirror()
    obs = env.reset(seed=0)
    for _ in range(3):
        obs = env.step(torch.randn(4, env.action_dim, generator=torch.Generator().manual_seed(0)))[0]
    for group, value in obs.items():
        m = mirror.group(group)
        assert m.dim == value.shape[-1]
        torch.testing.assert_close(m(m(value)), value, rtol=0, atol=0)
        assert not torch.equal(m(value), value)
    env.close()


def mirror_state(task, qpos: torch.Tensor, qvel: torch.Tensor, joints: SignedPerm) -> tuple[torch.Tensor, torch.Tensor]:
    """The robot's state reflected in the world's x-z plane."""
    qpos, qvel = qpos.clone(), qvel.clone()
    qpos[1] *= -1  # base y
    qpos[[4, 6]] *= -1  # quaternion (w, x, y, z) -> (w, -x, y, -z)
    qvel[1] *= -1  # world-frame linear velocity: vy
    qvel[[3, 5]] *= -1  # body-frame angular velocity: roll and yaw rates
    qpos[task.qadr] = joints(qpos[task.qadr])
    qvel[task.vadr] = joints(qvel[task.vadr])
    return qpos, qvel


@pytest.mark.parametrize("task", ["quadruped_velocity_flat", "humanoid_velocity_flat"])
def test_the_mirror_maps_are_the_physics_mirror(task: str) -> None:
    """Row 1 starts as the mirror image of row 0 (state and command; the humanoid's gait clock half a
    period on) and gets the mirrored actions: its observations stay the mirror of row 0's."""
    env = make_env("mujoco", task, 2, seed=1, **EXACT)
    mirror, t, phys = env.mirror(), env.task, env.physics
    env.reset(seed=1)
    qpos, qvel = phys.qpos.float().clone(), phys.qvel.float().clone()
    qpos[1], qvel[1] = mirror_state(t, qpos[0], qvel[0], t.mirror_parts()["joints"])
    phys.write_rows(torch.tensor([False, True]), qpos, qvel)
    for commands in (t.commands, t.user_commands):  # the operator's, and what the policy is told
        commands[0] = torch.tensor([0.6, 0.2, 0.4])
        commands[1] = torch.tensor([0.6, -0.2, -0.4])
    if hasattr(t, "gait_steps"):
        t.gait_steps[1] = round(t.cfg.gait_period / 2 / t.step_dt)
    gen = torch.Generator().manual_seed(0)
    worst = 0.0
    for _ in range(25):
        a = 0.5 * torch.randn(env.action_dim, generator=gen)
        obs, _, terminated, truncated, _ = env.step(torch.stack([a, mirror.actions(a)]))
        assert not (terminated | truncated).any()
        for group, value in obs.items():
            err = (value[1] - mirror.group(group)(value[0])).abs().max().item()
            worst = max(worst, err)
    assert worst < 2e-3, worst
    env.close()


def test_a_symmetric_policy_commutes_with_the_mirror_and_has_no_mirror_loss() -> None:
    """A linear policy W made symmetric, (W + A W S) / 2 with A, S the action and observation maps:
    mu(mirror s) = mirror mu(s), and its mirror loss is 0; the unsymmetrized W's is not."""
    obs_map, act_map = SignedPerm([1, 0, 2, 3], [1, 1, -1, 1]), SignedPerm([1, 0, 2], [-1, -1, 1])
    a_mat = torch.zeros(3, 3)
    a_mat[torch.arange(3), torch.as_tensor(act_map.perm)] = torch.as_tensor(act_map.sign)
    s_mat = torch.zeros(4, 4)
    s_mat[torch.arange(4), torch.as_tensor(obs_map.perm)] = torch.as_tensor(obs_map.sign)
    w = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    w_sym = (w + a_mat @ w @ s_mat) / 2
    s = torch.randn(16, 4, generator=torch.Generator().manual_seed(1))
    mu = lambda weights, x: x @ weights.T  # noqa: E731
    torch.testing.assert_close(mu(w_sym, obs_map(s)), act_map(mu(w_sym, s)))
    assert mirror_loss(mu(w_sym, s), mu(w_sym, obs_map(s)), act_map) < 1e-12
    assert mirror_loss(mu(w, s), mu(w, obs_map(s)), act_map) > 0.1


def test_mirror_loss_and_augmented_minibatch_by_hand() -> None:
    act_map = SignedPerm([1, 0], [-1, -1])
    # mu(s) = (1, 2) -> mirrored (-2, -1); mu(mirror s) = (0, 0): mean of (2^2, 1^2) = 2.5
    assert mirror_loss(torch.tensor([[1.0, 2.0]]), torch.tensor([[0.0, 0.0]]), act_map).item() == 2.5
    obs_map = SignedPerm([0, 1], [1, -1])
    sym = Symmetry(actor=obs_map, critic=SignedPerm.signs([-1]), actions=act_map, augment=True, loss=False)
    mb = Minibatch(actor_obs=torch.tensor([[1.0, 2.0]]), critic_obs=torch.tensor([[3.0]]),
                   actions=torch.tensor([[0.5, -1.0]]), old_log_prob=torch.tensor([-1.5]),
                   old_mean=torch.tensor([[0.1, 0.2]]), old_std=torch.tensor([[1.0, 2.0]]),
                   old_values=torch.tensor([4.0]), advantages=torch.tensor([0.7]), returns=torch.tensor([5.0]))
    out = mirror_minibatch(mb, sym)
    torch.testing.assert_close(out.actor_obs, torch.tensor([[1.0, 2.0], [1.0, -2.0]]))
    torch.testing.assert_close(out.critic_obs, torch.tensor([[3.0], [-3.0]]))
    torch.testing.assert_close(out.actions, torch.tensor([[0.5, -1.0], [1.0, -0.5]]))
    torch.testing.assert_close(out.old_mean, torch.tensor([[0.1, 0.2], [-0.2, -0.1]]))
    torch.testing.assert_close(out.old_std, torch.tensor([[1.0, 2.0], [2.0, 1.0]]))
    for key in ("old_log_prob", "old_values", "advantages", "returns"):
        torch.testing.assert_close(getattr(out, key), getattr(mb, key).repeat(2))
    assert out.collected == 1 and mb.collected is None


def test_the_adaptive_kl_reads_the_collected_samples_not_their_mirror_images() -> None:
    """An asymmetric old policy has a large KL to the mirrored twins however small the step; measured
    over the augmented batch it pinned the learning rate at its floor (ctrl_quad stopped learning).
    The KL and entropy read the collected half; the surrogate reads both halves."""
    from dataclasses import replace
    from types import SimpleNamespace

    from ctrl_rl.algos.heads import GaussianHead
    from ctrl_rl.nets.distributions import gaussian_kl

    act_map = SignedPerm([1, 0], [-1, -1])
    sym = Symmetry(actor=SignedPerm([0, 1], [1, -1]), critic=SignedPerm.signs([-1]), actions=act_map,
                   augment=True, loss=False)
    old_mean, old_std = torch.tensor([[0.1, 0.9]]), torch.tensor([[0.5, 0.5]])  # mirror(old) = (-0.9, -0.1)
    mb = mirror_minibatch(Minibatch(actor_obs=torch.tensor([[1.0, 2.0]]), critic_obs=torch.tensor([[3.0]]),
                                    actions=torch.tensor([[0.3, 0.6]]), old_log_prob=torch.tensor([-1.0]),
                                    old_mean=old_mean, old_std=old_std, old_values=torch.tensor([0.0]),
                                    advantages=torch.tensor([1.0]), returns=torch.tensor([0.0])), sym)
    # the new policy: the old one, a step of 0.01 on, on both halves (it acts the same on s and mirror s)
    mean, std = (old_mean + 0.01).repeat(2, 1), old_std.repeat(2, 1)
    cfg = SimpleNamespace(schedule="adaptive", clip_param=0.2)
    surrogate, _, stats = GaussianHead.surrogate(mean, std, mb, cfg)
    torch.testing.assert_close(stats["kl"], gaussian_kl(old_mean, old_std, old_mean + 0.01, old_std).mean())
    assert stats["kl"] < 1e-3 < gaussian_kl(mb.old_mean, mb.old_std, mean, std).mean()  # the twins' KL is large
    full = GaussianHead.surrogate(mean, std, replace(mb, collected=None), cfg)[0]
    torch.testing.assert_close(surrogate, full)  # the surrogate is over every sample either way


def test_symmetry_settings_are_checked(tmp_path) -> None:
    common = ["env.num_envs=8", "algo.num_steps_per_env=8", "runner.max_iterations=2", "runner.progress=false",
              "algo.actor_hidden=[32]", "algo.critic_hidden=[32]", f"runner.log_root={tmp_path}"]
    with pytest.raises(ConfigError, match="algo.symmetry: must be one of: none, augment, loss, both"):
        train(["task=quadruped_velocity_flat", "algo.symmetry=mirror", *common])
    with pytest.raises(ConfigError, match="algo.symmetry: fpo has no mirrored policy update"):
        train(["algo=fpo", "task=quadruped_velocity_flat", "algo.symmetry=loss", *common])
    with pytest.raises(ConfigError, match="algo.symmetry: mirrors feed-forward minibatches"):
        train(["task=quadruped_velocity_flat", "algo.symmetry=loss", "algo.rnn_type=gru", *common])
    with pytest.raises(ValueError, match="this env declares no mirror maps"):
        train(["task=pendulum", "algo.symmetry=augment", *common])


@pytest.mark.parametrize("mode", ["augment", "both"])
def test_ppo_trains_with_symmetry_and_logs_the_mirror_loss(tmp_path, mode: str) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = train(["task=quadruped_velocity_flat", f"algo.symmetry={mode}", "env.num_envs=16",
                 "algo.num_steps_per_env=8", "runner.max_iterations=3", "runner.progress=false",
                 "algo.actor_hidden=[32]", "algo.critic_hidden=[32]", f"runner.log_root={tmp_path}"])
    ea = EventAccumulator(str(run))
    ea.Reload()
    values = [e.value for e in ea.Scalars("Loss/symmetry")]
    assert len(values) == 3 and all(np.isfinite(values)) and values[0] > 0


def test_the_mirror_loss_gradient_makes_a_policy_symmetric() -> None:
    """Adam on the mirror loss alone drives a quadruped-sized actor's asymmetry down 20-fold: the
    gradient reaches the mirrored side and the target side is detached, not a moving zero. The actor starts
    visibly asymmetric (its output layer drawn with std 0.1): at the default init the asymmetry is ~1e-6 and
    Adam's first steps overshoot it as often as not (seeds 0-5: 390-5900-fold from the drawn start)."""
    from ctrl_rl.nets.actor_critic import GaussianActor

    env = make_env("mujoco", "quadruped_velocity_flat", 64, seed=0)
    mirror = env.mirror()
    obs = env.reset(seed=0)["policy"]
    torch.manual_seed(0)
    actor = GaussianActor(obs.shape[-1], env.action_dim, [64, 64], "elu", 1.0, "scalar", 0.01, 10.0, False)
    torch.nn.init.normal_(actor.net[-1].weight, std=0.1)
    obs_map = mirror.group("policy")
    opt = torch.optim.Adam(actor.parameters(), lr=1e-3)

    def loss() -> torch.Tensor:
        return mirror_loss(actor.distribution(obs)[0], actor.distribution(obs_map(obs))[0], mirror.actions)

    first = loss().item()
    for _ in range(300):
        opt.zero_grad()
        loss().backward()
        opt.step()
    assert loss().item() < first / 20, (first, loss().item())
    env.close()


def test_env_mirror_with_history_tiles_each_term() -> None:
    m = EnvMirror({"policy": [SignedPerm.signs([1, -1]), SignedPerm([1, 0], [1, 1])]}, SignedPerm.identity(1))
    h = m.with_history({"policy": [2, 1]})
    np.testing.assert_array_equal(h.group("policy").perm, [0, 1, 2, 3, 5, 4])
    np.testing.assert_array_equal(h.group("policy").sign, [1, -1, 1, -1, 1, 1])
    with pytest.raises(ValueError, match="no mirror for observation group 'critic'"):
        h.group("critic")
