"""The arm tasks' reward terms and their success rules: pure functions of the end effector's error (reach), of
the object's height and distance (lift) and of the peg tip's place in the hole (insert).

The terms follow Isaac Lab's reach task (``position_command_error``, ``..._tanh``,
``orientation_command_error``, ``action_rate_l2``, ``joint_vel_l2``) with one more kernel each for
position and orientation, narrow enough to pay for the last centimetres and hundredths of a radian
that success is judged on. Each returns ``[N]``; the task weighs them (per second, times the control dt).
"""

from __future__ import annotations

import torch

REACH_TERMS = ("position_error", "position_tracking", "position_tracking_fine", "orientation_error",
               "orientation_tracking", "action_rate", "joint_vel")
"""The reach task's reward terms, in the order :func:`reach_terms` returns them."""


def tracking_kernel(error: torch.Tensor, std: float) -> torch.Tensor:
    """``1 - tanh(error / std)``: 1 on target, 0.24 one ``std`` away, its slope ``1 / std`` at zero error
    (Isaac Lab's ``position_command_error_tanh``)."""
    return 1.0 - torch.tanh(error / std)


def reach_terms(distance: torch.Tensor, angle: torch.Tensor, action: torch.Tensor, last_action: torch.Tensor,
                joint_vel: torch.Tensor, position_std: float, position_fine_std: float,
                orientation_std: float) -> dict[str, torch.Tensor]:
    """Every term of :data:`REACH_TERMS` from the end effector's ``distance`` (m) and ``angle`` (rad) to
    its target, this step's and the last step's actions and the joint velocities (each ``[N, k]``):
    the errors themselves (to be weighed negative), the kernels of :func:`tracking_kernel` at each std,
    and the squared norms of the action change and of the joint velocities."""
    return {
        "position_error": distance,
        "position_tracking": tracking_kernel(distance, position_std),
        "position_tracking_fine": tracking_kernel(distance, position_fine_std),
        "orientation_error": angle,
        "orientation_tracking": tracking_kernel(angle, orientation_std),
        "action_rate": ((action - last_action) ** 2).sum(-1),
        "joint_vel": (joint_vel ** 2).sum(-1),
    }


def held_steps(held: torch.Tensor, within: torch.Tensor) -> torch.Tensor:
    """Consecutive steps the end effector has been within the success tolerance: ``held + 1`` where
    ``within``, else 0."""
    return torch.where(within, held + 1, torch.zeros_like(held))


LIFT_TERMS = ("reach", "approach", "lift", "height_tracking", "action_rate")
"""The lift task's reward terms, in the order :func:`lift_terms` returns them."""


def lift_terms(distance: torch.Tensor, height: torch.Tensor, rest_height: float, target_height: torch.Tensor,
               action: torch.Tensor, last_action: torch.Tensor, reach_std: float, approach_std: float,
               grasp_distance: float, height_std: float) -> dict[str, torch.Tensor]:
    """Every term of :data:`LIFT_TERMS` from the end effector's ``distance`` (m) to the object's centre, the
    object's ``height`` (its centre above the table, m), its height at rest and its ``target_height``, and this
    step's and the last step's actions (mjlab's staged lift reward, in terms):

    * ``reach``, ``approach``: :func:`tracking_kernel` of ``distance`` at ``reach_std`` and ``approach_std``;
    * ``lift``: while the end effector is within ``grasp_distance`` of the object (in hand, not flicked), one
      less the height error over the lift's length, ``clip(1 - |h - h_target| / (h_target - h_rest), 0, 1)``: the
      fraction of the way up from rest, less any overshoot (a cube held above the target is no better than one
      held as far below it; without that, residual PPO on a BC base learned to hold cubes above the target);
    * ``height_tracking``: in hand and off the table by more than a millimetre, :func:`tracking_kernel` of
      the height error at ``height_std``;
    * ``action_rate``: the squared norm of the action change."""
    in_hand = (distance < grasp_distance).to(height.dtype)
    progress = (1.0 - (height - target_height).abs() / (target_height - rest_height)).clamp(0.0, 1.0)
    lifted = (height > rest_height + 1e-3).to(height.dtype)
    return {
        "reach": tracking_kernel(distance, reach_std),
        "approach": tracking_kernel(distance, approach_std),
        "lift": in_hand * progress,
        "height_tracking": in_hand * lifted * tracking_kernel((height - target_height).abs(), height_std),
        "action_rate": ((action - last_action) ** 2).sum(-1),
    }


INSERT_TERMS = ("keypoint", "keypoint_fine", "align", "orientation", "insert", "jam", "action_rate")
"""The insert task's reward terms, in the order :func:`insert_terms` returns them."""


def insert_terms(distance: torch.Tensor, lateral: torch.Tensor, depth: torch.Tensor, angle: torch.Tensor,
                 action: torch.Tensor, last_action: torch.Tensor, hole_half_width: float, goal_depth: float,
                 keypoint_std: float, keypoint_fine_std: float, align_std: float,
                 orientation_std: float, jam_lateral: float, jam_band: float) -> dict[str, torch.Tensor]:
    """Every term of :data:`INSERT_TERMS` from the peg tip's ``distance`` (m) to its goal (on the hole's axis,
    ``goal_depth`` down), its ``lateral`` distance from the axis and ``depth`` below the hole's top
    (:func:`peg_in_hole`), the end effector's ``angle`` (rad) from its goal orientation, and this step's and the
    last step's actions (Isaac Lab Factory's keypoint rewards, then alignment, then depth):

    * ``keypoint``, ``keypoint_fine``: :func:`tracking_kernel` of ``distance`` at the two widths;
    * ``align``: :func:`tracking_kernel` of ``lateral`` at ``align_std``: the xy alignment that comes first;
    * ``orientation``: :func:`tracking_kernel` of ``angle`` at ``orientation_std``;
    * ``insert``: while the tip is over the opening (``lateral < hole_half_width``; beside the socket a tip
      below the top has missed the hole), ``clip(depth / goal_depth, 0, 1)``: the fraction of the way down;
    * ``jam``: while the tip is off the axis by more than ``jam_lateral`` (where it cannot go down the hole), how
      far it is into the band of ``jam_band`` above the hole's top: 0 at the band's top, 1 at the hole's top and
      below. A peg pressed on the rim, which friction holds where it is, scores 1; weighted negative, the term
      says "line up above the hole, then go down", and its slope says "up" to a peg already on the rim;
    * ``action_rate``: the squared norm of the action change."""
    over_hole = (lateral < hole_half_width).to(depth.dtype)
    return {
        "keypoint": tracking_kernel(distance, keypoint_std),
        "keypoint_fine": tracking_kernel(distance, keypoint_fine_std),
        "align": tracking_kernel(lateral, align_std),
        "orientation": tracking_kernel(angle, orientation_std),
        "insert": over_hole * (depth / goal_depth).clamp(0.0, 1.0),
        "jam": (lateral > jam_lateral).to(depth.dtype) * (1.0 + depth / jam_band).clamp(0.0, 1.0),
        "action_rate": ((action - last_action) ** 2).sum(-1),
    }
