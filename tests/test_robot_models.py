"""What a robot owner's MJCF lacks, the task supplies or refuses: a floor, the physics step, the
standing height; a robot falling through the world is an error, never a training run."""

from __future__ import annotations

import logging

import pytest
import torch

pytest.importorskip("mujoco")

from toy_robot import write_toy_robot  # noqa: E402

from ctrl_rl.env import SimulationError  # noqa: E402
from ctrl_rl.sims import make_env  # noqa: E402


def _base_height(env) -> torch.Tensor:
    return env.task.signals(env.physics)["base_height"][:, 0]


@pytest.mark.parametrize("sim", ["mujoco", "mjwarp"])
def test_a_robot_without_floor_timestep_or_height_stands_on_the_ground(sim, tmp_path, caplog):
    from ctrl_rl.robots.robot import load_robot

    robot = write_toy_robot(tmp_path / "toy", floor=False, timestep=False, init_height=False)
    height = load_robot(str(robot)).init_height
    assert 0.2 < height < 0.23, height  # derived from the default pose: feet on the ground
    with caplog.at_level(logging.INFO):
        env = make_env(sim, "quadruped_velocity_flat", 4, seed=0, robot=str(robot), push_velocity=0.0,
                       obs_noise=0.0, init_joint_noise=0.0, init_base_vel=0.0)
    assert "no ground; added a floor plane" in caplog.text
    assert "timestep 0.002 s is replaced by task.kwargs.physics_dt=0.005 s (control 50 Hz" in caplog.text
    assert env.step_dt == pytest.approx(0.02)  # 50 Hz from the task config, not the MJCF's 125 Hz
    env.reset(0)
    zero = torch.zeros(env.num_envs, env.action_dim)
    for _ in range(50):  # 1 s of the zero agent
        env.step(zero)
    base = _base_height(env)
    assert torch.all((base - height).abs() < 0.1 * height), (base, height)


def test_a_robot_that_falls_through_the_world_is_an_error(tmp_path):
    robot = write_toy_robot(tmp_path / "toy", collide=False)  # a floor, but nothing of the robot touches it
    env = make_env("mujoco", "quadruped_velocity_flat", 2, seed=0, robot=str(robot), max_tilt_deg=180.0)
    env.reset(0)
    zero = torch.zeros(env.num_envs, env.action_dim)
    with pytest.raises(SimulationError, match="toy_quad: the base is 0.5 m below the ground: it fell through the "
                                              "world.*contype/conaffinity"):
        for _ in range(100):
            env.step(zero)
