"""Unitree Go1 and G1 from the models that ship in mjlab's wheel (``robots/unitree_*.yaml``), fetched by
``ctrl-rl fetch-robots`` (scripts/test.sh runs it): they load without copies in this repository, train
through the CLI, stand on the floor the task adds, and cost a small model per env."""

from __future__ import annotations

import pytest
import torch

from ctrl_rl.robots.packages import RobotModelNotFetched, resolve
from ctrl_rl.robots.robot import build_model, load_robot
from ctrl_rl.sims import make_env

ROBOTS = {"unitree_go1": "quadruped_velocity_flat", "unitree_g1": "humanoid_velocity_flat"}
STILL = {"push_velocity": 0.0, "obs_noise": 0.0, "init_joint_noise": 0.0, "init_base_vel": 0.0,
         "friction": (1.0, 1.0), "added_base_mass": (0.0, 0.0), "kp_scale": (1.0, 1.0), "kd_scale": (1.0, 1.0),
         "motor_strength": (1.0, 1.0), "max_action_delay": 0}
"""No noise, pushes, delay or randomized parameters: the robot's own gains alone."""
SAG = {"unitree_go1": 0.7, "unitree_g1": 0.9}
"""Lowest base height after 1 s of the zero agent, as a fraction of ``init_height``: the issue's 10 % for
the G1 (measured 0.94 at 1 s under Unitree's deploy gains; PD alone still cannot hold it, its ankle kp,
40 N m/rad, is far below m g h, ~240, and it falls at ~1.3 s). The Go1's published gains are soft (10 Hz,
mjlab's rule: hip kp 15.9 N m/rad), so PD alone droops it: to 0.73 (settled) in Unitree's stance with the
feet 0.153 m out (the shipped pose), 0.83 in mjlab's with them 0.100 m in; the trained policy holds its
standing height (the recipe's ``base_height_ratio``). A robot through the floor
or on its back is far below either."""


@pytest.fixture(scope="module", autouse=True)
def _fetched() -> None:
    try:
        resolve(load_robot("unitree_go1").mjcf)
    except RobotModelNotFetched as exc:
        pytest.fail(f"{exc} (scripts/test.sh fetches them)")


@pytest.mark.parametrize("name", sorted(ROBOTS))
def test_unitree_robot_stands_on_the_added_floor(name: str) -> None:
    robot = load_robot(name)
    env = make_env("mujoco", ROBOTS[name], 4, seed=0, robot=name, **STILL)
    zero = torch.zeros(env.num_envs, env.action_dim)
    for _ in range(50):  # 1 s of the zero agent
        _, _, terminated, _, _ = env.step(zero)
    s = env.task.signals(env.physics)
    height = s["base_height"][:, 0]
    assert not terminated.any()
    assert (height > SAG[name] * robot.init_height).all() and (height < 1.05 * robot.init_height).all(), height
    assert s["_contact"].all(), "every foot on the ground"


@pytest.mark.parametrize("name", sorted(ROBOTS))
def test_training_model_leaves_the_visual_meshes_out(name: str) -> None:
    """The MJCFs carry 30-37 MB of visual meshes; per-env model copies (domain randomization on CPU)
    must not: the training model is under 1 MB and has the same bodies, joints and masses."""
    robot = load_robot(name)
    train, _ = build_model(robot)
    full, _ = build_model(robot, visuals=True)
    assert full.nbuffer > 20e6 and train.nbuffer < 1e6, (full.nbuffer, train.nbuffer)
    assert (train.nbody, train.njnt, train.nq) == (full.nbody, full.njnt, full.nq)
    assert torch.allclose(torch.as_tensor(train.body_mass), torch.as_tensor(full.body_mass))


def test_collide_and_armature_reach_the_model() -> None:
    """Go1's YAML: only the feet and the base's geoms collide (the MJCF lets every limb collide), and
    the rotor armature of each motor is on its joint."""
    robot = load_robot("unitree_go1")
    model, _ = build_model(robot)
    colliding = {model.geom(g).name for g in range(model.ngeom)
                 if (model.geom_contype[g] or model.geom_conaffinity[g]) and model.geom_bodyid[g] != 0}
    assert colliding == {*robot.foot_geoms, "trunk_collision", "head_collision"}
    dofs = [model.jnt_dofadr[model.joint(j).id] for j in robot.joint_names]
    assert model.dof_armature[dofs].tolist() == pytest.approx(list(robot.armature))


@pytest.mark.parametrize("name", sorted(ROBOTS))
def test_a_unitree_robot_trains_through_the_cli(name: str, tmp_path) -> None:
    from ctrl_rl.app.train import train

    run = train([f"task={ROBOTS[name]}", f"robot={name}", "env.num_envs=8", "algo.num_steps_per_env=8",
                 "runner.max_iterations=2", f"runner.log_root={tmp_path}", "runner.progress=false"])
    assert (run / "model_2.pt").is_file()
