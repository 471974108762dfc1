"""The locomotion recipe's gait terms, the heading hold and the shipped stances, on hand-computed cases."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
import torch

from ctrl_rl.robots.packages import RobotModelNotFetched
from ctrl_rl.robots.robot import build_model, joint_indices, load_robot
from ctrl_rl.robots.terms import heading_hold, yaw_angle
from ctrl_rl.tasks.locomotion import gait_rewards as gait
from ctrl_rl.tasks.locomotion.velocity_config import VelocityTaskConfig


def t(*rows):
    return torch.tensor(rows, dtype=torch.float64)


def test_pose_deviation_is_the_mean_squared_error_in_tolerances():
    # joint 0 off by its tolerance (0.1 / 0.1 -> 1), joint 1 off by half of it (0.3 / 0.6 -> 0.25): mean 0.625
    out = gait.pose_deviation(t([0.1, 1.2]), t([0.0, 0.9]), t([0.1, 0.6]))
    assert out.item() == pytest.approx(0.625)
    assert gait.pose_deviation(t([0.0, 0.9]), t([0.0, 0.9]), t([0.1, 0.6])).item() == 0.0


def test_height_ratio_error_is_relative_to_the_standing_height():
    # the owner's crouch: 0.19 m on a robot that stands at 0.32 m -> (0.19/0.32 - 1)^2 = 0.40625^2 = 0.16504
    assert gait.height_ratio_error(t(0.19), 0.32).item() == pytest.approx(0.165039, rel=1e-5)
    # the same relative crouch on a robot twice the size costs the same
    assert gait.height_ratio_error(t(0.38), 0.64).item() == pytest.approx(0.165039, rel=1e-5)


def test_foot_slip_counts_feet_in_contact_only():
    vel = t([[0.3, 0.4], [1.0, 0.0], [0.0, 0.0]])[None]  # speeds 0.5, 1.0, 0
    contact = torch.tensor([[True, False, True]])
    assert gait.foot_slip(vel, contact).item() == pytest.approx(0.5)  # the swinging foot's 1.0 m/s is not slip


def test_foot_clearance_charges_low_fast_feet():
    target = 0.08
    lift = t([0.0, 0.08, 0.04])[None]  # on the ground, at the target, half way
    speed = t([1.0, 2.0, 0.5])[None]
    # ((0 - .08)/.08)^2 * 1 + 0 * 2 + ((.04 - .08)/.08)^2 * .5 = 1 + 0 + 0.125
    assert gait.foot_clearance(lift, speed, target).item() == pytest.approx(1.125)


def test_torque_excess_starts_at_the_soft_limit():
    # |tau| / limit = 0.5, 0.9, 1.0 with soft 0.8 -> 0 + 0.1 + 0.2
    out = gait.torque_excess(t([5.0, -18.0, 20.0])[None], t([10.0, 20.0, 20.0]), soft=0.8)
    assert out.item() == pytest.approx(0.3)


def test_soft_joint_limits_keep_the_report_margin_on_narrow_joints():
    lo, hi = np.array([-0.8, -0.262, -0.1]), np.array([0.8, 0.262, 0.1])
    soft_lo, soft_hi = gait.soft_joint_limits(lo, hi, margin=0.075)
    # a hip (half range 0.8): 10 % is 0.08 > 0.075; the G1's ankle roll (0.262): 0.026 -> 0.075;
    # a 0.1-rad joint: 0.075 would leave 0.025 of it, so half its half range (0.05)
    np.testing.assert_allclose(soft_lo, [-0.72, -0.187, -0.05])
    np.testing.assert_allclose(soft_hi, [0.72, 0.187, 0.05])
    # margin 0 is legged_gym's 0.9 soft limit everywhere
    np.testing.assert_allclose(gait.soft_joint_limits(lo, hi, margin=0.0)[1], [0.72, 0.2358, 0.09])


@pytest.mark.parametrize("robot_name", ["ctrl_quad", "unitree_go1", "ctrl_dog"])
def test_the_margin_leaves_the_quadrupeds_soft_limits_at_ninety_percent(robot_name):
    """Every joint of the shipped quadrupeds is wide enough that 10 % of it exceeds the default margin, so
    their recipe runs (docs/experiments/gait_recipe.md) trained on the limits they have now."""
    robot = load_robot(robot_name)
    model, _ = build_model(robot)
    lo, hi = model.jnt_range[[model.joint(j).id for j in robot.joint_names]].T
    margin = VelocityTaskConfig().joint_limit_margin
    np.testing.assert_allclose(gait.soft_joint_limits(lo, hi, margin)[0], lo + 0.1 * (hi - lo) / 2)


def test_action_jerk_is_the_summed_squared_second_difference():
    # env 1, joint 1: 1 - 2*0.5 + 0 = 0 (a straight line); joint 2: -1 - 2*1 + (-1) = -4 -> 16
    # env 2: 1 - 0 + 1 = 2 per joint -> 4 * 2
    out = gait.action_jerk(t([1.0, -1.0], [1.0, 1.0]), t([0.5, 1.0], [0.0, 0.0]), t([0.0, -1.0], [1.0, 1.0]))
    assert out.tolist() == pytest.approx([16.0, 8.0])


def test_the_action_smoothness_term_sees_the_applied_actions_two_steps_back():
    """Off by default (weight 0, a recipe term: ramped in with the others); on, the env's term equals the
    applied actions' second difference, the buffers restart at a reset."""
    from ctrl_rl.sims import make_env

    env = make_env("mujoco", "quadruped_velocity_flat", 2, seed=0, action_filter=0.5, gait_terms_ramp_steps=0,
                   rewards={"action_smoothness": -1.0}, obs_noise=0.0, max_action_delay=0)
    env.reset(seed=0)
    applied = [torch.zeros(2, 12), torch.zeros(2, 12)]
    for k in range(4):
        a = torch.full((2, 12), float(k % 2) * 2 - 1)  # -1, 1, -1, 1: a flip every tick
        applied.append(0.5 * a + 0.5 * applied[-1])
        _, _, _, _, info = env.step(a)
        jerk = ((applied[-1] - 2 * applied[-2] + applied[-3]) ** 2).sum(-1).mean()
        assert float(info["log"]["Reward/action_smoothness"]) == pytest.approx(-float(jerk) * env.task.step_dt,
                                                                                rel=1e-5)
    env.close()


def test_mechanical_power_is_a_rate_of_m_g_h():
    # |2 * 3| + |-1 * 4| = 10 W over m g h = 10 kg * 9.81 * 0.3 m = 29.43 J -> 0.3398 / s
    out = gait.mechanical_power(t([2.0, -1.0])[None], t([3.0, 4.0])[None], mass=10.0, standing_height=0.3)
    assert out.item() == pytest.approx(10 / 29.43)


def test_yaw_angle_of_a_quaternion():
    half = math.radians(30) / 2  # 30 degrees about z
    q = np.array([math.cos(half), 0.0, 0.0, math.sin(half)])
    assert yaw_angle(q) == pytest.approx(math.radians(30))
    assert yaw_angle(torch.tensor(q)).item() == pytest.approx(math.radians(30))


def test_heading_hold_feeds_the_operator_forward_and_corrects_the_wrapped_error():
    # straight ahead, 0.1 rad left of the target: turn right at stiffness x error = -0.1 rad/s
    assert heading_hold(0.0, 0.0, 0.1, 1.0, -1.0, 1.0) == pytest.approx(-0.1)
    # the operator's rate passes through with no error
    assert heading_hold(0.5, 0.2, 0.2, 1.0, -1.0, 1.0) == pytest.approx(0.5)
    # across the +-pi seam the short way round: target 3.1, yaw -3.1 -> error 6.2 - 2 pi = -0.0832
    assert heading_hold(0.0, 3.1, -3.1, 1.0, -1.0, 1.0) == pytest.approx(6.2 - 2 * math.pi)
    # clipped to the trained range
    assert heading_hold(0.9, 1.0, 0.0, 1.0, -1.0, 1.0) == pytest.approx(1.0)
    torch_out = heading_hold(torch.tensor([0.0]), torch.tensor([0.0]), torch.tensor([0.1]), 1.0, -1.0, 1.0)
    assert torch_out.item() == pytest.approx(-0.1)


def test_recipe_parameters_are_checked_when_built():
    with pytest.raises(ValueError, match="heading_stiffness must be >= 0"):
        VelocityTaskConfig.from_kwargs(heading_stiffness=-1.0)
    with pytest.raises(ValueError, match="pose_tolerance > 0"):
        VelocityTaskConfig.from_kwargs(pose_tolerance=[0.0, 0.5])
    with pytest.raises(ValueError, match="joint_limit_margin >= 0"):
        VelocityTaskConfig.from_kwargs(joint_limit_margin=-0.01)


def _feet_y(robot_name: str, hips: float | None) -> np.ndarray:
    """Lateral foot positions (base frame) at the default pose, or with every hip joint at ``hips``."""
    robot = load_robot(robot_name)
    model, _ = build_model(robot)
    data = mujoco.MjData(model)
    qadr, _ = joint_indices(model, robot)
    pose = np.array(robot.default_pose)
    if hips is not None:
        pose[[i for i, j in enumerate(robot.joint_names) if "hip" in j]] = hips
    data.qpos[:7] = [0, 0, 0, 1, 0, 0, 0]
    data.qpos[qadr] = pose
    mujoco.mj_kinematics(model, data)
    ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, g) for g in robot.foot_geoms]
    return data.geom_xpos[ids][:, 1]


def test_the_go1_stance_is_what_its_yaml_says():
    """unitree_go1.yaml: hips abducted 0.1 rad outwards, feet 0.153 m either side (0.127 m at zero hip)."""
    try:
        stance, zero = _feet_y("unitree_go1", None), _feet_y("unitree_go1", 0.0)
    except RobotModelNotFetched:
        pytest.skip("the Go1 model is not fetched (ctrl-rl fetch-robots)")
    assert np.all(np.abs(stance) > np.abs(zero) + 0.02), (stance, zero)  # outwards, every foot
    np.testing.assert_allclose(np.abs(stance), 0.153, atol=1e-3)
    np.testing.assert_allclose(np.abs(zero), 0.127, atol=1e-3)
    assert np.all(np.sign(stance) == np.sign(zero))  # FR, RR right (y < 0), FL, RL left


def test_ctrl_dog_stands_with_its_feet_outwards_as_its_yaml_says():
    """ctrl_dog.yaml: Unitree's Go2 stance, hips 0.1 rad outwards: every foot further out than at zero hip."""
    stance, zero = _feet_y("ctrl_dog", None), _feet_y("ctrl_dog", 0.0)
    assert np.all(np.abs(stance) > np.abs(zero) + 0.02) and np.all(np.sign(stance) == np.sign(zero)), (stance, zero)


def test_ctrl_quad_stands_with_its_hips_at_zero():
    """ctrl_quad.yaml's default pose keeps the hips at 0: the feet stand where the hips put them."""
    np.testing.assert_allclose(_feet_y("ctrl_quad", None), _feet_y("ctrl_quad", 0.0))


def test_settled_starts_begin_where_the_pd_gains_leave_the_robot():
    """``settled_start_fraction``: resets where the default pose's PD hold settles the robot (a deploy node's
    stand-up); ctrl_dog's soft gains (kp 20) sag it to 0.76 of its standing height, every row starts there."""
    from ctrl_rl.sims import make_env

    env = make_env("mujoco", "quadruped_velocity_flat", 4, seed=0, robot="ctrl_dog", settled_start_fraction=1.0,
                   init_joint_noise=0.0, init_base_vel=0.0)
    ratio = float(env.task.settled_qpos[2]) / env.task.robot.init_height
    assert 0.7 < ratio < 0.8, ratio
    torch.testing.assert_close(env.physics.qpos[:, 2].float(), env.task.settled_qpos[2].expand(4))
    plain = make_env("mujoco", "quadruped_velocity_flat", 4, seed=0, robot="ctrl_dog")
    assert plain.task.settled_qpos is None
    assert torch.allclose(plain.physics.qpos[:, 2].float(), torch.tensor(plain.task.robot.init_height))


def test_the_gait_terms_ramp_in_and_the_others_do_not():
    """``gait_terms_ramp_steps=10``: step k (from 1) weights the recipe's terms by (k - 1) / 10, capped at 1;
    legged_gym's terms and the physics are the same as without the ramp."""
    from ctrl_rl.sims import make_env

    kw = {"robot": "ctrl_quad", "obs_noise": 0.0, "push_velocity": 0.0}
    ramped = make_env("mujoco", "quadruped_velocity_flat", 2, seed=3, gait_terms_ramp_steps=10, **kw)
    full = make_env("mujoco", "quadruped_velocity_flat", 2, seed=3, gait_terms_ramp_steps=0, **kw)
    action = torch.full((2, ramped.action_dim), 0.3)
    for k in range(1, 15):
        log_r, log_f = ramped.step(action)[4]["log"], full.step(action)[4]["log"]
        for name in ("joint_pose", "feet_clearance", "torques", "track_lin_vel_xy"):
            scale = min(1.0, (k - 1) / 10) if name in ("joint_pose", "feet_clearance") else 1.0
            torch.testing.assert_close(log_r[f"Reward/{name}"], log_f[f"Reward/{name}"] * scale)
    assert float(log_f["Reward/joint_pose"]) < 0  # the term is there to ramp
