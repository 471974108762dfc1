"""The physics a task steps: its own profile, whatever options the robot's MJCF carries.

An owner's MJCF chooses its physics for viewing and accuracy (MuJoCo Menagerie's Go2:
``<option cone="elliptic" impratio="100"/>``, MuJoCo's default 100 solver iterations); a training run
steps it millions of times, so by default the task's profile replaces those options on the compiled
model (:func:`set_physics`), as mjlab does for its robots (its ``MujocoCfg.apply``: pyramidal cone,
impratio 1, and 10 / 20 solver iterations in its velocity tasks). Each replacement is logged once per
process and robot, with what it changes. A robot YAML with ``physics: mjcf`` keeps the MJCF's options;
the timestep is the task's either way (the control rate must not depend on the MJCF).

What belongs to the robot stays: masses, inertias, joint ranges, per-joint ``frictionloss``,
``damping`` and ``armature`` (unless the YAML sets ``armature``), contact geometry and its
``condim``/``friction``/``solref``/``solimp``; the integrator, gravity and option flags are the MJCF's too.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import mujoco

from .mjcf_edits import log_once

if TYPE_CHECKING:
    from .robot import RobotConfig

log = logging.getLogger(__name__)

PHYSICS_CHOICES = ("task", "mjcf")
"""The robot YAML's ``physics``: the task's profile (default) or the MJCF's own options."""

CONES = {"pyramidal": mujoco.mjtCone.mjCONE_PYRAMIDAL, "elliptic": mujoco.mjtCone.mjCONE_ELLIPTIC}

ELLIPTIC_COST = ("an elliptic cone with impratio 100 costs about 2x per physics step (mjlab's Go1 on a CPU: "
                 "20.8 vs 10.7 us; Menagerie's Go2, as its owner measured: 68 vs 21 us, 3.2x)")
"""Measured (docs/robots.md, section 3): one thread's ``mj_step`` of the training model under random PD
targets, 1.9-2.2x on the Go1 across runs on a shared 2-core machine, 1.6-1.8x on the tests' Go2-like model."""


@dataclass(frozen=True)
class PhysicsProfile:
    """The options a task sets on every robot it steps (``task.kwargs``: ``physics_dt``, ``decimation``,
    ``solver_iterations``, ``ls_iterations``, ``solver_tolerance``)."""

    timestep: float
    decimation: int
    iterations: int
    ls_iterations: int
    tolerance: float
    cone: str = "pyramidal"
    """Friction cone; pyramidal is the cheaper (and MuJoCo's and mjlab's default)."""
    impratio: float = 1.0
    """Frictional-to-normal impedance ratio; above 1 stiffens friction on either cone (MuJoCo and MuJoCo Warp
    divide the friction rows' regularizer by it, the pyramidal cone's rows too)."""


def _cone(model: mujoco.MjModel) -> str:
    return "elliptic" if model.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC else "pyramidal"


def mjcf_contact(robot: RobotConfig) -> tuple[str, float]:
    """The friction cone and impratio the robot's MJCF asks for (MuJoCo's defaults where it says nothing)."""
    option = mujoco.MjSpec.from_file(str(robot.mjcf_path())).option
    return ("elliptic" if option.cone == mujoco.mjtCone.mjCONE_ELLIPTIC else "pyramidal"), float(option.impratio)


def set_physics(model: mujoco.MjModel, profile: PhysicsProfile, robot: RobotConfig) -> None:
    """The task's physics on ``model``: its timestep always (a different MJCF timestep is replaced, and
    said: the control rate ``timestep * decimation`` must not depend on which MJCF was loaded); its
    cone, impratio and solver budget unless ``robot.physics`` is ``mjcf``. Each change is logged once."""
    key, dt = robot.source or robot.name, profile.timestep
    if abs(model.opt.timestep - dt) > 1e-12:
        log_once(log, key, "timestep", logging.WARNING,
                 "robot %s: the MJCF's timestep %g s is replaced by task.kwargs.physics_dt=%g s (control %g Hz = "
                 "1 / (physics_dt x decimation %d)); set task.kwargs.physics_dt to keep the MJCF's",
                 robot.name, model.opt.timestep, dt, 1.0 / (dt * profile.decimation), profile.decimation)
    model.opt.timestep = float(dt)
    if robot.physics == "mjcf":
        cost = f"; {ELLIPTIC_COST}" if _cone(model) == "elliptic" else ""
        log_once(log, key, "physics", logging.INFO,
                 "robot %s: physics: mjcf keeps its MJCF's options: %s cone, impratio %g, solver iterations %d, "
                 "ls_iterations %d, tolerance %g (the timestep is task.kwargs.physics_dt's)%s", robot.name,
                 _cone(model), model.opt.impratio, model.opt.iterations, model.opt.ls_iterations,
                 model.opt.tolerance, cost)
        return
    _replace_contact_model(model, profile, robot, key)
    budget = [f"{name} {old:g} -> {new:g}" for name, old, new in (
        ("solver iterations", model.opt.iterations, profile.iterations),
        ("ls_iterations", model.opt.ls_iterations, profile.ls_iterations),
        ("tolerance", model.opt.tolerance, profile.tolerance)) if old != new]
    if budget:
        log_once(log, key, "solver", logging.INFO, "robot %s: the task's solver budget replaces its MJCF's: %s "
                 "(task.kwargs.solver_iterations, ls_iterations, solver_tolerance)", robot.name, ", ".join(budget))
    model.opt.iterations = int(profile.iterations)
    model.opt.ls_iterations = int(profile.ls_iterations)
    model.opt.tolerance = float(profile.tolerance)


def _replace_contact_model(model: mujoco.MjModel, profile: PhysicsProfile, robot: RobotConfig, key: str) -> None:
    """The profile's cone and impratio, with a warning when the MJCF asked for others (it changes the
    friction the policy learns on, and what a physics step costs)."""
    old = (_cone(model), float(model.opt.impratio))
    new = (profile.cone, float(profile.impratio))
    if old != new:
        cost = f": {ELLIPTIC_COST}" if old[0] == "elliptic" and new[0] == "pyramidal" else ""
        log_once(log, key, "contact", logging.WARNING,
                 "robot %s: the task's physics profile replaces its MJCF's %s cone with impratio %g -> %s cone, "
                 "impratio %g%s. Kept from the MJCF: joint frictionloss, damping and armature, contact geometry. "
                 "Set `physics: mjcf` in its robot YAML (%s) to keep the MJCF's options",
                 robot.name, *old, *new, cost, robot.source or "the robot YAML")
    model.opt.cone = CONES[profile.cone]
    model.opt.impratio = float(profile.impratio)
