"""Edits a robot's MJCF gets before training, from what its YAML says (``robots/robot.py: build_model``).

A robot owner's MJCF (MuJoCo Menagerie's, mjlab's, their own) is written for viewing as much as for
training: no floor, every limb colliding, visual meshes of tens of MB, no rotor armature. These edits
make the training model from it without touching the file:

* :func:`add_floor_if_missing`: a ground plane where the MJCF has none (a robot would fall through
  the world: a training run that cannot be right).
* :func:`filter_collisions`: only the geoms the YAML's ``collide`` selects (by geom name, body or
  default class: Menagerie's collision geoms have no names) touch anything.
* :func:`set_armature`: the YAML's rotor armature (reflected inertia) per joint.
* :func:`drop_own_sensors`: the MJCF's own sensors leave (tasks read only the ones ``build_model`` adds,
  under canonical names such as ``imu_quat`` that an owner's sensor block may use too).
* :func:`replace_actuators`: the MJCF's actuators leave; PD position actuators with the YAML's gains and
  torque limits drive the actuated joints (the gains trained with are the gains exported).
* :func:`fit_keyframes`: keyframes keep their poses; their ``ctrl`` fits the replaced actuators.
* :func:`strip_visual_meshes`: mesh geoms that neither collide nor carry mass, and the meshes only
  they used, leave the training model (Go1: 37.2 MB -> well under 1 MB per model copy); rendering
  builds the model with them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

import mujoco

log = logging.getLogger(__name__)

_SAID: set[tuple[str, str]] = set()


def log_once(logger: logging.Logger, robot: str, topic: str, level: int, msg: str, *args: Any) -> None:
    """Log ``msg`` the first time this process says ``topic`` about ``robot`` (its YAML path): a run builds
    the model several times (training, rendering, evaluation), the owner needs the news once."""
    if (robot, topic) not in _SAID:
        _SAID.add((robot, topic))
        logger.log(level, msg, *args, stacklevel=2)


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


COLLIDE_SPELLINGS = ("<geom name or regex>", FEET, "body:<regex>", "class:<regex>")
"""What a ``collide`` entry may be: geom names, the foot geoms, the colliding geoms of the matching bodies,
the colliding geoms whose own default class matches (the class a geom names or inherits through
``childclass``, not the classes that class nests in)."""


def _geom_label(g: Any) -> str:  # noqa: ANN401 - mujoco's MjsGeom
    return g.name or f"{g.parent.name or 'world'}/{mujoco.mjtGeom(g.type).name.removeprefix('mjGEOM_').lower()}"


def _selector(entry: str) -> tuple[str, str]:
    """``(kind, pattern)`` of one ``collide`` entry: kind ``geom``, ``body`` or ``class``."""
    kind, sep, pattern = entry.partition(":")
    return (kind, pattern) if sep and kind in ("body", "class") else ("geom", entry)


def _selected_by(g: Any, kind: str, pattern: str) -> bool:  # noqa: ANN401 - mujoco's MjsGeom
    """A geom name selects any geom; a body or class only geoms that collide in the MJCF (a body's
    visual meshes stay out of contact)."""
    if kind != "geom" and not (g.contype or g.conaffinity):
        return False
    name = {"geom": g.name, "body": g.parent.name, "class": g.classname.name}[kind]
    return bool(name) and re.fullmatch(pattern, name) is not None


def filter_collisions(spec: mujoco.MjSpec, base_body: str, collide: Sequence[str], feet: Sequence[str],
                      robot: str) -> list[str]:
    """Only the robot's geoms selected by ``collide`` keep their collision bits; every other robot geom gets
    ``contype = conaffinity = 0``. An entry is a geom name or regular expression matched in full, ``feet``
    (the foot geoms), ``body:<regex>`` (the colliding geoms of the matching bodies) or ``class:<regex>``
    (the colliding geoms whose own default class matches: unnamed geoms too). A geom selected by name
    that does not collide in the MJCF is given 1/1. Returns the colliding geoms' labels; an entry that
    selects nothing is an error naming the valid spellings and what the robot has."""
    entries = [p for entry in collide for p in (feet if entry == FEET else [entry])]
    selectors = [_selector(entry) for entry in entries]
    geoms = _robot_geoms(spec, base_body)
    colliding = [g for g in geoms if g.contype or g.conaffinity]
    for entry, (kind, pattern) in zip(entries, selectors, strict=True):
        if not any(_selected_by(g, kind, pattern) for g in geoms):
            found = {"geom": ("named geoms", {g.name for g in geoms}),
                     "body": ("bodies with colliding geoms", {g.parent.name for g in colliding}),
                     "class": ("colliding geoms' classes", {g.classname.name for g in colliding})}[kind]
            raise ValueError(f"robot {robot}: collide entry {entry!r} matches no geom of the robot; its "
                             f"{found[0]} are {sorted(n for n in found[1] if n)}; an entry is one of "
                             f"{', '.join(COLLIDE_SPELLINGS)}")
    kept = []
    for g in geoms:
        if any(_selected_by(g, kind, pattern) for kind, pattern in selectors):
            if not (g.contype or g.conaffinity):
                g.contype, g.conaffinity = 1, 1
            kept.append(_geom_label(g))
        else:
            g.contype, g.conaffinity = 0, 0
    return kept


def set_armature(spec: mujoco.MjSpec, joints: Sequence[str], armature: Sequence[float]) -> None:
    """Rotor armature (kg m^2, the reflected inertia of motor and gearbox) on each actuated joint."""
    for name, value in zip(joints, armature, strict=True):
        spec.joint(name).armature = float(value)


def drop_own_sensors(spec: mujoco.MjSpec) -> list[str]:
    """Delete the MJCF's own sensors: tasks observe only the canonical ones ``build_model`` adds, whose
    names (``imu_quat``, ...) a robot's sensor block may already use. Returns the deleted ones' names."""
    names = [s.name or mujoco.mjtSensor(s.type).name.removeprefix("mjSENS_").lower() for s in spec.sensors]
    for sensor in list(spec.sensors):
        spec.delete(sensor)
    return names


def replace_actuators(spec: mujoco.MjSpec, joints: Sequence[str], kp: Sequence[float], kd: Sequence[float],
                      torque_limits: Sequence[float], targets: Sequence[float]) -> None:
    """Delete the MJCF's actuators and give each of ``joints`` a PD position actuator ``<joint>_pd`` with its
    ``kp``, ``kd`` and torque limit, its control range the joint's (a target never asks past a limit);
    keyframes then fit them, with ``targets`` as their controls (:func:`fit_keyframes`)."""
    for act in list(spec.actuators):
        spec.delete(act)
    for name, p, d, limit in zip(joints, kp, kd, torque_limits, strict=True):
        act = spec.add_actuator(name=f"{name}_pd", target=name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        act.set_to_position(kp=p, kv=d)
        act.forcelimited, act.forcerange = mujoco.mjtLimited.mjLIMITED_TRUE, [-limit, limit]
        act.inheritrange = 1.0  # ctrlrange = the joint's range
    fit_keyframes(spec, targets)


def fit_keyframes(spec: mujoco.MjSpec, targets: Sequence[float]) -> None:
    """Keyframes keep their poses; a keyframe with controls gets ``targets`` (one per actuator that
    replaced the MJCF's, in their order) and no actuator activations: its own ``ctrl`` was meant for
    actuators that are gone and may not even have their number (MuJoCo refuses to compile a mismatch)."""
    for key in spec.keys:
        if len(key.ctrl):
            key.ctrl = list(targets)
        if len(key.act):
            key.act = []


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
