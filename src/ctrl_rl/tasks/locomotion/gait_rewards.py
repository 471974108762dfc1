"""The gait terms of the locomotion recipe: posture, feet and effort, each scaled by the robot's own numbers.

A velocity reward alone lets a policy walk in a deep crouch with its legs splayed, drift sideways
and ride its torque limits: ``ctrl-rl eval`` then says 0.5 m/s and no falls while the owner says
"not on my robot". The anchors keep posture and effort in the task (mjlab's velocity task: a
joint-pose term with per-joint tolerance, flat orientation, foot clearance and slip; legged_gym:
base height, torque limits, a heading command). These are those terms, written so that one set of
weights serves any legged robot: every quantity is divided by a scale the robot YAML gives
(standing height, torque limits, mass, joint tolerances), so the terms are dimensionless.

Each function is pure (torch in, torch out, ``[N]`` per env), tested on hand-computed cases in
``tests/test_gait_recipe.py``; ``tasks/locomotion/locomotion.py`` weights them (``task.kwargs.rewards``).
"""

from __future__ import annotations

import numpy as np
import torch

GRAVITY = 9.81
"""m/s^2, for the effort scale ``m g h``."""


def pose_deviation(q: torch.Tensor, default_pose: torch.Tensor, tolerance: torch.Tensor) -> torch.Tensor:
    """Mean over joints of ``((q - q0) / tol)^2``: 1 when every joint is off its default pose by its
    tolerance. Tight tolerances on abduction joints keep the legs under the body (no splay); loose
    ones on the sagittal joints leave room to step (mjlab's per-joint ``pose`` std, as a penalty)."""
    return (((q - default_pose) / tolerance) ** 2).mean(-1)


def height_ratio_error(base_height: torch.Tensor, standing_height: float) -> torch.Tensor:
    """``(h / h_standing - 1)^2``: 0.17 for a base at 0.19 m on a robot that stands at 0.32 m, 0 at its
    standing height; relative, so the same weight holds a 0.27 m Go1 and a 0.76 m G1."""
    return (base_height / standing_height - 1.0) ** 2


def foot_slip(foot_velocity_xy: torch.Tensor, contact: torch.Tensor) -> torch.Tensor:
    """Sum over feet in contact of their horizontal speed (m/s): a planted foot does not slide.
    ``foot_velocity_xy``: ``[N, feet, 2]`` world frame; ``contact``: ``[N, feet]`` bool."""
    return (foot_velocity_xy.norm(dim=-1) * contact).sum(-1)


def foot_clearance(foot_lift: torch.Tensor, foot_speed_xy: torch.Tensor, target: float) -> torch.Tensor:
    """mjlab's ``foot_clearance``: ``sum over feet of ((lift - target) / target)^2 * |v_xy|``, where
    ``lift`` is the foot's height above its standing height (m) and ``target`` the swing height. The
    speed weight makes it count for feet that are moving forward (swinging), not for planted ones:
    a shuffling foot (low and fast) pays, a foot that lifts to ``target`` does not."""
    return ((((foot_lift - target) / target) ** 2) * foot_speed_xy).sum(-1)


def soft_joint_limits(lo: np.ndarray, hi: np.ndarray, margin: float) -> tuple[np.ndarray, np.ndarray]:
    """Where ``joint_pos_limits`` starts to pay: each stop moved inwards by 10 % of the joint's half range
    (legged_gym's 0.9 soft limit) or by ``margin`` (rad), whichever is more, and never past half of
    the half range. On a wide joint (a quadruped's hip, half range 0.8 rad) the 10 % rule is already
    0.08 rad; on the G1's ankle roll (half range 0.26 rad) it is 0.026 rad, inside the gait report's
    0.05-rad bar, and the G1 learned to rest that ankle on its stop."""
    half = (hi - lo) / 2
    inset = np.minimum(np.maximum(0.1 * half, margin), 0.5 * half)
    return lo + inset, hi - inset


def torque_excess(torques: torch.Tensor, limits: torch.Tensor, soft: float) -> torch.Tensor:
    """Sum over joints of ``max(0, |tau| / limit - soft)``: nothing below ``soft`` of a motor's limit,
    then linear (legged_gym's ``torque_limits`` term, per limit). Keeps peaks off the clamp, where a
    real motor's torque is no longer what the policy asked for."""
    return ((torques.abs() / limits) - soft).clamp(min=0.0).sum(-1)


def mechanical_power(torques: torch.Tensor, joint_vel: torch.Tensor, mass: float,
                     standing_height: float) -> torch.Tensor:
    """Positive and negative joint power ``sum |tau * qdot|`` (W) over ``m g h`` (J) of the robot: a
    rate (1/s) that compares a 12 kg quadruped with a 35 kg humanoid (cost of transport's numerator)."""
    return (torques * joint_vel).abs().sum(-1) / (mass * GRAVITY * standing_height)


def action_jerk(action: torch.Tensor, last: torch.Tensor, before: torch.Tensor) -> torch.Tensor:
    """Sum over joints of the applied actions' squared second difference ``(a_t - 2 a_(t-1) + a_(t-2))^2``
    (action units): what the gait report's ``action smoothness`` measures (its RMS), as a penalty."""
    return ((action - 2.0 * last + before) ** 2).sum(-1)
