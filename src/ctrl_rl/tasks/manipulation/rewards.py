"""The reach task's reward terms and its success rule: pure functions of the end effector's error.

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
