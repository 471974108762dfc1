"""Edits a robot's MJCF gets before training, from what its YAML says (``robots/robot.py: build_model``).

A robot owner's MJCF (MuJoCo Menagerie's, mjlab's, their own) is written for viewing as much as for
training: no floor, every limb colliding, visual meshes of tens of MB, no rotor armature. These edits
make the training model from it without touching the file:

* :func:`add_floor_if_missing`: a ground plane where the MJCF has none (a robot would fall through
  the world: a training run that cannot be right).
* :func:`filter_collisions`: only the geoms the YAML's ``collide`` names touch anything.
* :func:`set_armature`: the YAML's rotor armature (reflected inertia) per joint.
* :func:`strip_visual_meshes`: mesh geoms that neither collide nor carry mass, and the meshes only
  they used, leave the training model (Go1: 37.2 MB -> well under 1 MB per model copy); rendering
  builds the model with them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

import mujoco

log = logging.getLogger(__name__)

GROUND_TYPES = (mujoco.mjtGeom.mjGEOM_PLANE, mujoco.mjtGeom.mjGEOM_HFIELD)

FEET = "feet"
"""In ``collide``: the robot's ``foot_geoms``."""


def add_floor_if_missing(spec: mujoco.MjSpec, robot: str) -> bool:
    """A ground plane where the MJCF has none (Menagerie's and mjlab's robot files carry no floor):
    without one the robot falls through the world. Returns whether one was added."""
    if any(g.type in GROUND_TYPES for g in spec.worldbody.geoms):
        return False
    spec.worldbody.add_geom(name="ctrl_rl_floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05],
                            contype=1, conaffinity=1)
    log.info("robot %s: its MJCF has no ground; added a floor plane at z=0", robot)
    return True


def _robot_geoms(spec: mujoco.MjSpec, base_body: str) -> list:
    """Every geom of the robot: the base body and all bodies below it."""
    base = spec.body(base_body)
    return [g for body in [base, *base.find_all(mujoco.mjtObj.mjOBJ_BODY)] for g in body.geoms]


def filter_collisions(spec: mujoco.MjSpec, base_body: str, collide: Sequence[str], feet: Sequence[str],
                      robot: str) -> list[str]:
    """Only the robot's geoms named in ``collide`` (exact names or regular expressions matched in full;
    ``feet`` stands for the foot geoms) keep their collision bits; every other robot geom gets
    ``contype = conaffinity = 0``. A named geom that does not collide in the MJCF is given 1/1.
    Returns the names of the colliding geoms; an entry that matches nothing is an error."""
    patterns = [p for entry in collide for p in (feet if entry == FEET else [entry])]
    geoms = _robot_geoms(spec, base_body)
    kept = []
    for pattern in patterns:
        if not any(g.name and re.fullmatch(pattern, g.name) for g in geoms):
            named = sorted(g.name for g in geoms if g.name)
            raise ValueError(f"robot {robot}: collide entry {pattern!r} matches no geom of the robot; its named geoms "
                             f"are {named}")
    for g in geoms:
        if g.name and any(re.fullmatch(p, g.name) for p in patterns):
            if not (g.contype or g.conaffinity):
                g.contype, g.conaffinity = 1, 1
            kept.append(g.name)
        else:
            g.contype, g.conaffinity = 0, 0
    return kept


def set_armature(spec: mujoco.MjSpec, joints: Sequence[str], armature: Sequence[float]) -> None:
    """Rotor armature (kg m^2, the reflected inertia of motor and gearbox) on each actuated joint."""
    for name, value in zip(joints, armature, strict=True):
        spec.joint(name).armature = float(value)


def _carries_mass(spec: mujoco.MjSpec, geom) -> bool:  # noqa: ANN001 - mujoco's MjsGeom
    """Whether the compiler would take mass or inertia from ``geom``."""
    if geom.density == 0 or geom.mass == 0:
        return False
    mode = spec.compiler.inertiafromgeom
    if mode == mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_TRUE:
        return True
    return not (mode == mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_AUTO and geom.parent.explicitinertial)


def strip_visual_meshes(spec: mujoco.MjSpec) -> int:
    """Delete mesh geoms that neither collide nor carry mass, then the meshes no geom uses any more.
    The physics is unchanged (same bodies, joints, masses, contacts); returns the geoms deleted."""
    doomed = [g for g in spec.geoms if g.type == mujoco.mjtGeom.mjGEOM_MESH and not (g.contype or g.conaffinity)
              and not _carries_mass(spec, g)]
    for g in doomed:
        spec.delete(g)
    used = {g.meshname for g in spec.geoms if g.type == mujoco.mjtGeom.mjGEOM_MESH}
    for mesh in list(spec.meshes):
        if mesh.name not in used:
            spec.delete(mesh)
    return len(doomed)
