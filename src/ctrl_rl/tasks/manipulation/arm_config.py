"""Parameters (``task.kwargs``) every arm task shares, declared and checked once: the arm, the episode, the
start, the actions, the observation noise, success's hold time and the reward weights, plus the physics of
:class:`~ctrl_rl.tasks.task_kwargs.TaskPhysics`. A task's config (``ReachConfig``, ``LiftConfig``) adds its
own fields and names its reward terms and default weights (:attr:`ArmTaskConfig.REWARD_TERMS`,
:attr:`ArmTaskConfig.DEFAULT_REWARDS`)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import mujoco

from ctrl_rl.robots.arm import load_arm
from ctrl_rl.robots.physics import set_physics
from ctrl_rl.tasks.task_kwargs import Range, TaskPhysics, check_ranges


def as_tuples(value: Any) -> Any:
    """Lists (as hydra and YAML give them) as tuples, nested ones too."""
    return tuple(as_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


def check_positive(cfg: Any, names: tuple[str, ...]) -> None:
    """A ``ValueError`` naming every field of ``names`` that is not > 0."""
    bad = [f"{k}={getattr(cfg, k)}" for k in names if not getattr(cfg, k) > 0]
    if bad:
        raise ValueError(f"task.kwargs: {', '.join(bad)}: each must be > 0")


@dataclass
class ArmTaskConfig(TaskPhysics):
    """What every arm task's parameters hold (a base of its config dataclass)."""

    TASK: ClassVar[str] = "arm"
    """The task's id, for messages."""
    REWARD_TERMS: ClassVar[tuple[str, ...]] = ()
    """The task's reward terms: the keys ``rewards`` may set."""
    DEFAULT_REWARDS: ClassVar[dict[str, float]] = {}
    """Weight per second of each of :attr:`REWARD_TERMS`, where ``task.kwargs.rewards`` sets none."""

    robot: ClassVar[None] = None
    """No legged robot: the arm is :attr:`arm` (``ctrl_rl.robots.arm``), loaded by the task."""

    arm: str = "i2rt_yam"
    """A shipped arm (``ctrl_rl/robots/<name>.yaml``) or an arm YAML path (docs/manipulation.md)."""
    episode_length_s: float = 4.0
    """Episode time limit (s, truncation)."""
    init_joint_noise: float = 0.2
    """Reset arm joints: default pose + uniform noise of this half-width (rad), inside the joint range."""
    success_hold_steps: int = 10
    """Success needs its condition held for this many control steps at the end of the episode (10: 0.2 s)."""
    rewards: dict[str, float] = field(default_factory=dict)
    """Reward term -> weight per second (0 disables a term); terms left out keep their default weight."""
    clip_actions: float = 10.0
    """Actions are clipped to +-this before scaling (exported with the policy)."""
    obs_noise: float = 1.0
    """Multiplier of the per-term observation noise (joint positions 0.01 rad, velocities 0.5 rad/s)."""

    def __post_init__(self) -> None:
        super().__post_init__()  # the physics settings
        check_ranges(self)
        check_positive(self, ("episode_length_s", "clip_actions"))
        if self.init_joint_noise < 0 or self.success_hold_steps < 1 or self.obs_noise < 0:
            raise ValueError(f"task.kwargs: init_joint_noise and obs_noise must be >= 0 and success_hold_steps >= 1, "
                             f"got {self.init_joint_noise}, {self.obs_noise}, {self.success_hold_steps}")
        bad = sorted(set(self.rewards) - set(self.REWARD_TERMS))
        if bad:
            raise ValueError(f"unknown reward term(s) {bad} of task {self.TASK}; its terms: "
                             f"{', '.join(self.REWARD_TERMS)} (task.kwargs.rewards.<term>=<weight per second>)")
        self.rewards = {**self.DEFAULT_REWARDS, **{k: float(v) for k, v in self.rewards.items()}}

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> ArmTaskConfig:
        """The config from ``task.kwargs``; a ``ValueError`` naming the valid parameters for a wrong one."""
        valid = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - valid)
        if unknown:
            raise ValueError(f"the {cls.TASK} task has no parameter(s) {unknown} (task.kwargs); valid: "
                             f"{', '.join(sorted(valid))}")
        return cls(**{k: v if k == "rewards" else as_tuples(v) for k, v in kwargs.items()})

    def apply_physics(self, model: mujoco.MjModel, robot: None) -> mujoco.MjModel:
        """The task's physics profile on ``model`` (``robots/physics.py``), as the arm YAML's ``physics`` says."""
        set_physics(model, self.physics_profile(), load_arm(self.arm))
        return model


@dataclass
class ObjectTaskConfig(ArmTaskConfig):
    """What the arm tasks with an object in play add (lift's cube, insert's peg): a longer episode, a closer
    start, and the object's physics drawn per world at every ``env.reset``."""

    episode_length_s: float = 5.0
    """Episode time limit (s, truncation): time for the scripted expert's approach, grasp or alignment, and hold."""
    init_joint_noise: float = 0.1
    """Reset arm joints: the start pose (``settle_s``) + uniform noise of this half-width (rad), inside the joint
    range."""
    settle_s: float = 1.0
    """Episodes start where the arm's own PD holds the rest targets: the default pose, then this long (s) under the
    PD at rest (as a real arm stands once the deploy node's stand-up has brought it there); 0: from the default
    pose itself (mjlab's and Isaac Lab's reset). The YAM's soft gains leave its grasp site 7.6 cm lower: an insert
    policy trained from the default pose scored 0.70 in ``ctrl-rl eval`` and 0.29 in sim2sim, where it starts
    settled (docs/manipulation.md, section 8)."""
    object_friction: Range = (0.6, 1.2)
    """The object's sliding friction coefficient, per world (MuJoCo combines it with a finger's or a wall's by
    the maximum)."""
    object_mass: Range = (0.03, 0.1)
    """The object's mass (kg), per world, its inertia scaled with it (mjlab's lift cube: 0.05)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.settle_s < 0:
            raise ValueError(f"task.kwargs.settle_s must be >= 0 (s; 0: start from the default pose), got "
                             f"{self.settle_s}")
        if self.object_mass[0] <= 0 or self.object_friction[0] <= 0:
            raise ValueError(f"task.kwargs.object_mass and object_friction must be > 0, got {list(self.object_mass)}, "
                             f"{list(self.object_friction)}")
