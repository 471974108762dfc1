"""A legged robot standing at its default pose: where its feet are, how high they rest, how far its joints
may stray, and where its own PD gains let it settle (``tasks/locomotion/locomotion.py`` builds its task from these)."""

from __future__ import annotations

import mujoco
import numpy as np

from ctrl_rl.robots.robot import RobotConfig, joint_indices


def foot_rest_heights(model: mujoco.MjModel, robot: RobotConfig) -> list[float]:
    """Each foot geom's centre height when it stands on flat ground: a box's half height, else its radius."""
    ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, g) for g in robot.foot_geoms]
    return [float(model.geom_size[i][2] if model.geom_type[i] == mujoco.mjtGeom.mjGEOM_BOX else model.geom_size[i][0])
            for i in ids]


def settled_pose(model: mujoco.MjModel, robot: RobotConfig, seconds: float = 2.5) -> np.ndarray:
    """``qpos`` where the robot's PD actuators, holding the default pose, leave it after ``seconds`` on flat
    ground from its standing height (the deploy node's stand-up and hold), its base back over the origin."""
    data = mujoco.MjData(model)
    qadr, _ = joint_indices(model, robot)
    data.qpos[:] = model.qpos0
    data.qpos[:7] = [0, 0, robot.init_height, 1, 0, 0, 0]
    data.qpos[qadr] = robot.default_pose
    data.ctrl[:robot.num_joints] = robot.default_pose  # build_model's actuators, in joint order
    for _ in range(int(round(seconds / model.opt.timestep))):
        mujoco.mj_step(model, data)
    qpos = data.qpos.copy()
    qpos[:2] = 0.0
    return qpos


def pose_tolerance(robot: RobotConfig, tolerance: tuple[float, ...]) -> list[float]:
    """Per joint: ``tolerance[0]`` for joints whose mirror flips their sign (abduction, roll, yaw),
    ``tolerance[1]`` for the others; every joint gets ``tolerance[1]`` without a mirror map."""
    if not robot.mirror:
        return [float(tolerance[1])] * robot.num_joints
    _, sign = robot.mirror_map()
    return [float(tolerance[0] if s < 0 else tolerance[1]) for s in sign]


def standing_foot_points(model: mujoco.MjModel, robot: RobotConfig) -> np.ndarray:
    """Foot geom centres ``[feet, 3]`` relative to the base, with the base at the origin and the joints
    at the default pose."""
    data = mujoco.MjData(model)
    qadr, _ = joint_indices(model, robot)
    data.qpos[:] = model.qpos0
    data.qpos[:7] = [0, 0, 0, 1, 0, 0, 0]
    data.qpos[qadr] = robot.default_pose
    mujoco.mj_kinematics(model, data)
    ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, g) for g in robot.foot_geoms]
    return data.geom_xpos[ids].copy()
