"""What arm tasks put beside the arm, and the geometry of their success: numpy and MuJoCo only.

The lift task's cube (:func:`add_cube`), the insert task's peg and socket (:func:`add_peg_and_socket`) and
the peg's place in the hole (:func:`peg_in_hole`, :func:`inserted`) live here, not in the task's torch module,
so that the sim2sim bridges (``ctrl_rl.deploy.object_sim2sim``, processes without torch) rebuild the very
scene training ran and judge an episode by the very rule ``ctrl-rl eval`` uses. The functions are
array-generic: numpy arrays and torch tensors alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import mujoco
import numpy as np

CUBE = "cube"
"""The lift task's cube: its body, free joint (``cube_joint``), geom (``cube_geom``) and sensors (``object_pos``,
``object_quat``)."""
PEG, SOCKET = "peg", "socket"
"""The peg's body (geom ``peg_geom``, tip site ``peg_tip``) and the socket's body (joints ``socket_x``,
``socket_y``, ``socket_yaw``; walls ``socket_wall<k>``; sensors ``socket_pos``, ``socket_quat``)."""
SOCKET_HOLD = {"armature": 10.0, "damping": 100.0, "frictionloss": 500.0}
"""The socket's joints: 10 kg (kg m^2) of armature, damping and 500 N (N m) of dry friction, more than the arm
can push with, so the socket stays where its reset put it."""
PEG_SOCKET_KEYS = ("peg_half_width", "peg_length", "peg_tip", "clearance", "hole_depth", "wall_thickness",
                   "socket_x", "socket_y", "object_mass")
"""What :func:`add_peg_and_socket` reads: ``InsertConfig``'s fields, which an insert bundle carries (``object``)."""


class PegSocketGeometry(Protocol):
    """The peg and the socket, as ``InsertConfig`` (or a bundle's ``object`` metadata) gives them (m, kg)."""

    peg_half_width: float
    peg_length: float
    peg_tip: float
    clearance: float
    hole_depth: float
    wall_thickness: float
    socket_x: Sequence[float]
    socket_y: Sequence[float]
    object_mass: Sequence[float]


def add_pose_sensors(spec: mujoco.MjSpec, prefix: str, objtype: mujoco.mjtObj, objname: str, frame: str) -> None:
    """Two sensors, ``<prefix>_pos`` and ``<prefix>_quat``: the pose of ``objname`` (a body's frame or a site)
    in body ``frame``'s frame."""
    S, O = mujoco.mjtSensor, mujoco.mjtObj  # noqa: E741 - short names keep the lines readable
    for name, kind in ((f"{prefix}_pos", S.mjSENS_FRAMEPOS), (f"{prefix}_quat", S.mjSENS_FRAMEQUAT)):
        spec.add_sensor(name=name, type=kind, objtype=objtype, objname=objname, reftype=O.mjOBJ_XBODY, refname=frame)


def extend_keyframes(spec: mujoco.MjSpec, qpos: Sequence[float], nv: int) -> None:
    """Keyframes keep their arm poses; the coordinates a scene adds (``qpos``, ``nv`` velocities) are appended."""
    for key in spec.keys:
        if len(key.qpos):
            key.qpos = [*key.qpos, *qpos]
        if len(key.qvel):
            key.qvel = [*key.qvel, *[0.0] * nv]


def site_pose(spec: mujoco.MjSpec, site: str) -> tuple[np.ndarray, np.ndarray]:
    """The site's position and quaternion in its body's frame (compiled: every way an MJCF gives them)."""
    model = spec.compile()
    i = model.site(site).id
    return model.site_pos[i].copy(), model.site_quat[i].copy()


def add_cube(spec: mujoco.MjSpec, half_size: float, mass: float, frame: str) -> None:
    """A free box of ``half_size`` and ``mass`` (colliding with the table and the arm's colliding geoms) and
    two sensors, ``object_pos`` and ``object_quat``: its pose in body ``frame``'s frame. Its contacts take its
    own friction (priority 1: the randomized sliding friction is the one that acts) with torsional and
    rolling friction (condim 6, mjlab's fingertip values), so a pinched cube does not spin about the fingers."""
    body = spec.worldbody.add_body(name=CUBE, pos=[0.3, 0.0, half_size])
    body.add_freejoint(name=f"{CUBE}_joint")
    body.add_geom(name=f"{CUBE}_geom", type=mujoco.mjtGeom.mjGEOM_BOX, size=[half_size] * 3, mass=mass,
                  contype=1, conaffinity=1, condim=6, friction=[1.0, 5e-3, 5e-4], priority=1,
                  rgba=[0.8, 0.2, 0.2, 1.0])
    add_pose_sensors(spec, "object", mujoco.mjtObj.mjOBJ_XBODY, CUBE, frame)
    extend_keyframes(spec, (0.3, 0.0, half_size, 1.0, 0.0, 0.0, 0.0), 6)  # the cube rests where the body puts it


def add_peg_and_socket(spec: mujoco.MjSpec, g: PegSocketGeometry, frame: str, ee_site: str) -> None:
    """The peg, fixed to the body of ``ee_site`` along the site's z axis (its tip ``g.peg_tip`` beyond the
    site), and the socket at the middle of its ranges on its three joints; sensors ``peg_tip_pos`` and
    ``socket_pos`` / ``socket_quat`` in body ``frame``'s frame."""
    pos, quat = site_pose(spec, ee_site)
    centre = np.zeros(3)
    mujoco.mju_rotVecQuat(centre, np.array([0.0, 0.0, g.peg_tip - g.peg_length / 2]), quat)
    w, half = g.peg_half_width, g.peg_length / 2
    peg = spec.site(ee_site).parent.add_body(name=PEG, pos=pos + centre, quat=quat)
    peg.add_geom(name=f"{PEG}_geom", type=mujoco.mjtGeom.mjGEOM_BOX, size=[w, w, half], mass=sum(g.object_mass) / 2,
                 friction=[1.0, 5e-3, 5e-4], priority=1, rgba=[0.9, 0.6, 0.1, 1.0])
    peg.add_site(name=f"{PEG}_tip", pos=[0.0, 0.0, half])
    home = [sum(g.socket_x) / 2, sum(g.socket_y) / 2, 0.0]
    socket = spec.worldbody.add_body(name=SOCKET, pos=home)
    slide, hinge = mujoco.mjtJoint.mjJNT_SLIDE, mujoco.mjtJoint.mjJNT_HINGE
    for name, kind, axis in (("x", slide, [1, 0, 0]), ("y", slide, [0, 1, 0]), ("yaw", hinge, [0, 0, 1])):
        socket.add_joint(name=f"{SOCKET}_{name}", type=kind, axis=axis, **SOCKET_HOLD)
    h, t, d = g.peg_half_width + g.clearance, g.wall_thickness, g.hole_depth
    walls = [((s * (h + t / 2), 0.0), (t / 2, h + t)) for s in (1, -1)] + \
            [((0.0, s * (h + t / 2)), (h, t / 2)) for s in (1, -1)]
    for k, ((x, y), (sx, sy)) in enumerate(walls):
        socket.add_geom(name=f"{SOCKET}_wall{k}", type=mujoco.mjtGeom.mjGEOM_BOX, pos=[x, y, d / 2],
                        size=[sx, sy, d / 2], rgba=[0.3, 0.3, 0.35, 1.0])
    spec.add_exclude(bodyname1="world", bodyname2=SOCKET)  # the walls stand on the table without contacts
    add_pose_sensors(spec, SOCKET, mujoco.mjtObj.mjOBJ_XBODY, SOCKET, frame)
    spec.add_sensor(name="peg_tip_pos", type=mujoco.mjtSensor.mjSENS_FRAMEPOS, objtype=mujoco.mjtObj.mjOBJ_SITE,
                    objname=f"{PEG}_tip", reftype=mujoco.mjtObj.mjOBJ_XBODY, refname=frame)
    extend_keyframes(spec, (0.0, 0.0, 0.0), 3)  # the socket at home


def peg_in_hole(tip: Any, socket: Any, hole_depth: float) -> tuple[Any, Any]:
    """The peg tip's ``lateral`` distance from the hole's (vertical) axis and its ``depth`` below the hole's top
    (m, negative above it), from the tip's position and the socket's base centre (``[..., 3]`` each, one frame
    with z up; the socket stands on the table, its top ``hole_depth`` above its base)."""
    lateral = (((tip[..., :2] - socket[..., :2]) ** 2).sum(-1)) ** 0.5
    return lateral, socket[..., 2] + hole_depth - tip[..., 2]


def inserted(lateral: Any, depth: Any, min_depth: float, max_lateral: float) -> Any:
    """Insert's success condition on one step: the tip at least ``min_depth`` down the hole and within
    ``max_lateral`` of its axis, ``[...]`` bool."""
    return (depth >= min_depth) & (lateral <= max_lateral)
