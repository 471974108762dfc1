"""Robot descriptions (``ctrl_rl.robots``).

Backend-neutral robot definitions (MJCF, joint order, default pose, PD gains; see ``robot.py``), the
physics profile a task sets on them (``physics.py``), the generated terrain they stand on
(``terrain.py``), the rewards that label a robot's logs (``log_rewards.py``), and observation terms
(``terms.py``), which import numpy only: the deploy runtime evaluates the very same definitions on the
robot. The tasks written against them live in ``ctrl_rl.tasks`` (``ctrl_rl.tasks.locomotion``).

The shipped robots (the YAMLs of this folder) are :data:`ROBOTS`, ``robot=<name>``, a
:class:`ctrl_rl.registry.Registry`, the mechanism of every registry.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from ctrl_rl.registry import Registry


@cache
def _shipped_robots() -> None:
    for path in sorted(Path(__file__).resolve().parent.glob("*.yaml")):
        ROBOTS.register(path.stem, path)


ROBOTS: Registry[Path] = Registry("robot", load=_shipped_robots, also="a robot YAML path")
"""Robot YAMLs by name (``robot=<name>``): the shipped ones of this folder, and any a user registers."""
