"""Insert's recovery starts (``task.kwargs.rim_start``): a share of the training episodes begins with the peg's tip
just above the hole's rim, a few millimetres off its axis and a little tilted, where the residual's failed
episodes end (docs/experiments/residual_manipulation.md). From there a learner sees, in every rollout, what lining
the peg up again is worth; from the arm's usual start it reaches that state only when it has already failed.

The poses are solved once, on the host, by the scripted expert's inverse kinematics (:class:`~.experts.ArmIK`)
into a bank of :data:`BANK` full ``qpos`` rows (the socket drawn in its ranges, the arm holding the peg over it)
with the actions that hold each pose under the arm's PD. A reset then draws rows of the bank on the device with
the env's generator: no host work in the step (``graph_safe``). The bank's draw has its own fixed seed, so every
run and every resume of a run sees the same bank.

Only training uses them: ``ctrl-rl eval``, ``play``, ``export`` and ``collect`` start every episode as a robot does
(``InsertConfig.TRAINING_ONLY``), and the deploy node starts from where its stand-up leaves the arm.
"""

from __future__ import annotations

import math
from typing import Any

import mujoco
import numpy as np

from ctrl_rl.robots.arm_scenes import PEG, SOCKET

from .experts import ArmIK, cube_yaw, grasp_quat

BANK = 512
"""Start poses solved per task: enough that a 24-step rollout of a few hundred envs rarely repeats one."""
SEED = 0
"""The bank's own random stream."""
REACHED = 0.0005
"""m: a solved pose whose tip is further than this from its goal is left out of the bank (an unreachable corner
of the socket's range)."""


def rim_start_bank(model: mujoco.MjModel, arm: Any, cfg: Any, start_qpos: np.ndarray, socket_qadr: int,
                   count: int = BANK, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """``(qpos [count, nq], actions [count, n_arm])``: start states with the socket uniform in ``cfg.socket_x`` x
    ``socket_y`` x ``socket_yaw`` (the reset's own ranges) and the peg's tip ``rim_start_offset`` (m) off the hole's
    axis in a uniform direction, ``rim_start_height`` (m) above the hole's top, the peg tilted from upright by up to
    ``rim_start_tilt`` (rad) about a horizontal axis; ``actions`` hold each pose (gravity compensated targets as the
    task's actions). ``start_qpos``: the task's usual start, where the solver begins and what the other joints
    keep."""
    rng = np.random.default_rng(seed)
    ik, data = ArmIK(model, arm), mujoco.MjData(model)
    home = model.body(SOCKET).pos[:2]
    socket_body, tip_site = model.body(SOCKET).id, model.site(f"{PEG}_tip").id
    base_inv = np.zeros(4)
    mujoco.mju_negQuat(base_inv, ik.base_quat)
    rows, actions = [], []
    for _ in range(4 * count):
        if len(rows) == count:
            break
        qpos = np.array(start_qpos, dtype=np.float64)
        socket_x, socket_y, yaw = (rng.uniform(*r) for r in (cfg.socket_x, cfg.socket_y, cfg.socket_yaw))
        qpos[socket_qadr:socket_qadr + 3] = (socket_x - home[0], socket_y - home[1], yaw)
        data.qpos[:] = qpos
        mujoco.mj_kinematics(model, data)
        socket = ik.base_rot.T @ (data.xpos[socket_body] - ik.base_pos)
        socket_quat = np.zeros(4)
        mujoco.mju_mulQuat(socket_quat, base_inv, data.xquat[socket_body])
        upright = grasp_quat(cube_yaw(socket_quat))
        quat = tilted(upright, rng.uniform(0.0, cfg.rim_start_tilt), rng.uniform(0, 2 * np.pi))
        off, heading = rng.uniform(*cfg.rim_start_offset), rng.uniform(0, 2 * np.pi)
        tip = socket + np.array([off * math.cos(heading), off * math.sin(heading),
                                 cfg.hole_depth + rng.uniform(*cfg.rim_start_height)])
        rot = np.zeros(9)
        mujoco.mju_quat2Mat(rot, quat)
        q_arm = ik.solve(qpos, tip - rot.reshape(3, 3)[:, 2] * cfg.peg_tip, quat, iterations=100)
        qpos[ik.qadr] = q_arm
        data.qpos[:] = qpos
        mujoco.mj_kinematics(model, data)
        reached = ik.base_rot.T @ (data.site_xpos[tip_site] - ik.base_pos)
        if np.linalg.norm(reached - tip) <= REACHED:
            rows.append(qpos)
            actions.append(ik.actions(ik.hold(q_arm)))
    if len(rows) < count:
        raise ValueError(f"task.kwargs.rim_start: the arm reached only {len(rows)} of {4 * count} rim poses; narrow "
                         "task.kwargs.socket_x / socket_y to where the arm can hold the peg over the socket")
    return np.stack(rows), np.stack(actions)


def tilted(quat: np.ndarray, angle: float, heading: float) -> np.ndarray:
    """``quat`` (w, x, y, z) turned by ``angle`` (rad) about the horizontal axis at ``heading`` (rad from x)."""
    turn, out = np.zeros(4), np.zeros(4)
    mujoco.mju_axisAngle2Quat(turn, np.array([math.cos(heading), math.sin(heading), 0.0]), angle)
    mujoco.mju_mulQuat(out, turn, quat)
    return out
