"""What a legged task gives the gait report (``ctrl_rl.deploy.gait_report``): the robot's constants and,
per control step, the per-env signals it reads. ``MjVecEnv.record_gait`` turns them on for evaluation
(``info["gait"]``); training never reads them."""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np
import torch


def gait_spec(task: Any, model: mujoco.MjModel) -> dict[str, Any]:
    """``GaitSpec``'s fields for ``task``'s robot: the nominal mass (the per-env added base mass is left
    out: its range is about zero-mean), the robot's standing height, limits and the control dt."""
    r = task.robot
    return {"standing_height": float(r.init_height), "mass": float(model.body_subtreemass[task.base_id]),
            "torque_limits": np.asarray(r.torque_limits, dtype=np.float64),
            "joint_limits": np.asarray(task.joint_limits, dtype=np.float64), "dt": float(task.step_dt),
            "joint_names": list(r.joint_names), "foot_names": list(r.foot_geoms)}


def step_signals(task: Any) -> dict[str, torch.Tensor]:
    """``GaitTrace``'s fields for this step, ``[num_envs, ...]`` each, from the task's post-step signals
    (the state every env reached, before the ended rows reset), as copies: a later step rewrites the
    signals' buffers (CUDA graphs). ``command`` is the operator's (what the owner asked for; a heading
    hold's correction is the policy's business), as the next observation carries it."""
    s = task.post_step_signals
    sd = s["_sensordata"]
    foot_vel = torch.stack([sd[:, task.layout[f"{g}_vel"]] for g in task.robot.foot_geoms], 1)
    out = {"base_pos": s["_base_pos"], "base_height": s["base_height"][:, 0], "base_quat": s["imu_quat"],
           "base_lin_vel": s["base_lin_vel"], "gyro": s["imu_gyro"],
           "command": getattr(task, "user_commands", s["command"]),  # without a heading hold: the one command
           "joint_pos": s["joint_pos"], "joint_vel": s["joint_vel"], "torque": s["_torques"],
           "foot_contact": s["_contact"], "foot_vel": foot_vel, "actions": s["last_action"]}
    return {k: v.clone() for k, v in out.items()}
