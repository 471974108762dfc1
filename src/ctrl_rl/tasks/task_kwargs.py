"""Parameters (``task.kwargs``) that MuJoCo-family task configs share, declared and checked once.

* :class:`TaskPhysics`: the physics a task steps (``physics_dt``, ``decimation``, the solver budget), a
  base of the config dataclass; :meth:`TaskPhysics.physics_profile` is what ``apply_physics`` hands
  ``robots/physics.py: set_physics``.
* :data:`Range`: a ``[low, high]`` parameter; :func:`check_ranges` refuses every such field of a config
  whose low is above its high (``tuple[float, float]`` annotations count too).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from ctrl_rl.robots.physics import PhysicsProfile

Range = tuple[float, float]
"""A ``[low, high]`` parameter (``task.kwargs.<name>=[low,high]``), low <= high: :func:`check_ranges`."""
RANGE_TYPES = ("Range", "tuple[float, float]")
"""The annotations (strings, as ``from __future__ import annotations`` keeps them) of range fields."""


def check_ranges(cfg: Any) -> None:
    """A ``ValueError`` for the first range field of dataclass ``cfg`` that is not ``[low, high]`` with
    low <= high."""
    for f in fields(cfg):
        value = getattr(cfg, f.name)
        if f.type in RANGE_TYPES and (len(value) != 2 or float(value[0]) > float(value[1])):
            raise ValueError(f"task.kwargs.{f.name} must be [low, high] with low <= high, got {list(value)}")


@dataclass
class TaskPhysics:
    """The physics settings of a task's config (its base class): the physics step and the solver budget
    replace the MJCF's (``robots/physics.py``), the control step is ``physics_dt * decimation``."""

    physics_dt: float = 0.005
    """Physics step (s), replacing the MJCF's timestep (a different one is reported)."""
    decimation: int = 4
    """Physics steps per control step (5 ms physics -> 50 Hz control)."""
    solver_iterations: int = 10
    """Solver iterations per physics step at most (``<option iterations>``, replacing the MJCF's)."""
    ls_iterations: int = 20
    """Line-search iterations per solver iteration at most (``<option ls_iterations>``)."""
    solver_tolerance: float = 1e-8
    """The solver stops when the relative cost improvement is below this (``<option tolerance>``)."""

    def __post_init__(self) -> None:
        if not self.physics_dt > 0 or self.decimation < 1 or self.solver_iterations < 1 or self.ls_iterations < 1 \
                or not self.solver_tolerance >= 0:
            raise ValueError("task.kwargs.physics_dt must be > 0, decimation, solver_iterations and ls_iterations "
                             f">= 1, solver_tolerance >= 0 (e.g. 0.005, 4, 10, 20, 1e-8), got {self.physics_dt}, "
                             f"{self.decimation}, {self.solver_iterations}, {self.ls_iterations}, "
                             f"{self.solver_tolerance}")

    def physics_profile(self) -> PhysicsProfile:
        """These settings as ``robots/physics.py`` sets them on a compiled model."""
        return PhysicsProfile(self.physics_dt, self.decimation, self.solver_iterations, self.ls_iterations,
                              self.solver_tolerance)
