"""The gait recipe's polish on the contact model the robot is judged on (``task.kwargs.polish_contact``).

A Menagerie-style MJCF asks for an elliptic friction cone with impratio 100; the task's physics profile
trains on MuJoCo's pyramidal cone at impratio 1 (about 1.4x the steps per second on ctrl_dog), and sim2sim
and the robot run the MJCF's own. With ``polish_contact: mjcf`` the polish's iterations, from
``polish_start`` on, step the MJCF's cone and impratio (capped at ``polish_impratio_max``), so the policy's
last updates see the friction it is deployed on. An MJCF that asks for the profile's contact model changes
nothing. The switch follows the task's step counter both ways (a restored checkpoint gets its iteration's
contact model), through ``set_contact`` of a physics that can change it between steps (CPU MuJoCo's).
"""

from __future__ import annotations

import logging
from typing import Any

import mujoco
import torch

from ctrl_rl.robots.physics import CONES, mjcf_contact
from ctrl_rl.robots.robot import RobotConfig, load_robot

log = logging.getLogger(__name__)


class PolishContact:
    """Which contact model a task's physics steps: the profile's before ``start`` control steps, the MJCF's
    (impratio capped) after; :attr:`switches` is False when the two are the same."""

    def __init__(self, cfg: Any, robot: RobotConfig, model: mujoco.MjModel) -> None:
        self.start = int(cfg.polish_start)
        self.before = (_cone_name(model.opt.cone), float(model.opt.impratio))
        self.after = _capped_mjcf_contact(cfg, robot) if cfg.polish_contact == "mjcf" else self.before
        self.switches = self.after != self.before
        self._applied = self.before
        self._robot = robot.name

    def sync(self, physics: Any, steps: torch.Tensor) -> None:
        """Give ``physics`` the contact model for control step ``steps`` (one host read while it switches)."""
        if not self.switches:
            return
        want = self.after if int(steps) >= self.start else self.before
        if want != self._applied:
            physics.set_contact(CONES[want[0]], want[1])
            log.info("robot %s: the contact model is now %s cone, impratio %g (was %s, %g): the polish's from control "
                     "step %d (task.kwargs.polish_contact)", self._robot, *want, *self._applied, self.start)
            self._applied = want


def polished_contact(cfg: Any) -> dict[str, Any]:
    """The task kwargs (``cone``, ``impratio``) a polished checkpoint's inference runs on: the contact model its
    last iterations trained on (``app/session.py: as_polished``)."""
    if cfg.polish_contact != "mjcf":
        return {}
    cone, impratio = _capped_mjcf_contact(cfg, load_robot(cfg.robot))
    return {"cone": cone, "impratio": impratio}


def _capped_mjcf_contact(cfg: Any, robot: RobotConfig) -> tuple[str, float]:
    """The MJCF's friction cone and its impratio capped at ``polish_impratio_max``."""
    cone, impratio = mjcf_contact(robot)
    return cone, min(impratio, float(cfg.polish_impratio_max))


def _cone_name(cone: int) -> str:
    return next(name for name, value in CONES.items() if value == cone)
