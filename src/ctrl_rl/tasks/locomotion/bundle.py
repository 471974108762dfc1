"""The deploy bundle's robot data for a velocity task (``VelocityTask.deploy_metadata``): the policy's
observation layout, action mapping, gains and limits, and the command the node holds, as ``ctrl-rl export``
writes them into ``exported/policy.json``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .locomotion import VelocityTask


def deploy_metadata(task: VelocityTask) -> dict[str, Any]:
    """Observation layout and action mapping of ``task``'s policy group, for the deploy bundle."""
    r = task.robot
    return {
        "robot": r.name,
        "robot_config": r.bundle_dict(),  # sim2sim rebuilds a user's robot from this
        "obs_terms": [t.to_dict() for t in task.obs_terms["policy"]],
        "joint_names": list(r.joint_names),
        "default_pose": list(r.default_pose),
        "action_scale": r.action_scale,
        "action_joints": [r.joint_names[i] for i in r.action_index],  # the policy's outputs, in order
        "action_clip": task.cfg.clip_actions,
        "action_filter": task.cfg.action_filter,
        "action_lowpass_hz": task.cfg.action_lowpass_hz,
        **({"gait_period": task.cfg.gait_period} if task.cfg.gait_period > 0 else {}),
        "kp": list(r.kp), "kd": list(r.kd), "torque_limits": list(r.torque_limits),
        "stand_up_stiffness": r.stand_up_stiffness,  # the node's stand-up gains over kp
        "joint_limits": task.joint_limits.tolist(),  # hard [lo, hi] per joint (rad), for the deploy watchdog
        "control_dt": task.step_dt, "decimation": task.decimation,
        "command": {"names": ["lin_vel_x", "lin_vel_y", "ang_vel_yaw"],
                    "ranges": [list(task.cfg.lin_vel_x), list(task.cfg.lin_vel_y), list(task.cfg.ang_vel_yaw)],
                    "heading_stiffness": task.cfg.heading_stiffness},  # the node holds the heading as training did
    }
