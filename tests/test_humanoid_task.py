"""humanoid_velocity_flat: the biped reward pieces by hand, terminations, and the env contract."""

from __future__ import annotations

import math

import pytest
import torch
from ctrl_rl.robots.humanoid import (
    HUMANOID_REWARDS,
    HumanoidVelocityTaskConfig,
    single_stance_air_time,
    yaw_frame_velocity,
)
from ctrl_rl.sims import make_env


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
