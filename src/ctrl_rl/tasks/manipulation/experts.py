"""Scripted experts for the arm tasks: what ``ctrl-rl collect scripted task=<id>`` rolls for demonstrations.

An expert reads the simulator's state (it is privileged: the cube's pose, the joint positions) and turns an
end-effector goal into the task's actions by inverse kinematics, damped least squares on MuJoCo's site
Jacobian (:class:`ArmIK`), plus gravity compensation: the arms' PD gains are soft, so each joint's target is
the solved position plus the gravity torque there over its stiffness. One expert per task, registered where it
is defined (:data:`EXPERTS`):

* ``reach``: the target pose itself (position only on an arm with fewer than six joints);
* ``lift``: a small state machine per env: above the cube, down to it, close the gripper, lift to the
  target height and hold, the gripper pointing down and turned with the cube's yaw;
* ``insert``: line the peg's tip up over the hole, then down it, the peg upright and square to the walls,
  with an integral correction of the tip's lateral error (the soft arm's steady offset).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import mujoco
import numpy as np
import torch

from ctrl_rl.env import Obs
from ctrl_rl.registry import Registry
from ctrl_rl.robots.arm import arm_indices
from ctrl_rl.robots.terms import quat_error

Expert = Callable[[Obs], torch.Tensor]
"""A policy: observations in, the task's actions out (it reads the env's state, not ``obs``)."""
EXPERTS: Registry[Callable[[Any], Expert]] = Registry("expert")
"""Task id -> the expert's class, built as ``EXPERTS[task](env)``."""

DAMPING = 1e-4
"""Damped least squares' lambda^2 (m^2): keeps the step finite near singular poses."""


class ArmIK:
    """Inverse kinematics and gravity-compensated joint targets for one arm, on a host copy of the model.

    Goals are in the arm's base frame; ``solve`` starts from a world's ``qpos`` and returns the arm joints'
    positions that put the end-effector site at the goal (position, and orientation where given). ``model``: the
    task's host model (an env's ``physics.model``), ``arm``: its ``ArmRobot`` (``task.arm``)."""

    def __init__(self, model: mujoco.MjModel, arm: Any) -> None:
        self.model, self.data, self.arm = model, mujoco.MjData(model), arm
        self.n_arm = len(arm.arm_joints)
        self.qadr, self.dofs = arm_indices(model, arm.arm_joints)
        self.site = model.site(arm.ee_site).id
        self.lo, self.hi = model.jnt_range[model.dof_jntid[self.dofs]].T
        self.kp = np.asarray(arm.kp[:self.n_arm])
        self.default = np.asarray(arm.default_pose)
        self.scale = np.asarray(arm.action_scales)
        self.orientation = self.n_arm >= 6
        """Whether the arm can set the end effector's orientation too (six joints or more)."""
        mujoco.mj_kinematics(model, self.data)
        base = model.body(arm.base_body).id
        self.base_pos, self.base_rot = self.data.xpos[base].copy(), self.data.xmat[base].reshape(3, 3).copy()
        self.base_quat = self.data.xquat[base].copy()

    def solve(self, qpos: np.ndarray, pos: np.ndarray, quat: np.ndarray | None, iterations: int = 15) -> np.ndarray:
        """Arm joint positions (within their ranges) that bring the site to ``pos`` and ``quat`` (base frame;
        None: position only) from ``qpos``: damped least squares, ``dq = J^T (J J^T + lambda^2 I)^-1 e``."""
        m, d = self.model, self.data
        d.qpos[:] = qpos
        goal = self.base_pos + self.base_rot @ pos
        goal_quat = None
        if quat is not None and self.orientation:
            goal_quat = np.zeros(4)
            mujoco.mju_mulQuat(goal_quat, self.base_quat, quat)
        jacp, jacr, now = np.zeros((3, m.nv)), np.zeros((3, m.nv)), np.zeros(4)
        for _ in range(iterations):
            mujoco.mj_kinematics(m, d)
            mujoco.mj_comPos(m, d)
            mujoco.mj_jacSite(m, d, jacp, jacr, self.site)
            error, jac = goal - d.site_xpos[self.site], jacp[:, self.dofs]
            if goal_quat is not None:
                mujoco.mju_mat2Quat(now, d.site_xmat[self.site])
                error = np.concatenate([error, quat_error(now, goal_quat)])
                jac = np.concatenate([jac, jacr[:, self.dofs]])
            step = jac.T @ np.linalg.solve(jac @ jac.T + DAMPING * np.eye(len(error)), error)
            d.qpos[self.qadr] = np.clip(d.qpos[self.qadr] + step, self.lo, self.hi)
        return d.qpos[self.qadr].copy()

    def hold(self, q_arm: np.ndarray) -> np.ndarray:
        """Joint targets that hold ``q_arm`` at rest under the PD: ``q + g(q) / kp`` (``g``: the gravity torque,
        MuJoCo's bias force at zero velocity), within the joints' ranges."""
        d = self.data
        d.qpos[self.qadr], d.qvel[:] = q_arm, 0.0
        mujoco.mj_forward(self.model, d)
        return np.clip(q_arm + d.qfrc_bias[self.dofs] / self.kp, self.lo, self.hi)

    def actions(self, targets: np.ndarray) -> np.ndarray:
        """The task's actions for joint ``targets`` of its first ``len(targets)`` actuated joints: offsets from
        the default pose over the action scale."""
        k = len(targets)
        return (targets - self.default[:k]) / self.scale[:k]


def _rows(x: torch.Tensor) -> np.ndarray:
    return x.detach().to("cpu", torch.float64).numpy()


class ReachExpert:
    """Inverse kinematics to each env's pose target, gravity compensated."""

    def __init__(self, env: Any) -> None:
        self.env, self.ik = env, ArmIK(env.physics.model, env.task.arm)

    def __call__(self, obs: Obs) -> torch.Tensor:
        task, qpos = self.env.task, _rows(self.env.physics.qpos)
        target = _rows(task.target)
        out = [self.ik.actions(self.ik.hold(self.ik.solve(q, t[:3], t[3:]))) for q, t in zip(qpos, target, strict=True)]
        return torch.as_tensor(np.stack(out), dtype=torch.float32, device=self.env.device)


def grasp_quat(yaw: float) -> np.ndarray:
    """The end effector's orientation (w, x, y, z; base frame) for a top grasp: its z axis straight down, its
    y axis (the fingers' travel) turned by ``yaw`` about the vertical."""
    c, s = math.cos(yaw), math.sin(yaw)
    rot = np.array([[-c, -s, 0.0], [-s, c, 0.0], [0.0, 0.0, -1.0]])  # columns: x, y, z axes
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, rot.reshape(-1))
    return quat


def cube_yaw(quat: np.ndarray) -> float:
    """A resting cube's yaw (rad), folded into [-pi/4, pi/4): the four top grasps are a quarter turn apart."""
    w, x, y, z = quat
    yaw = math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return (yaw + math.pi / 4) % (math.pi / 2) - math.pi / 4


class LiftExpert:
    """Per env: ``APPROACH`` a point above the cube, ``DESCEND`` to it, ``CLOSE`` the gripper, ``LIFT`` to the
    target height and hold there; the gripper open (+1) until it closes (-1)."""

    APPROACH, DESCEND, CLOSE, LIFT = range(4)
    HOVER = 0.08
    """m above the cube's centre where the descent starts."""
    GRASP_HEIGHT = 0.025
    """The lowest the end effector goes (m above the table): the fingertips stay off it."""
    NEAR, AT = 0.015, 0.008
    """m: close enough to the hover point to descend, to the grasp point to close."""
    TIMEOUT, CLOSE_TIME = 1.5, 0.4
    """s: the longest an approach or descent waits for ``NEAR``/``AT``; the time the gripper takes to close."""

    def __init__(self, env: Any) -> None:
        self.env, self.ik = env, ArmIK(env.physics.model, env.task.arm)
        n = env.num_envs
        self.phase, self.timer = np.zeros(n, dtype=np.int64), np.zeros(n)
        self.grasp = np.zeros((n, 3))
        """Where each env's end effector closed on its cube (base frame)."""

    def goal(self, i: int, cube: np.ndarray, ee: np.ndarray, target: float) -> tuple[np.ndarray, float]:
        """Env ``i``'s end-effector goal and gripper action this step; advances its phase."""
        dt, grip = self.env.task.step_dt, 1.0
        above = np.array([cube[0], cube[1], max(cube[2], self.GRASP_HEIGHT) + self.HOVER])
        at = np.array([cube[0], cube[1], max(cube[2], self.GRASP_HEIGHT)])
        phase, t = self.phase[i], self.timer[i]
        if phase == self.APPROACH and (np.linalg.norm(ee - above) < self.NEAR or t > self.TIMEOUT):
            phase, t = self.DESCEND, 0.0
        elif phase == self.DESCEND and (np.linalg.norm(ee - at) < self.AT or t > self.TIMEOUT):
            phase, t, self.grasp[i] = self.CLOSE, 0.0, at
        elif phase == self.CLOSE and t > self.CLOSE_TIME:
            phase, t = self.LIFT, 0.0
        self.phase[i], self.timer[i] = phase, t + dt
        if phase >= self.CLOSE:
            grip = -1.0
        goal = {self.APPROACH: above, self.DESCEND: at, self.CLOSE: self.grasp[i]}.get(phase)
        if goal is None:  # LIFT: the cube's centre to the target height
            goal = self.grasp[i] + np.array([0.0, 0.0, target - self.env.task.cfg.cube_size])
        return goal, grip

    def __call__(self, obs: Obs) -> torch.Tensor:
        env, task = self.env, self.env.task
        starting = _rows(env.episode_length) == 0
        self.phase[starting], self.timer[starting] = self.APPROACH, 0.0
        s = task.signals(env.physics)
        pose, ee, qpos = _rows(s["object_pose"]), _rows(s["ee_pos"]), _rows(env.physics.qpos)
        target, n_arm = _rows(task.lift_target)[:, 0], self.ik.n_arm
        out = np.zeros((env.num_envs, env.action_dim))
        for i in range(env.num_envs):
            goal, grip = self.goal(i, pose[i, :3], ee[i], target[i])
            q = self.ik.solve(qpos[i], goal, grasp_quat(cube_yaw(pose[i, 3:])))
            out[i, :n_arm] = self.ik.actions(self.ik.hold(q))
            out[i, n_arm:] = grip
        return torch.as_tensor(out, dtype=torch.float32, device=env.device)


class InsertExpert:
    """Per env: ``ALIGN`` the peg's tip ``HOVER`` above the hole's centre, then ``DESCEND`` at ``SPEED`` to the
    hole's bottom and stay there (back to ``ALIGN`` for at most ``RETRY`` s if the tip lands on the rim, off the
    hole); the end effector upright (its approach axis down) and turned with the socket's
    yaw. The end effector's goal orientation is turned by the integral of its orientation error, which takes out
    the tilt that inverse kinematics plus gravity compensation leave on a soft arm (a peg tilted by 0.1 rad jams
    in a hole with 1 mm of clearance). The tip's position needs no such state: solved each step from the arm's
    measured joints, it lines up within ``LINED_UP`` by itself, and an integral of the lateral error (the expert
    before 2026-12-02) made the demonstrations a function of a hidden state as well as of the observation, which
    BC cannot fit: from 50 demonstrations it scored 0.19-0.38 on three seeds, against 0.34-0.50 without
    (docs/experiments/residual_manipulation.md)."""

    ALIGN, DESCEND = range(2)
    HOVER = 0.01
    """m above the hole's top where the tip lines up."""
    LINED_UP, NEAR = 0.0005, 0.003
    """m: the tip's lateral error, and its distance to the hover point, that start the descent."""
    TIMEOUT, RETRY, SPEED, PRESS = 3.0, 1.0, 0.05, 0.005
    """s: the longest the alignment waits, first and after landing on the rim; m/s: how fast the tip's goal goes
    down; m: how far below the tip it goes at most until the tip is in the hole (a peg pressed hard on the rim
    cannot slide to the hole)."""
    TURN_GAIN, ACTIVE = 0.05, 0.02
    """The orientation correction: the share of the error added a step, and how near (m) the tip must be to the
    hover point before it integrates (far off, the error is the approach, not an offset)."""
    TURN_LIMIT = 0.2
    """rad: the orientation correction's bound, per axis."""

    def __init__(self, env: Any) -> None:
        self.env, self.ik = env, ArmIK(env.physics.model, env.task.arm)
        n = env.num_envs
        self.phase, self.timer = np.zeros(n, dtype=np.int64), np.zeros(n)
        self.turn = np.zeros((n, 3))
        """The integral of each env's orientation error: a rotation vector (base frame) applied to its goal."""

    def tip_goal(self, i: int, socket: np.ndarray, tip: np.ndarray, turn_error: np.ndarray) -> np.ndarray:
        """Env ``i``'s goal for the peg's tip this step (base frame); advances its phase and the corrections
        (``turn_error``: the end effector's orientation error, a rotation vector)."""
        cfg, dt = self.env.task.cfg, self.env.task.step_dt
        top = socket[2] + cfg.hole_depth
        error = socket[:2] - tip[:2]
        hover = np.array([*socket[:2], top + self.HOVER])
        in_hole = tip[2] < top - 0.002 and np.linalg.norm(error) < cfg.hole_half_width  # the walls centre it
        if np.linalg.norm(hover - tip) < self.ACTIVE and not in_hole:
            self.turn[i] = np.clip(self.turn[i] + self.TURN_GAIN * turn_error, -self.TURN_LIMIT, self.TURN_LIMIT)
        if self.phase[i] == self.ALIGN and ((np.linalg.norm(error) < self.LINED_UP and
                                             np.linalg.norm(hover - tip) < self.NEAR) or self.timer[i] > self.TIMEOUT):
            self.phase[i], self.timer[i] = self.DESCEND, 0.0
        elif self.phase[i] == self.DESCEND and tip[2] < top + 0.001 and np.linalg.norm(error) > cfg.hole_half_width:
            self.phase[i], self.timer[i] = self.ALIGN, self.TIMEOUT - self.RETRY  # on the rim: line up again
        self.timer[i] += dt
        z = hover[2] if self.phase[i] == self.ALIGN else max(socket[2], hover[2] - self.SPEED * self.timer[i],
                                                               -np.inf if in_hole else tip[2] - self.PRESS)
        return np.array([*socket[:2], z])

    def __call__(self, obs: Obs) -> torch.Tensor:
        env, task = self.env, self.env.task
        starting = _rows(env.episode_length) == 0
        self.phase[starting], self.timer[starting], self.turn[starting] = self.ALIGN, 0.0, 0.0
        s = task.signals(env.physics)
        socket, tip, qpos = _rows(s["object_pose"]), _rows(s["tool_pos"]), _rows(env.physics.qpos)
        ee_quat = _rows(s["ee_quat"])
        out, rot, quat = np.zeros((env.num_envs, env.action_dim)), np.zeros(9), np.zeros(4)
        for i in range(env.num_envs):
            upright = grasp_quat(cube_yaw(socket[i, 3:]))  # a square hole's four turns, as a cube's
            goal = self.tip_goal(i, socket[i, :3], tip[i], quat_error(ee_quat[i], upright))
            angle = float(np.linalg.norm(self.turn[i]))
            mujoco.mju_axisAngle2Quat(quat, self.turn[i] / angle if angle > 0 else np.array([0.0, 0.0, 1.0]), angle)
            mujoco.mju_mulQuat(quat, quat.copy(), upright)
            mujoco.mju_quat2Mat(rot, upright)
            ee = goal - rot.reshape(3, 3)[:, 2] * task.cfg.peg_tip
            out[i] = self.ik.actions(self.ik.hold(self.ik.solve(qpos[i], ee, quat)))
        return torch.as_tensor(out, dtype=torch.float32, device=env.device)


EXPERTS.register("reach", ReachExpert)
EXPERTS.register("lift", LiftExpert)
EXPERTS.register("insert", InsertExpert)
