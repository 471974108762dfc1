"""humanoid_velocity_flat: the biped reward pieces by hand, terminations, and the env contract."""

from __future__ import annotations

import math

import pytest
import torch

from ctrl_rl.robots.terms import gait_clock
from ctrl_rl.sims import make_env
from ctrl_rl.tasks.locomotion.gait_clock import stance_schedule
from ctrl_rl.tasks.locomotion.humanoid import (
    HUMANOID_REWARDS,
    HumanoidVelocityTask,
    HumanoidVelocityTaskConfig,
    single_stance_air_time,
    yaw_frame_velocity,
)
from ctrl_rl.tasks.locomotion.locomotion import VelocityTask


def quat(axis: str, angle: float) -> torch.Tensor:
    """w, x, y, z of a rotation by ``angle`` about one body axis."""
    q = [math.cos(angle / 2), 0.0, 0.0, 0.0]
    q["xyz".index(axis) + 1] = math.sin(angle / 2)
    return torch.tensor([q])


def test_heading_frame_velocity_ignores_pitch_and_roll_but_not_yaw() -> None:
    v = torch.tensor([[1.0, 0.0, 0.0]])  # forward along the body x axis
    # yawed 90 deg: the heading frame turns with the body, so forward stays forward
    torch.testing.assert_close(yaw_frame_velocity(quat("z", math.pi / 2), v), v, atol=1e-6, rtol=0)
    # pitched nose-down 30 deg: forward motion of the body is cos(30) forward and sin(30) down
    pitched = yaw_frame_velocity(quat("y", math.radians(30)), v)
    torch.testing.assert_close(pitched, torch.tensor([[math.cos(math.radians(30)), 0.0,
                                                        -math.sin(math.radians(30))]]), atol=1e-6, rtol=0)
    # rolled 90 deg: the body's y axis points up; sideways body motion is vertical in the heading frame
    rolled = yaw_frame_velocity(quat("x", math.pi / 2), torch.tensor([[0.0, 1.0, 0.0]]))
    torch.testing.assert_close(rolled, torch.tensor([[0.0, 0.0, 1.0]]), atol=1e-6, rtol=0)


def test_the_humanoid_tracks_its_command_in_the_heading_frame_the_quadrupeds_in_the_base_frame() -> None:
    # pitched nose-down 30 deg, the body moving along its own x axis at 1 m/s (the method reads no task state)
    s = {"imu_quat": quat("y", math.radians(30)), "base_lin_vel": torch.tensor([[1.0, 0.0, 0.0]])}
    torch.testing.assert_close(VelocityTask.tracked_velocity(None, s), torch.tensor([[1.0, 0.0]]))
    torch.testing.assert_close(HumanoidVelocityTask.tracked_velocity(None, s),
                               torch.tensor([[math.cos(math.radians(30)), 0.0]]), atol=1e-6, rtol=0)


def test_single_stance_air_time_by_hand() -> None:
    contact = torch.tensor([[True, False], [True, True], [False, False], [False, True], [True, False]])
    stance = torch.tensor([[0.30, 0.0], [0.5, 0.2], [0.0, 0.0], [0.0, 0.10], [0.9, 0.0]])
    swing = torch.tensor([[0.0, 0.25], [0.0, 0.0], [0.3, 0.3], [0.35, 0.0], [0.0, 0.7]])
    r = single_stance_air_time(contact, stance, swing, threshold=0.4)
    # single stance: min(stance time of the foot down, air time of the foot up), capped at 0.4;
    # double support and flight: 0
    torch.testing.assert_close(r, torch.tensor([0.25, 0.0, 0.0, 0.10, 0.4]))


def test_reward_defaults_and_validation() -> None:
    cfg = HumanoidVelocityTaskConfig.from_kwargs(rewards={"feet_slide": -0.5})
    assert cfg.rewards == {**HUMANOID_REWARDS, "feet_slide": -0.5} and cfg.robot == "ctrl_humanoid"
    assert not cfg.only_positive_rewards and cfg.rewards["termination"] < 0
    with pytest.raises(ValueError, match=r"unknown reward term\(s\) \['feet_slid'\]"):
        HumanoidVelocityTaskConfig.from_kwargs(rewards={"feet_slid": -0.5})
    with pytest.raises(ValueError, match="min_base_height must be >= 0"):
        HumanoidVelocityTaskConfig(min_base_height=-1.0)
    with pytest.raises(ValueError, match=r"\['gait_contact', 'feet_swing_height'\] follow the gait clock"):
        HumanoidVelocityTaskConfig.from_kwargs(gait_period=0.0)
    clockless = HumanoidVelocityTaskConfig.from_kwargs(
        gait_period=0.0, rewards={"gait_contact": 0.0, "feet_swing_height": 0.0, "feet_air_time_biped": 0.25})
    assert clockless.gait_period == 0.0
    with pytest.raises(ValueError, match="stance_fraction in"):
        HumanoidVelocityTaskConfig(stance_fraction=1.0)


def test_gait_clock_and_stance_schedule_by_hand() -> None:
    phase = torch.tensor([[0.0], [0.25], [0.5], [0.6], [0.9]])
    # sin/cos of 2 pi phase: continuous where the phase wraps from 1 to 0
    torch.testing.assert_close(gait_clock({"gait_phase": phase}),
                               torch.tensor([[0.0, 1.0], [1.0, 0.0], [0.0, -1.0],
                                             [math.sin(1.2 * math.pi), math.cos(1.2 * math.pi)],
                                             [math.sin(1.8 * math.pi), math.cos(1.8 * math.pi)]]), atol=1e-6, rtol=0)
    # left foot down for the first 55% of the period; the right half a period later (its phase + 0.5)
    # (double support around phase 0 and 0.5, where both legs' phases are below 0.55)
    scheduled = stance_schedule(phase, torch.tensor([0.0, 0.5]), 0.55)
    assert scheduled.tolist() == [[True, True], [True, False], [True, True], [False, True], [False, True]]


def test_the_clock_runs_per_episode_and_rewards_follow_it() -> None:
    """The clock starts at each env's reset, is observed as sin/cos, reaches the bundle metadata, and
    ``gait_contact`` counts the feet whose contact the schedule wants."""
    env = make_env("mujoco", "humanoid_velocity_flat", 2, seed=0, push_velocity=0.0, init_base_vel=0.0,
                   init_joint_noise=0.0, obs_noise=0.0, fixed_command=[0.0, 0.0, 0.0])
    obs = env.reset(seed=0)
    torch.testing.assert_close(obs["policy"][:, -2:], torch.tensor([[0.0, 1.0]] * 2))
    assert env.deploy_metadata()["gait_period"] == 0.8
    obs, _, _, _, info = env.step(torch.zeros(2, env.action_dim))
    phase = 0.02 / 0.8
    expected = torch.tensor([math.sin(2 * math.pi * phase), math.cos(2 * math.pi * phase)])
    torch.testing.assert_close(obs["policy"][0, -2:], expected, atol=1e-6, rtol=0)
    torch.testing.assert_close(obs["critic"][0, -2:], expected, atol=1e-6, rtol=0)
    # standing on both feet at phase 0.025, in the schedule's double support: both feet count
    torch.testing.assert_close(info["log"]["Reward/gait_contact"], torch.tensor(2 * 0.18 * 0.02), rtol=1e-5, atol=0)
    for _ in range(14):  # phase 0.375: the schedule lifts the right foot; standing still gets 1 of 2
        _, _, _, _, info = env.step(torch.zeros(2, env.action_dim))
    torch.testing.assert_close(info["log"]["Reward/gait_contact"], torch.tensor(0.18 * 0.02), rtol=1e-5, atol=0)
    # both feet down: no swing foot, no swing-height penalty
    assert float(info["log"]["Reward/feet_swing_height"]) == 0.0
    assert env.task.gait_steps.tolist() == [15, 15]
    env.task.reset_rows(torch.tensor([True, False]), torch.Generator().manual_seed(0))
    assert env.task.gait_steps.tolist() == [0, 15]
    env.close()


def test_swing_height_penalty_by_hand() -> None:
    """A foot held 0.03 m above its standing height, off the ground: 20 * (0.08 - 0.03)^2 per second."""
    env = make_env("mujoco", "humanoid_velocity_flat", 1, seed=0, push_velocity=0.0, init_base_vel=0.0,
                   init_joint_noise=0.0, obs_noise=0.0, fixed_command=[0.0, 0.0, 0.0])
    env.reset(seed=0)
    for _ in range(25):  # settle onto the floor (the reset pose sits a few mm in it)
        env.step(torch.zeros(1, env.action_dim))
    phys = env.physics
    qpos = phys.qpos.float().clone()
    qpos[:, 2] += 0.03  # the whole robot lifted: both feet 0.03 m up, neither in contact
    phys.write_rows(torch.tensor([True]), qpos, torch.zeros_like(phys.qvel.float()))
    task = env.task
    task.joint_targets(torch.zeros(1, env.action_dim), torch.Generator())  # the step's action
    s = task.signals(phys)
    terms = task.reward_terms(s, torch.tensor([[0.0, 0.0, -1.0]]), torch.tensor([False]))
    assert not s["_contact"].any()
    torch.testing.assert_close(terms["feet_swing_height"], torch.tensor([2 * (0.08 - 0.03) ** 2]),
                               atol=3e-4, rtol=0)  # +-1.5 mm: the soles' contact penetration
    env.close()


def test_deviation_groups_cover_the_right_joints() -> None:
    env = make_env("mujoco", "humanoid_velocity_flat", 1, seed=0)
    names = env.task.robot.joint_names
    groups = {k: [names[i] for i in idx.tolist()] for k, idx in env.task.deviation.items()}
    assert len(groups["joint_deviation_arms"]) == 8 and all("shoulder" in n or "elbow" in n
                                                             for n in groups["joint_deviation_arms"])
    assert sorted(groups["joint_deviation_hip"]) == sorted(f"{s}_hip_{a}_joint" for s in ("left", "right")
                                                           for a in ("roll", "yaw"))
    assert groups["joint_deviation_torso"] == ["waist_yaw_joint"]
    env.close()


def test_standing_robot_is_healthy_and_a_low_pelvis_terminates() -> None:
    """Zero actions at the default pose: no fall in 1 s; the pelvis put 0.3 m above the floor (below
    min_base_height) ends the episode as a failure."""
    env = make_env("mujoco", "humanoid_velocity_flat", 4, seed=0, push_velocity=0.0, init_base_vel=0.0,
                   init_joint_noise=0.0, fixed_command=[0.0, 0.0, 0.0])
    env.reset(seed=0)
    for _ in range(50):
        _, reward, terminated, truncated, info = env.step(torch.zeros(4, env.action_dim))
        assert not terminated.any()
    assert (info["metrics"]["forward_velocity"].abs() < 0.1).all()
    phys = env.physics
    qpos = phys.qpos.float().clone()
    qpos[:, 2] = 0.3
    rows = torch.tensor([True, False, False, False])
    phys.write_rows(rows, qpos, torch.zeros_like(phys.qvel.float()))
    _, reward, terminated, _, _ = env.step(torch.zeros(4, env.action_dim))
    assert terminated.tolist() == [True, False, False, False]
    assert reward[0] < -3.0 < reward[1:].min()  # the termination penalty: -200 per second x 0.02 s
    env.close()


def test_humanoid_env_passes_the_vecenv_conformance_suite() -> None:
    from vecenv_conformance import check_vecenv

    def humanoid(**kw):
        return lambda n, seed: make_env("mujoco", "humanoid_velocity_flat", n, seed=seed,
                                        **{"episode_length_s": 0.4, **kw})

    check_vecenv(humanoid(), num_envs=4, seed=2, make_untruncated=humanoid(episode_length_s=1e9))


def test_bipeds_get_the_quadrupeds_gait_recipe() -> None:
    """The humanoid task's defaults carry the recipe's posture and effort terms at the quadrupeds' weights,
    the relative base height in place of the absolute one, and the heading hold."""
    from ctrl_rl.tasks.locomotion.velocity_config import DEFAULT_REWARDS
    for term in ("joint_pose", "base_height_ratio", "torque_limits", "power"):
        assert HUMANOID_REWARDS[term] == DEFAULT_REWARDS[term] < 0, term
    assert HUMANOID_REWARDS["base_height"] == 0.0
    assert HumanoidVelocityTaskConfig().heading_stiffness == 1.0
