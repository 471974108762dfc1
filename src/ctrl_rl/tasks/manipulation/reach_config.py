"""The reach task's parameters (``task.kwargs``): the target's distribution, success, rewards, physics."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import mujoco

from ctrl_rl.robots.arm import load_arm
from ctrl_rl.robots.physics import set_physics
from ctrl_rl.tasks.task_kwargs import Range, TaskPhysics, check_ranges

from .rewards import REACH_TERMS

REACH_REWARDS = {"position_error": -0.2, "position_tracking": 0.5, "position_tracking_fine": 1.0,
                 "orientation_error": -0.1, "orientation_tracking": 0.5, "action_rate": -0.005, "joint_vel": -0.001}
"""Weights per second of :data:`~ctrl_rl.tasks.manipulation.rewards.REACH_TERMS`: Isaac Lab's reach weights
for the error itself (-0.2 m^-1, -0.1 rad^-1), kernels that pay up to 2 per second on target, and the
action-rate and joint-velocity penalties at the values Isaac Lab's curriculum ends at."""


def _tuples(value: Any) -> Any:
    """Lists (as hydra and YAML give them) as tuples, nested ones too."""
    return tuple(_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


@dataclass
class ReachConfig(TaskPhysics):
    """Reach an end-effector pose target (``task.kwargs.<name>=...``; the physics settings are
    :class:`~ctrl_rl.tasks.task_kwargs.TaskPhysics`'s).

    Success (the ``success_rate`` of ``ctrl-rl eval``): an episode succeeds when its end effector has been
    within ``success_distance`` (2 cm) and ``success_angle`` (0.1 rad) of the target for the last
    ``success_hold_steps`` (10: 0.2 s) control steps of the episode, so at its end it holds the pose, not
    just passes through it. The target is drawn at each reset and again every ``target_resample_s``; the
    episode is judged on the last one, which the arm has had at least that long to reach."""

    robot: ClassVar[None] = None
    """No legged robot: the arm is :attr:`arm` (``ctrl_rl.robots.arm``), loaded by the task."""

    arm: str = "i2rt_yam"
    """A shipped arm (``ctrl_rl/robots/<name>.yaml``) or an arm YAML path (docs/manipulation.md)."""
    episode_length_s: float = 4.0
    """Episode time limit (s, truncation)."""
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
    init_joint_noise: float = 0.2
    """Reset arm joints: default pose + uniform noise of this half-width (rad), inside the joint range."""
    success_distance: float = 0.02
    """Success: the end effector within this distance (m) of the target ..."""
    success_angle: float = 0.1
    """... and within this angle (rad) of its orientation ..."""
    success_hold_steps: int = 10
    """... for this many control steps at the end of the episode."""
    position_std: float = 0.1
    """``position_tracking``'s kernel width (m)."""
    position_fine_std: float = 0.02
    """``position_tracking_fine``'s kernel width (m): success's distance."""
    orientation_std: float = 0.2
    """``orientation_tracking``'s kernel width (rad)."""
    rewards: dict[str, float] = field(default_factory=lambda: dict(REACH_REWARDS))
    """Reward term -> weight per second (0 disables a term)."""
    clip_actions: float = 10.0
    """Actions are clipped to +-this before scaling (exported with the policy)."""
    obs_noise: float = 1.0
    """Multiplier of the per-term observation noise (joint positions 0.01 rad, velocities 0.5 rad/s)."""
    privileged_critic: bool = True
    """Give the critic the end effector's pose error (the simulator's; asymmetric actor-critic)."""

    def __post_init__(self) -> None:
        super().__post_init__()  # the physics settings
        check_ranges(self)  # target_roll, target_pitch, target_yaw
        if self.workspace is not None and (len(self.workspace) != 3 or any(len(a) != 2 or a[0] > a[1]
                                                                           for a in self.workspace)):
            raise ValueError(f"task.kwargs.workspace must be [[x_lo, x_hi], [y_lo, y_hi], [z_lo, z_hi]] (m), got "
                             f"{self.workspace}")
        positive = ("episode_length_s", "success_distance", "success_angle", "position_std", "position_fine_std",
                    "orientation_std", "clip_actions")
        if any(not getattr(self, k) > 0 for k in positive) or self.target_resample_s < 0 or \
                self.init_joint_noise < 0 or self.success_hold_steps < 1:
            raise ValueError(f"task.kwargs: {', '.join(positive)} must be > 0, target_resample_s and "
                             "init_joint_noise >= 0, success_hold_steps >= 1")

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> ReachConfig:
        valid = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - valid)
        if unknown:
            raise ValueError(f"the reach task has no parameter(s) {unknown} (task.kwargs); valid: "
                             f"{', '.join(sorted(valid))}")
        kw = {k: _tuples(v) for k, v in kwargs.items()}
        if "rewards" in kw:
            bad = sorted(set(kw["rewards"]) - set(REACH_TERMS))
            if bad:
                raise ValueError(f"unknown reward term(s) {bad}; terms: {', '.join(REACH_TERMS)}")
            kw["rewards"] = {**REACH_REWARDS, **{k: float(v) for k, v in kw["rewards"].items()}}
        return cls(**kw)

    def apply_physics(self, model: mujoco.MjModel, robot: None) -> mujoco.MjModel:
        """The task's physics profile on ``model`` (``robots/physics.py``), as the arm YAML's ``physics`` says."""
        set_physics(model, self.physics_profile(), load_arm(self.arm))
        return model
