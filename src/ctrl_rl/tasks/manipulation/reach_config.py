"""The reach task's parameters (``task.kwargs``): the target's distribution, success, rewards, physics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ctrl_rl.tasks.task_kwargs import Range

from .arm_config import ArmTaskConfig, check_positive
from .rewards import REACH_TERMS

REACH_REWARDS = {"position_error": -0.2, "position_tracking": 0.5, "position_tracking_fine": 1.0,
                 "orientation_error": -0.1, "orientation_tracking": 0.5, "action_rate": -0.005, "joint_vel": -0.001}
"""Weights per second of :data:`~ctrl_rl.tasks.manipulation.rewards.REACH_TERMS`: Isaac Lab's reach weights
for the error itself (-0.2 m^-1, -0.1 rad^-1), kernels that pay up to 2 per second on target, and the
action-rate and joint-velocity penalties at the values Isaac Lab's curriculum ends at."""


@dataclass
class ReachConfig(ArmTaskConfig):
    """Reach an end-effector pose target (``task.kwargs.<name>=...``; the arm, the episode, the start,
    the actions, noise, reward weights and physics are :class:`~.arm_config.ArmTaskConfig`'s).

    Success (the ``success_rate`` of ``ctrl-rl eval``): an episode succeeds when its end effector has been
    within ``success_distance`` (2 cm) and ``success_angle`` (0.1 rad) of the target for the last
    ``success_hold_steps`` (10: 0.2 s) control steps of the episode, so at its end it holds the pose, not
    just passes through it. The target is drawn at each reset and again every ``target_resample_s``; the
    episode is judged on the last one, which the arm has had at least that long to reach."""

    TASK: ClassVar[str] = "reach"
    REWARD_TERMS: ClassVar[tuple[str, ...]] = REACH_TERMS
    DEFAULT_REWARDS: ClassVar[dict[str, float]] = REACH_REWARDS

    target_resample_s: float = 2.0
    """A new target every this many seconds of an episode (0: one per episode)."""
    workspace: tuple[Range, Range, Range] | None = None
    """Target positions, uniform in ``[[x_lo, x_hi], [y_lo, y_hi], [z_lo, z_hi]]`` (m, the arm's base frame);
    None: the arm YAML's ``workspace``."""
    target_roll: Range = (-0.3, 0.3)
    """Target orientation: the end effector's at the default pose, turned by a roll in this range (rad, about
    its own x axis), then :attr:`target_pitch` about its y and :attr:`target_yaw` about its z axis."""
    target_pitch: Range = (-0.3, 0.3)
    """See :attr:`target_roll` (rad)."""
    target_yaw: Range = (-0.5, 0.5)
    """See :attr:`target_roll` (rad)."""
    success_distance: float = 0.02
    """Success: the end effector within this distance (m) of the target ..."""
    success_angle: float = 0.1
    """... and within this angle (rad) of its orientation, for ``success_hold_steps`` at the episode's end."""
    position_std: float = 0.1
    """``position_tracking``'s kernel width (m)."""
    position_fine_std: float = 0.02
    """``position_tracking_fine``'s kernel width (m): success's distance."""
    orientation_std: float = 0.2
    """``orientation_tracking``'s kernel width (rad)."""
    privileged_critic: bool = True
    """Give the critic the end effector's pose error (the simulator's; asymmetric actor-critic)."""

    def __post_init__(self) -> None:
        super().__post_init__()  # the shared settings; target_roll, target_pitch, target_yaw
        if self.workspace is not None and (len(self.workspace) != 3 or any(len(a) != 2 or a[0] > a[1]
                                                                           for a in self.workspace)):
            raise ValueError(f"task.kwargs.workspace must be [[x_lo, x_hi], [y_lo, y_hi], [z_lo, z_hi]] (m), got "
                             f"{self.workspace}")
        check_positive(self, ("success_distance", "success_angle", "position_std", "position_fine_std",
                              "orientation_std"))
        if self.target_resample_s < 0:
            raise ValueError(f"task.kwargs.target_resample_s must be >= 0 (0: one target per episode), got "
                             f"{self.target_resample_s}")
