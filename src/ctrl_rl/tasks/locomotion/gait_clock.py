"""The gait clock: a phase the policy observes and a foot-contact schedule it is rewarded for following.

unitree_rl_gym's G1/H1 tasks give a biped a clock; walk-these-ways gives the Go1 one (a trot). With
``task.kwargs.gait_period`` > 0 each env's phase runs from its episode's start (``phase = t / period mod
1``); the policy observes ``gait_clock`` (its sin and cos; the deploy node runs the same clock from its
control ticks) and each foot is scheduled in stance for the first ``stance_fraction`` of its own cycle.
The feet's phase offsets follow from where they stand, so the robot YAML's foot order does not matter:

* two feet (a biped): the left foot (y > 0) leads, the right runs half a period behind;
* four feet (a trot): the diagonal pairs alternate. Front-left and rear-right (x y > 0) lead, front-right
  and rear-left run half a period behind.

Terms (weights per second in ``task.kwargs.rewards``, 0 by default on quadrupeds):

* ``gait_contact``: the number of feet whose contact matches the schedule;
* ``feet_swing_height``: ``sum over swinging feet of (lift - swing_height)^2`` (m^2), a penalty.
"""

from __future__ import annotations

import numpy as np
import torch


def foot_phase_offsets(foot_points: np.ndarray) -> np.ndarray:
    """``[feet]`` phase offsets in [0, 1) from the feet's ``[feet, 3]`` positions in the base frame at the
    default pose (x forward, y left): a biped alternates left and right, a quadruped trots."""
    x, y = foot_points[:, 0], foot_points[:, 1]
    if len(foot_points) == 2 and (y > 0).sum() == 1:
        return np.where(y > 0, 0.0, 0.5)
    lead = x * y > 0
    if len(foot_points) == 4 and lead.sum() == 2:
        return np.where(lead, 0.0, 0.5)
    raise ValueError(f"the gait clock schedules two feet (one left, one right) or four (a trot: front-left with "
                     f"rear-right); this robot's foot_geoms stand at {np.round(foot_points[:, :2], 3).tolist()} "
                     "(x, y in the base frame). Set task.kwargs.gait_period=0 for no clock")


def gait_phase(steps: torch.Tensor, step_dt: float, period: float) -> torch.Tensor:
    """``[N, 1]`` phase in [0, 1) after ``steps`` ``[N]`` control steps of ``step_dt`` seconds."""
    return ((steps.double() * step_dt / period) % 1.0).float()[:, None]


def stance_schedule(phase: torch.Tensor, offsets: torch.Tensor, stance_fraction: float) -> torch.Tensor:
    """``[N, feet]`` bool: whether the clock wants each foot down at ``phase`` ``[N, 1]``, each foot
    ``offsets[f]`` of a period behind the clock."""
    return (phase + offsets) % 1.0 < stance_fraction


def clock_rewards(phase: torch.Tensor, offsets: torch.Tensor, stance_fraction: float, contact: torch.Tensor,
                  lift: torch.Tensor, swing_height: float) -> dict[str, torch.Tensor]:
    """``gait_contact`` and ``feet_swing_height`` (module docstring) for ``contact`` ``[N, feet]`` and the
    feet's ``lift`` above their standing height ``[N, feet]`` (m)."""
    scheduled = stance_schedule(phase, offsets, stance_fraction)
    return {"gait_contact": (scheduled == contact).float().sum(-1),
            "feet_swing_height": ((lift - swing_height) ** 2 * ~contact).sum(-1)}
