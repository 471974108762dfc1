"""The insert task's parameters (``task.kwargs``): the peg, the socket and its hole, their randomization, success,
rewards; the arm, the episode and the physics are :class:`~.arm_config.ArmTaskConfig`'s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ctrl_rl.tasks.task_kwargs import Range

from .arm_config import ObjectTaskConfig, check_positive
from .rewards import INSERT_TERMS

INSERT_REWARDS = {"keypoint": 1.0, "keypoint_fine": 2.0, "align": 2.0, "orientation": 1.0, "insert": 8.0,
                  "jam": 0.0, "action_rate": -0.01}
"""Weights per second of :data:`~ctrl_rl.tasks.manipulation.rewards.INSERT_TERMS`: bringing the peg's tip to the
hole and lining it up pays up to 6 per second, going down the hole up to 8 more (Factory's keypoint rewards at
a coarse and a fine scale, then the insertion itself); the action-rate penalty is lift's."""


@dataclass
class InsertConfig(ObjectTaskConfig):
    """Insert a peg held in the gripper into a square hole of a socket fixed on the table (``task.kwargs.<name>=...``).

    The peg (a square bar of half-width ``peg_half_width`` and length ``peg_length``) is held rigidly by the end
    effector, its axis along the end effector's approach (z) axis, its tip ``peg_tip`` beyond the end-effector site.
    The socket is four box walls of thickness ``wall_thickness`` and height ``hole_depth`` around a square hole of
    half-width ``peg_half_width + clearance`` (``clearance`` per side: 1 mm, 2 mm in all), standing on the table.
    At each episode's reset the socket's centre is uniform in ``socket_x`` x ``socket_y`` (m, the arm's base
    frame) and its yaw uniform in ``socket_yaw``; each world's peg gets a sliding friction uniform in
    ``object_friction`` and a mass uniform in ``object_mass`` at every ``env.reset`` (lift's rule).

    Success (the ``success_rate`` of ``ctrl-rl eval``): the peg's tip at least ``success_depth`` x ``hole_depth``
    below the hole's top and within ``clearance`` + ``success_margin`` of the hole's axis (lateral), for the last
    ``success_hold_steps`` (10: 0.2 s) control steps of the episode: inserted and left there, not pushed through
    the target on the way."""

    TASK: ClassVar[str] = "insert"
    REWARD_TERMS: ClassVar[tuple[str, ...]] = INSERT_TERMS
    DEFAULT_REWARDS: ClassVar[dict[str, float]] = INSERT_REWARDS
    TRAINING_ONLY: ClassVar[tuple[str, ...]] = ("rim_start",)
    """Keys that shape training alone: a checkpoint's ``eval``, ``play``, ``export`` and ``collect`` set them back to
    their defaults (``ctrl_rl.app.session``), so a policy is judged from the start a robot gives it."""

    peg_half_width: float = 0.008
    """The peg's half-width (m): a 16 mm square bar."""
    peg_length: float = 0.08
    """The peg's length (m)."""
    peg_tip: float = 0.06
    """The peg's tip beyond the end-effector site along its approach axis (m): past the YAM's fingertips (2.2 cm)
    by more than the hole's depth, so the fingers stay above the socket."""
    clearance: float = 0.001
    """The gap between the peg and each wall of the hole when centred (m, per side; issue 51: <= 2 mm in all)."""
    hole_depth: float = 0.025
    """The hole's depth, the walls' height (m); the hole's bottom is the table."""
    wall_thickness: float = 0.01
    """The socket's walls' thickness (m)."""
    socket_x: Range = (0.24, 0.32)
    """The socket's centre, x (m, base frame)."""
    socket_y: Range = (-0.1, 0.1)
    """The socket's centre, y (m, base frame)."""
    socket_yaw: Range = (-0.3, 0.3)
    """The socket's yaw (rad), one per episode."""
    object_friction: Range = (0.3, 0.8)
    """The peg's sliding friction coefficient, per world (MuJoCo combines it with a wall's by the maximum)."""
    object_mass: Range = (0.02, 0.08)
    """The peg's mass (kg), per world."""
    socket_obs_noise: float = 0.0005
    """Uniform noise on the observed socket pose (m; times ``obs_noise``): half the clearance, what a good
    fixture calibration gets wrong."""
    success_depth: float = 0.8
    """Success: the tip at least this fraction of ``hole_depth`` below the hole's top."""
    success_margin: float = 0.0005
    """Success: the tip's lateral distance from the hole's axis at most ``clearance`` + this (m): the contacts'
    softness lets a peg pressed on a wall sit a fraction of a millimetre in it."""
    keypoint_std: float = 0.1
    """``keypoint``'s kernel width (m): the tip's distance to its goal in the hole."""
    keypoint_fine_std: float = 0.01
    """``keypoint_fine``'s kernel width (m)."""
    align_std: float = 0.005
    """``align``'s kernel width (m): the tip's lateral distance from the hole's axis."""
    orientation_std: float = 0.1
    """``orientation``'s kernel width (rad): the end effector's angle from its goal (the peg upright, turned
    with the socket)."""

    tool_correction: bool = True
    """Observe ``tool_correction`` (``ctrl_rl.robots.terms``): the joint step that takes the peg's tip to the hole's
    bottom, through the tip's Jacobian (6 values). False: the 35 values of the observation before it."""
    jam_band: float = 0.003
    """``jam``: the band above the hole's top (m) over which the term rises from 0 to 1 as a tip off the hole's
    axis (by more than ``clearance`` + ``success_margin``) comes down onto the rim."""
    rim_start: float = 0.0
    """The share of training episodes that start with the peg's tip just above the rim, off the hole's axis (a
    recovery curriculum, ``insert_starts.py``); 0: every episode starts from the arm's settled pose. Training
    only: evaluation starts as a robot does."""
    rim_start_offset: Range = (0.0005, 0.004)
    """A rim start's tip: its distance from the hole's axis (m)."""
    rim_start_height: Range = (0.0005, 0.004)
    """A rim start's tip: its height above the hole's top (m)."""
    rim_start_tilt: float = 0.03
    """A rim start's peg: its largest tilt from upright (rad; the residual's failures were tilted 0.014-0.042)."""

    def __post_init__(self) -> None:
        super().__post_init__()  # the shared settings, every range's low <= high, the object's physics
        check_positive(self, ("peg_half_width", "peg_length", "peg_tip", "clearance", "hole_depth", "wall_thickness",
                              "success_depth", "keypoint_std", "keypoint_fine_std", "align_std", "orientation_std",
                              "jam_band"))
        if not 0 <= self.rim_start <= 1 or self.rim_start_offset[0] < 0 or self.rim_start_height[0] < 0 \
                or self.rim_start_tilt < 0:
            raise ValueError(f"task.kwargs.rim_start must lie in [0, 1] (a share of the episodes), rim_start_offset, "
                             f"rim_start_height and rim_start_tilt >= 0, got {self.rim_start}, "
                             f"{list(self.rim_start_offset)}, {list(self.rim_start_height)}, {self.rim_start_tilt}")
        if self.success_depth > 1 or self.success_margin < 0 or self.socket_obs_noise < 0:
            raise ValueError(f"task.kwargs.success_depth must be <= 1 (a fraction of hole_depth) and success_margin, "
                             f"socket_obs_noise >= 0, got {self.success_depth}, {self.success_margin}, "
                             f"{self.socket_obs_noise}")
        if self.peg_tip < self.hole_depth or self.peg_tip > self.peg_length:
            raise ValueError(f"task.kwargs.peg_tip {self.peg_tip} must lie between hole_depth ({self.hole_depth}: the "
                             f"peg must reach the bottom) and peg_length ({self.peg_length}: the peg must reach the "
                             "hand); lengthen the peg or move its tip")
        if self.socket_x[0] <= 0:
            raise ValueError(f"task.kwargs.socket_x {list(self.socket_x)} must lie in front of the arm (x > 0, m)")

    @property
    def hole_half_width(self) -> float:
        """The hole's half-width (m): the peg's plus the clearance."""
        return self.peg_half_width + self.clearance
