"""The lift task's parameters (``task.kwargs``): the cube, its randomization, the target height, success,
rewards; the arm, the episode and the physics are :class:`~.arm_config.ArmTaskConfig`'s."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from ctrl_rl.robots.physics import PhysicsProfile
from ctrl_rl.tasks.task_kwargs import Range

from .arm_config import ObjectTaskConfig, check_positive
from .rewards import LIFT_TERMS

LIFT_REWARDS = {"reach": 1.0, "approach": 1.0, "lift": 4.0, "height_tracking": 8.0, "action_rate": -0.01}
"""Weights per second of :data:`~ctrl_rl.tasks.manipulation.rewards.LIFT_TERMS`: reaching and approaching
pay up to 2 per second, a cube in hand at the target height up to 12 more (mjlab's staged reward puts the
lift above the reach the same way); the action-rate penalty is mjlab's."""


@dataclass
class LiftConfig(ObjectTaskConfig):
    """Lift a cube from the table to a target height (``task.kwargs.<name>=...``).

    The cube (a box of half-size ``cube_size`` on a free joint) starts at rest on the table at a position
    uniform in ``cube_x`` x ``cube_y`` (m, the arm's base frame), turned about the vertical by a yaw uniform in
    ``cube_yaw``; each world's cube gets a sliding friction uniform in ``object_friction`` and a mass uniform in
    ``object_mass`` (its inertia scaled with it) at every ``env.reset``. The target height (of the cube's centre
    above the table) is uniform in ``lift_height``, one per episode.

    Success (the ``success_rate`` of ``ctrl-rl eval``): the cube's centre within ``success_tolerance`` (2 cm)
    of the target height for the last ``success_hold_steps`` (10: 0.2 s) control steps of the episode: it is
    held up at the end, not tossed through the target."""

    TASK: ClassVar[str] = "lift"
    REWARD_TERMS: ClassVar[tuple[str, ...]] = LIFT_TERMS
    DEFAULT_REWARDS: ClassVar[dict[str, float]] = LIFT_REWARDS

    cube_size: float = 0.02
    """The cube's half-size (m; mjlab's lift cube: 0.02, a 4 cm cube)."""
    cube_x: Range = (0.22, 0.34)
    """The cube's start, x (m, base frame)."""
    cube_y: Range = (-0.12, 0.12)
    """The cube's start, y (m, base frame)."""
    cube_yaw: Range = (-0.7, 0.7)
    """The cube's start yaw (rad). Within +-pi/4 a top grasp's wrist turn follows the yaw continuously (a cube
    has four grasps; wider ranges make the nearest one jump)."""
    lift_height: Range = (0.1, 0.2)
    """The target height of the cube's centre above the table (m), one per episode."""
    success_tolerance: float = 0.02
    """Success: the cube's centre within this distance (m) of the target height, held for
    ``success_hold_steps`` at the episode's end."""
    reach_std: float = 0.1
    """``reach``'s kernel width (m)."""
    approach_std: float = 0.02
    """``approach``'s kernel width (m)."""
    grasp_distance: float = 0.03
    """The cube counts as in hand (``lift`` and ``height_tracking`` pay) while the end effector is within this
    distance (m) of its centre."""
    height_std: float = 0.03
    """``height_tracking``'s kernel width (m)."""

    def __post_init__(self) -> None:
        super().__post_init__()  # the shared settings, every range's low <= high, the object's physics
        check_positive(self, ("cube_size", "success_tolerance", "reach_std", "approach_std", "grasp_distance",
                              "height_std"))
        if self.lift_height[0] < self.cube_size + self.success_tolerance:
            raise ValueError(f"task.kwargs.lift_height {list(self.lift_height)} starts below the cube's rest height "
                             f"plus the success tolerance ({self.cube_size + self.success_tolerance:g} m): a cube "
                             "left on the table would count as lifted; raise lift_height's low end")
        if self.cube_x[0] <= 0:
            raise ValueError(f"task.kwargs.cube_x {list(self.cube_x)} must lie in front of the arm (x > 0, m)")

    def physics_profile(self) -> PhysicsProfile:
        """The shared settings with mjlab's contact model for grasping: an elliptic friction cone and impratio 10
        (a pyramidal cone at impratio 1 lets a pinched cube slip out in about a second)."""
        return replace(super().physics_profile(), cone="elliptic", impratio=10.0)
