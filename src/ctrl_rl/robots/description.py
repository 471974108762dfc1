"""What every robot YAML shares, a legged robot's (``robot.py``) and an arm's (``arm.py``).

:class:`RobotDescription` holds the fields each starts with (its name, its MJCF, the body it is measured
from) and what follows from them alone: where the MJCF is, the deploy bundle's copy of the config,
the per-joint action scales, reading the YAML and loading a robot by name or path. :func:`per_joint`
expands a YAML key given once, per joint (or per joint of a leg) into one value per joint.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import yaml

from . import ROBOTS
from .packages import SCHEME, resolve

MAX_STAND_UP_STIFFNESS = 10.0
"""The stiffest stand-up a robot YAML (``stand_up_stiffness``) or the deploy node (``safety.stand_up_stiffness``)
may ask for: 10 x the bundle's kp (joints ~3 x as fast)."""


@dataclass(frozen=True)
class RobotDescription:
    """The fields every robot YAML starts with; a subclass declares its joints (``joint_names``, the
    bundle's joint order), gains, ``action_scale`` and ``source`` (the YAML's path) and reads the rest."""

    kind: ClassVar[str] = "robot"
    """What the YAML describes, in messages (``robot config <path> does not exist``)."""

    name: str
    mjcf: str
    """Path of the MJCF (relative paths are relative to the YAML file that declared it), absolute, or
    ``pkg:<dist>==<version>/<path>`` (a packaged model, ``robots/packages.py``)."""
    base_body: str
    """The body the robot is measured from: a legged robot's floating base (the IMU and base velocity are
    measured on it), an arm's mount (end-effector poses and targets are in its frame)."""

    @property
    def num_joints(self) -> int:
        return len(self.joint_names)  # a subclass's field (legged) or property (arm)

    @property
    def action_scales(self) -> tuple[float, ...]:
        """``action_scale`` as one value per joint."""
        scale = self.action_scale
        return tuple(scale) if isinstance(scale, tuple) else (float(scale),) * self.num_joints

    def bundle_dict(self) -> dict[str, Any]:
        """The config as a deploy bundle carries it (plain JSON types), so sim2sim rebuilds this robot
        anywhere the model resolves: a ``pkg:`` model as written, a file as its absolute path (a run moved
        to a machine without that file is refused by ``deploy sim2sim``, naming ``--robot``)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "source" and value is not None and value != ():
                out[f.name] = json.loads(json.dumps(value))  # tuples -> lists
        if not self.mjcf.startswith(SCHEME):
            out["mjcf"] = str(self.mjcf_path().resolve())
        return out

    def mjcf_path(self) -> Path:
        """The MJCF file; a ``pkg:`` model resolves into the fetched package (``robots/packages.py``)."""
        if self.mjcf.startswith(SCHEME):
            return resolve(self.mjcf)
        path = Path(self.mjcf)
        if not path.is_absolute() and self.source:
            path = Path(self.source).parent / path
        return path

    @classmethod
    def read_yaml(cls, path: str | Path) -> tuple[Path, dict[str, Any]]:
        """``path`` and the mapping its YAML holds (empty for an empty file); a missing file is an error."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{cls.kind} config {path} does not exist")
        return path, yaml.safe_load(path.read_text()) or {}

    @classmethod
    def load(cls, name_or_path: str) -> Any:
        """A shipped or registered robot by name (:data:`ctrl_rl.robots.ROBOTS`) or a YAML by path, read by
        the subclass's ``from_yaml``."""
        if Path(name_or_path).suffix in (".yaml", ".yml") and name_or_path not in ROBOTS:
            return cls.from_yaml(name_or_path)
        return cls.from_yaml(ROBOTS[name_or_path])


def per_joint(value: Any, n: int, what: str, joints: str, single: bool = True,
              per_leg: bool = False) -> tuple[float, ...]:
    """``value`` as ``n`` floats: one per joint; or (``single``) one for all; or (``per_leg``) one per joint
    of a leg, repeated for every leg. Else a ``ValueError``: "``what`` has k values; give [1 or] one per
    ``joints``"."""
    vals = [float(v) for v in np.atleast_1d(value)]
    if single and len(vals) == 1:
        vals = vals * n
    elif per_leg and len(vals) != n and n % len(vals) == 0:  # e.g. one value per joint of a leg
        vals = vals * (n // len(vals))
    if len(vals) != n:
        raise ValueError(f"{what} has {len(vals)} values; give {'1 or ' if single else ''}one per {joints}")
    return tuple(vals)
